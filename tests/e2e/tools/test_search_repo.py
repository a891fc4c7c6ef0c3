"""Search respects the repository through a real server (issue 13, items 1 and 6): the
issue's case, `grep "def main"` and `glob **/*.py` in a workspace with ignored `.venv/` and
`node_modules/`, returns only the project's files; read_file of a binary file describes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd.infra.config import PermissionMode
from tests.support.client import text_prompt
from tests.support.server import scripted
from tests.support.session import final_tool_updates, new_session, shown_text


@pytest.fixture
def repo(workspace: Path) -> Path:
    (workspace / ".gitignore").write_text(".venv/\nnode_modules/\n")
    for i in range(3):
        (workspace / "src").mkdir(exist_ok=True)
        (workspace / "src" / f"app{i}.py").write_text("def main():\n    pass\n")
    for tree in (".venv/lib/site-packages/pkg", "node_modules/pkg/lib"):
        (workspace / tree).mkdir(parents=True)
        for i in range(600):  # more than glob's 500-result cap
            (workspace / tree / f"m{i}.py").write_text("def main():\n    pass\n")
    (workspace / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(100))
    return workspace


async def test_search_skips_ignored_trees_through_the_server(server_factory, repo: Path) -> None:
    calls = [
        {"name": "grep", "arguments": {"pattern": "def main"}, "id": "call_grep"},
        {"name": "glob", "arguments": {"pattern": "**/*.py"}, "id": "call_glob"},
        {"name": "list_dir", "arguments": {}, "id": "call_list"},
        {"name": "read_file", "arguments": {"path": "logo.png"}, "id": "call_read"},
    ]
    provider = scripted({"tool_calls": calls}, {"text": "done"})
    async with server_factory(provider, permission_mode=PermissionMode.BYPASS) as server:
        a = await server.client()
        sid = await new_session(a, repo)
        result = await a.call("session/prompt", text_prompt(sid, "find main"))
        assert result["stopReason"] == "end_turn"
        finals = final_tool_updates(a, sid)
        await a.close()
    assert all(finals[c["id"]]["status"] == "completed" for c in calls)
    grep = shown_text(finals["call_grep"]).split("\n")
    assert sorted(grep) == [f"src/app{i}.py:1: def main():" for i in range(3)]
    glob = shown_text(finals["call_glob"]).split("\n")
    assert sorted(glob) == [f"src/app{i}.py" for i in range(3)]
    listing = shown_text(finals["call_list"])
    assert "[2 ignored by git, not listed: .venv/, node_modules/; pass one as path to list it]" in listing
    assert shown_text(finals["call_read"]).startswith("logo.png is a binary file (image/png, 116 bytes)")
