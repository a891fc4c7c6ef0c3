"""Tool previews (issue 17): what a call will do, computed before approval, without
changing anything, bounded, and never through a link out of the workspace."""

from __future__ import annotations

from pathlib import Path

from agentd.tools.base import ToolContext
from agentd.tools.files.preview import PREVIEW_MAX_BYTES, ToolPreview
from agentd.tools.files.tools import EditFile, WriteFile
from agentd.tools.shell.bash import Bash


def ctx(root: Path) -> ToolContext:
    return ToolContext(cwd=root, session_id="s")  # the fixture's path is resolved


async def test_write_preview_diffs_an_existing_file_and_shows_a_new_one_whole(workspace: Path) -> None:
    (workspace / "a.txt").write_text("old\n")
    shown = await WriteFile().preview({"path": "a.txt", "content": "new\n"}, ctx(workspace))
    assert shown.content == [
        {"type": "diff", "path": str(workspace / "a.txt"), "oldText": "old\n", "newText": "new\n"}
    ]
    fresh = await WriteFile().preview({"path": "d/e/b.txt", "content": "hi\n"}, ctx(workspace))
    new_path = str(workspace / "d/e/b.txt")
    assert fresh.content == [{"type": "diff", "path": new_path, "newText": "hi\n"}]
    assert not (workspace / "d").exists()  # a preview creates nothing
    assert (workspace / "a.txt").read_text() == "old\n"


async def test_large_binary_and_unappliable_previews_say_why(workspace: Path) -> None:
    (workspace / "big.txt").write_text("x" * (PREVIEW_MAX_BYTES + 1))
    (workspace / "bin.dat").write_bytes(b"\x00\x01\x02" * 10)
    (workspace / "code.py").write_text("a = 1\n")
    big = await WriteFile().preview({"path": "big.txt", "content": ""}, ctx(workspace))
    assert "too large to preview" in big.content[0]["content"]["text"]
    binary = await WriteFile().preview({"path": "bin.dat", "content": ""}, ctx(workspace))
    assert "binary" in binary.content[0]["content"]["text"]
    miss = await EditFile().preview(
        {"path": "code.py", "old_string": "b = 2", "new_string": "c"}, ctx(workspace)
    )
    assert "will fail" in miss.content[0]["content"]["text"]
    gone = await EditFile().preview({"path": "nope.py", "old_string": "a", "new_string": "b"}, ctx(workspace))
    assert "will fail" in gone.content[0]["content"]["text"]
    edit = await EditFile().preview({"path": "code.py", "old_string": "1", "new_string": "2"}, ctx(workspace))
    assert (edit.content[0]["oldText"], edit.content[0]["newText"]) == ("a = 1\n", "a = 2\n")


async def test_a_link_inside_the_workspace_is_not_followed(workspace: Path) -> None:
    root = workspace / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "real.txt").write_text("inside\n")
    (root / "alias").symlink_to(root / "sub")  # resolves inside, but the I/O never follows links
    shown = await WriteFile().preview({"path": "alias/real.txt", "content": "x"}, ctx(root))
    assert shown.content[0]["oldText"] == "inside\n"  # resolved once, then read link-free


async def test_bash_preview_is_the_command_and_the_workspace(workspace: Path) -> None:
    shown = await Bash().preview({"command": "make test", "run_in_background": True}, ctx(workspace))
    assert shown.meta == {"command": "make test", "cwd": str(workspace), "background": True}
    call = {"toolCallId": "c", "title": "Run"}
    assert shown.apply(call) == {**call, "_meta": {"agentd": shown.meta}}
    assert ToolPreview().apply(call) == call
