"""Approve with eyes open (issue 17): a permission request's `toolCall` carries what the
call will do — the diff of an edit against the file as it is now, the whole content of a
new file, the command and working directory of a shell call — over a real WebSocket."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.infra.config import PermissionMode
from agentd.tools.files.preview import PREVIEW_MAX_BYTES
from tests.support.client import allow, text_prompt
from tests.support.server import scripted
from tests.support.session import assert_valid_frames, new_session, tool_call


def requests_by_call(server_requests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["params"]["toolCall"]["toolCallId"]: r["params"]["toolCall"] for r in server_requests}


async def test_permission_requests_show_diffs_new_files_and_commands(server_factory, workspace: Path) -> None:
    (workspace / "app.py").write_text("def greet():\n    return 'hi'\n")
    (workspace / "old.txt").write_text("old content\n")
    (workspace / "huge.txt").write_text("x" * (PREVIEW_MAX_BYTES + 10))
    provider = scripted(
        {
            "tool_calls": [
                tool_call("edit_file", "c_edit", path="app.py", old_string="'hi'", new_string="'hello'"),
                tool_call("write_file", "c_new", path="pkg/new.py", content="print('new')\n"),
                tool_call("write_file", "c_over", path="old.txt", content="new content\n"),
                tool_call("edit_file", "c_miss", path="app.py", old_string="absent", new_string="x"),
                tool_call("write_file", "c_huge", path="huge.txt", content="small\n"),
                tool_call("bash", "c_bash", command="echo ran && pwd"),
            ]
        },
        {"text": "done"},
    )
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        client = await server.client()
        client.on_request = allow("allow_once")
        sid = await new_session(client, workspace)
        result = await client.call("session/prompt", text_prompt(sid, "change things"))
        assert result["stopReason"] == "end_turn"

        asked = requests_by_call(client.server_requests)
        root = workspace  # resolved by the fixture
        # An edit: the whole file before and after, computed before approval.
        assert asked["c_edit"]["content"] == [
            {
                "type": "diff",
                "path": str(root / "app.py"),
                "oldText": "def greet():\n    return 'hi'\n",
                "newText": "def greet():\n    return 'hello'\n",
            }
        ]
        # A new file: no oldText, the full content (its folder does not exist yet).
        assert asked["c_new"]["content"] == [
            {"type": "diff", "path": str(root / "pkg" / "new.py"), "newText": "print('new')\n"}
        ]
        assert asked["c_over"]["content"][0]["oldText"] == "old content\n"
        assert asked["c_over"]["content"][0]["newText"] == "new content\n"
        # An edit that cannot apply says so; a file over the bound is described, not read.
        [miss] = asked["c_miss"]["content"]
        assert miss["type"] == "content" and "will fail" in miss["content"]["text"]
        [huge] = asked["c_huge"]["content"]
        assert "too large to preview" in huge["content"]["text"]
        # A command: exactly what runs, and where.
        assert asked["c_bash"]["rawInput"] == {"command": "echo ran && pwd"}
        assert asked["c_bash"]["_meta"]["agentd"] == {"command": "echo ran && pwd", "cwd": str(workspace)}
        assert "content" not in asked["c_bash"]
        # The preview is what the call did: the edit ran as shown.
        assert (workspace / "app.py").read_text() == "def greet():\n    return 'hello'\n"
        assert_valid_frames(client)
        await client.close()


async def test_a_symlink_out_of_the_workspace_is_not_previewed(
    server_factory, workspace: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not show\n")
    (workspace / "link.txt").symlink_to(secret)
    provider = scripted(
        {"tool_calls": [tool_call("write_file", "c_link", path="link.txt", content="x\n")]},
        {"text": "done"},
    )
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        client = await server.client()
        client.on_request = allow("reject_once")
        sid = await new_session(client, workspace)
        await client.call("session/prompt", text_prompt(sid, "write through the link"))
        [request] = client.server_requests
        shown = str(request["params"]["toolCall"].get("content", []))
        assert "do not show" not in shown
        assert secret.read_text() == "do not show\n"
        await client.close()
