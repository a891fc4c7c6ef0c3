"""Built-in tools: workspace confinement, file tools, bash lifecycle, registry."""

from __future__ import annotations

import asyncio
import os
import re
import stat
from pathlib import Path

import jsonschema
import pytest

from agentd.tools.base import Access, ToolContext, ToolKind
from agentd.tools.errors import ToolError
from agentd.tools.files.tools import READ_MAX_LINES, EditFile, ReadFile, WriteFile
from agentd.tools.files.workspace import display_path, resolve_in_workspace
from agentd.tools.registry import BUILTIN_TOOLS, builtin_tools, system_prompt_guidance
from agentd.tools.search.listdir import ListDir
from agentd.tools.shell.bash import OUTPUT_CAP, Bash
from tests.support.proc import process_alive, wait_dead, wait_pid

# --- fixtures and helpers ---


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root.resolve()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text("top secret\n")
    return d.resolve()


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext(cwd=ws, session_id="s-test")


def _names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


# --- confinement ---


def test_resolve_relative_and_nested_new_path(ws: Path) -> None:
    assert resolve_in_workspace(ws, "a.txt") == ws / "a.txt"
    assert resolve_in_workspace(ws, ".") == ws
    assert resolve_in_workspace(ws, "sub/../b.txt") == ws / "b.txt"  # `..` that stays inside is fine
    assert resolve_in_workspace(ws, "new/deeper/file.py") == ws / "new" / "deeper" / "file.py"
    assert resolve_in_workspace(ws, str(ws / "x" / "y")) == ws / "x" / "y"  # absolute inside


@pytest.mark.parametrize("path", ["../x", "sub/../../x", "..", "/etc/passwd"])
def test_resolve_refuses_escapes(ws: Path, path: str) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        resolve_in_workspace(ws, path)


def test_resolve_refuses_absolute_sibling_with_common_prefix(ws: Path, tmp_path: Path) -> None:
    # "/tmp/.../ws-evil" starts with the string "/tmp/.../ws" but is not inside it.
    (tmp_path / "ws-evil").mkdir()
    with pytest.raises(ToolError, match="outside the workspace"):
        resolve_in_workspace(ws, str(tmp_path / "ws-evil" / "f"))


def test_resolve_refuses_symlink_file_escape(ws: Path, outside: Path) -> None:
    (ws / "link.txt").symlink_to(outside / "secret.txt")
    (ws / "dangling").symlink_to(outside / "not-yet.txt")
    with pytest.raises(ToolError, match="outside the workspace"):
        resolve_in_workspace(ws, "link.txt")
    with pytest.raises(ToolError, match="outside the workspace"):
        resolve_in_workspace(ws, "dangling")


def test_resolve_refuses_symlinked_dir_escape(ws: Path, outside: Path) -> None:
    (ws / "linkdir").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ToolError, match="outside the workspace"):
        resolve_in_workspace(ws, "linkdir/secret.txt")
    with pytest.raises(ToolError, match="outside the workspace"):
        resolve_in_workspace(ws, "linkdir/new/file.txt")


def test_resolve_allows_symlink_within_workspace(ws: Path) -> None:
    (ws / "real").mkdir()
    (ws / "alias").symlink_to(ws / "real", target_is_directory=True)
    assert resolve_in_workspace(ws, "alias/f.txt") == ws / "real" / "f.txt"


def test_resolve_root_given_through_symlink(tmp_path: Path, ws: Path) -> None:
    # The root itself is resolved first, so a symlinked workspace root still works.
    (tmp_path / "ws-link").symlink_to(ws, target_is_directory=True)
    assert resolve_in_workspace(tmp_path / "ws-link", "a/b") == ws / "a" / "b"


@pytest.mark.parametrize("path", ["", "   ", "a\0b"])
def test_resolve_rejects_bad_paths(ws: Path, path: str) -> None:
    with pytest.raises(ToolError):
        resolve_in_workspace(ws, path)


def test_display_path(ws: Path) -> None:
    assert display_path(ws, ws / "a" / "b.txt") == "a/b.txt"
    assert display_path(ws, ws) == "."


async def test_tools_refuse_escapes_without_side_effects(ctx: ToolContext, ws: Path, outside: Path) -> None:
    (ws / "linkdir").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ToolError, match="outside the workspace"):
        await ReadFile().run({"path": str(outside / "secret.txt")}, ctx)
    with pytest.raises(ToolError, match="outside the workspace"):
        await WriteFile().run({"path": "linkdir/pwned.txt", "content": "x"}, ctx)
    with pytest.raises(ToolError, match="outside the workspace"):
        await EditFile().run({"path": "../outside/secret.txt", "old_string": "top", "new_string": "no"}, ctx)
    with pytest.raises(ToolError, match="outside the workspace"):
        await ListDir().run({"path": "linkdir"}, ctx)
    assert _names(outside) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "top secret\n"
    # locations() must not raise for a bad path: the pending event just has none.
    assert ReadFile().locations({"path": "../x"}, ctx) == []


# --- read_file ---


async def test_read_whole_file(ctx: ToolContext, ws: Path) -> None:
    (ws / "a.txt").write_text("alpha\nbeta\r\ngamma")
    res = await ReadFile().run({"path": "a.txt"}, ctx)
    assert res.output == "     1\talpha\n     2\tbeta\n     3\tgamma"
    assert not res.is_error
    assert res.locations == [{"path": str(ws / "a.txt"), "line": 1}]
    assert res.raw_output == {"lines": 3, "truncated": False}


async def test_read_offset_and_limit(ctx: ToolContext, ws: Path) -> None:
    (ws / "n.txt").write_text("".join(f"line{i}\n" for i in range(1, 11)))
    tool = ReadFile()
    res = await tool.run({"path": "n.txt", "offset": 3, "limit": 2}, ctx)
    assert res.output == (
        "     3\tline3\n     4\tline4\n[showing lines 3-4 of 10; the file continues at line 5]"
    )
    assert res.locations == [{"path": str(ws / "n.txt"), "line": 3}]
    assert tool.locations({"path": "n.txt", "offset": 3}, ctx) == [{"path": str(ws / "n.txt"), "line": 3}]
    assert tool.title({"path": "n.txt", "offset": 3, "limit": 2}) == "Read n.txt (lines 3-4)"

    tail = await tool.run({"path": "n.txt", "offset": 9}, ctx)
    assert tail.output == "     9\tline9\n    10\tline10"  # reaches the end: no marker

    with pytest.raises(ToolError, match=r"past the end .* 10 lines"):
        await tool.run({"path": "n.txt", "offset": 11}, ctx)
    with pytest.raises(ToolError, match="offset"):
        await tool.run({"path": "n.txt", "offset": 0}, ctx)


async def test_read_caps_lines_with_marker(ctx: ToolContext, ws: Path) -> None:
    (ws / "big.txt").write_text("".join(f"{i}\n" for i in range(1, READ_MAX_LINES + 501)))
    res = await ReadFile().run({"path": "big.txt"}, ctx)
    lines = res.output.split("\n")
    assert len(lines) == READ_MAX_LINES + 1
    assert lines[-2] == f"{READ_MAX_LINES:6d}\t{READ_MAX_LINES}"
    assert f"offset={READ_MAX_LINES + 1}" in lines[-1] and "truncated" in lines[-1]
    assert f"showing lines 1-{READ_MAX_LINES} of {READ_MAX_LINES + 500};" in lines[-1]
    assert res.raw_output == {"lines": READ_MAX_LINES, "truncated": True, "total_lines": READ_MAX_LINES + 500}


async def test_read_caps_bytes(ctx: ToolContext, ws: Path) -> None:
    (ws / "wide.txt").write_text(("x" * 1000 + "\n") * 1000)  # ~1 MB in 1000 lines
    res = await ReadFile().run({"path": "wide.txt"}, ctx)
    assert len(res.output.encode()) <= 256 * 1024 + 200
    assert "truncated at 256 KiB" in res.output
    assert res.raw_output is not None and res.raw_output["truncated"] is True


async def test_read_errors(ctx: ToolContext, ws: Path) -> None:
    (ws / "bin.dat").write_bytes(b"\x7fELF\x00\x01\x02")
    (ws / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (ws / "d").mkdir()
    (ws / "empty.txt").write_text("")
    tool = ReadFile()
    binary = await tool.run({"path": "bin.dat"}, ctx)  # described, not dumped
    assert binary.output.startswith("bin.dat is a binary file (application/x-executable, 7 bytes)")
    assert binary.raw_output == {"lines": 0, "binary": True, "bytes": 7, "mime": "application/x-executable"}
    with pytest.raises(ToolError, match="not valid UTF-8"):
        await tool.run({"path": "latin1.txt"}, ctx)
    with pytest.raises(ToolError, match=re.escape("file not found: missing.txt")):
        await tool.run({"path": "missing.txt"}, ctx)
    with pytest.raises(ToolError, match="is a directory"):
        await tool.run({"path": "d"}, ctx)
    assert (await tool.run({"path": "empty.txt"}, ctx)).output == "(empty file)"


# --- write_file ---


async def test_write_new_file_creates_parents_and_diff_without_old_text(ctx: ToolContext, ws: Path) -> None:
    tool = WriteFile()
    res = await tool.run({"path": "pkg/sub/mod.py", "content": "print('hi')\n"}, ctx)
    target = ws / "pkg" / "sub" / "mod.py"
    assert target.read_text() == "print('hi')\n"
    assert res.content == [{"type": "diff", "path": str(target), "newText": "print('hi')\n"}]
    assert "oldText" not in res.content[0]
    assert res.raw_output == {"bytes": 12, "created": True}
    assert res.output == "Created pkg/sub/mod.py (12 bytes)"
    assert res.locations == [{"path": str(target)}]


async def test_write_overwrite_has_old_text_and_keeps_mode(ctx: ToolContext, ws: Path) -> None:
    script = ws / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o755)
    res = await WriteFile().run({"path": "run.sh", "content": "echo new\n"}, ctx)
    assert script.read_text() == "echo new\n"
    assert res.content == [
        {"type": "diff", "path": str(script), "oldText": "echo old\n", "newText": "echo new\n"}
    ]
    assert res.raw_output == {"bytes": 9, "created": False}
    assert stat.S_IMODE(script.stat().st_mode) == 0o755


async def test_write_is_atomic_and_leaves_no_temp_files(
    ctx: ToolContext, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = ws / "f.txt"
    target.write_text("original\n")
    await WriteFile().run({"path": "f.txt", "content": "second\n"}, ctx)
    assert _names(ws) == ["f.txt"]

    # A failure at the final rename must leave the old content and no temp file behind.
    def boom(src: object, dst: object, **dir_fds: object) -> None:  # renames relative to a dir fd
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(ToolError, match=re.escape("cannot write f.txt: No space left on device")):
        await WriteFile().run({"path": "f.txt", "content": "third\n"}, ctx)
    assert target.read_text() == "second\n"
    assert _names(ws) == ["f.txt"]


async def test_write_through_internal_symlink_keeps_link(ctx: ToolContext, ws: Path) -> None:
    (ws / "real.txt").write_text("a\n")
    (ws / "alias.txt").symlink_to(ws / "real.txt")
    await WriteFile().run({"path": "alias.txt", "content": "b\n"}, ctx)
    assert (ws / "alias.txt").is_symlink()
    assert (ws / "real.txt").read_text() == "b\n"


async def test_write_to_directory_is_error(ctx: ToolContext, ws: Path) -> None:
    (ws / "d").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        await WriteFile().run({"path": "d", "content": "x"}, ctx)


# --- edit_file ---


async def test_edit_exactly_once(ctx: ToolContext, ws: Path) -> None:
    f = ws / "app.py"
    old = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
    f.write_text(old)
    res = await EditFile().run(
        {"path": "app.py", "old_string": "def g():\n    return 2", "new_string": "def g():\n    return 3"},
        ctx,
    )
    new = "def f():\n    return 1\n\n\ndef g():\n    return 3\n"
    assert f.read_text() == new
    assert res.content == [{"type": "diff", "path": str(f), "oldText": old, "newText": new}]
    assert res.raw_output == {"replacements": 1, "line": 5}
    assert res.locations == [{"path": str(f), "line": 5}]
    assert res.output == "Edited app.py: replaced 1 occurrence at line 5"
    assert _names(ws) == ["app.py"]  # atomic write left no temp file


async def test_edit_no_match_is_clear_error_and_file_unchanged(ctx: ToolContext, ws: Path) -> None:
    f = ws / "a.py"
    f.write_text("x = 1\n    y = 2\n")
    before = f.read_bytes()
    with pytest.raises(ToolError) as exc:
        await EditFile().run({"path": "a.py", "old_string": "x = 2", "new_string": "x = 3"}, ctx)
    msg = str(exc.value)
    assert msg.startswith("no match for old_string in a.py")
    assert "read_file" in msg  # the hint says how to recover
    # Whitespace and read_file prefixes are called out specifically.
    with pytest.raises(ToolError, match="different leading/trailing whitespace"):
        await EditFile().run({"path": "a.py", "old_string": "\ty = 2", "new_string": "y = 3"}, ctx)
    with pytest.raises(ToolError, match="line-number prefixes"):
        await EditFile().run({"path": "a.py", "old_string": "     1\tx = 1", "new_string": "x = 3"}, ctx)
    assert f.read_bytes() == before


async def test_edit_multiple_matches_is_error_and_file_unchanged(ctx: ToolContext, ws: Path) -> None:
    f = ws / "a.py"
    f.write_text("a = 0\nb = 0\nc = 1\n")
    before = f.read_bytes()
    with pytest.raises(ToolError) as exc:
        await EditFile().run({"path": "a.py", "old_string": " = 0", "new_string": " = 9"}, ctx)
    msg = str(exc.value)
    assert "matches 2 times" in msg and "lines 1, 2" in msg and "context" in msg
    assert f.read_bytes() == before


async def test_edit_overlapping_matches_count_as_ambiguous(ctx: ToolContext, ws: Path) -> None:
    (ws / "a.txt").write_text("aaa")
    with pytest.raises(ToolError, match="matches 2 times"):
        await EditFile().run({"path": "a.txt", "old_string": "aa", "new_string": "b"}, ctx)
    assert (ws / "a.txt").read_text() == "aaa"


async def test_edit_argument_errors(ctx: ToolContext, ws: Path) -> None:
    (ws / "a.txt").write_text("hello\n")
    tool = EditFile()
    with pytest.raises(ToolError, match="old_string must not be empty"):
        await tool.run({"path": "a.txt", "old_string": "", "new_string": "x"}, ctx)
    with pytest.raises(ToolError, match="identical"):
        await tool.run({"path": "a.txt", "old_string": "hello", "new_string": "hello"}, ctx)
    with pytest.raises(
        ToolError, match=re.escape("file not found: nope.txt; to create a file use write_file")
    ):
        await tool.run({"path": "nope.txt", "old_string": "a", "new_string": "b"}, ctx)
    assert (ws / "a.txt").read_text() == "hello\n"


async def test_edit_preserves_crlf(ctx: ToolContext, ws: Path) -> None:
    f = ws / "w.txt"
    f.write_bytes(b"one\r\ntwo\r\n")
    with pytest.raises(ToolError, match="CRLF"):
        await EditFile().run({"path": "w.txt", "old_string": "one\ntwo", "new_string": "x"}, ctx)
    await EditFile().run({"path": "w.txt", "old_string": "two", "new_string": "2"}, ctx)
    assert f.read_bytes() == b"one\r\n2\r\n"


# --- list_dir ---


async def test_list_dir(ctx: ToolContext, ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "m.py").write_text("")
    (ws / "b.txt").write_text("")
    (ws / ".hidden").write_text("")
    (ws / "a_dir").mkdir()
    res = await ListDir().run({}, ctx)
    assert res.output == ".hidden\na_dir/\nb.txt\nsrc/"
    assert res.raw_output == {"entries": 4, "ignored": 0, "truncated": False}
    assert res.locations == [{"path": str(ws)}]
    assert (await ListDir().run({"path": "src"}, ctx)).output == "m.py"
    (ws / "empty").mkdir()
    assert (await ListDir().run({"path": "empty"}, ctx)).output == "(empty directory)"
    with pytest.raises(ToolError, match="not a directory"):
        await ListDir().run({"path": "b.txt"}, ctx)
    with pytest.raises(ToolError, match="directory not found"):
        await ListDir().run({"path": "nope"}, ctx)


async def test_list_dir_caps_entries(ctx: ToolContext, ws: Path) -> None:
    for i in range(1005):
        (ws / f"f{i:04d}").write_text("")
    res = await ListDir().run({"path": "."}, ctx)
    lines = res.output.split("\n")
    assert lines[0] == "f0000" and lines[999] == "f0999"
    assert lines[-1] == "[... 5 more entries not shown]"
    assert res.raw_output == {"entries": 1005, "ignored": 0, "truncated": True}


# --- bash ---


async def test_bash_output_and_exit_code(ctx: ToolContext, ws: Path) -> None:
    res = await Bash().run({"command": "pwd; echo out; echo err >&2; exit 3"}, ctx)
    assert res.output == f"{ws}\nout\nerr\n[exit code 3]"
    assert res.is_error is False
    assert res.raw_output == {"exitCode": 3, "truncated": False}

    ok = await Bash().run({"command": "printf 'a\\nb\\n'"}, ctx)
    assert ok.output == "a\nb"
    assert ok.raw_output == {"exitCode": 0, "truncated": False}

    silent = await Bash().run({"command": "true"}, ctx)
    assert silent.output == "(no output)"


async def test_bash_stdin_is_devnull(ctx: ToolContext) -> None:
    res = await Bash().run({"command": "cat; echo done"}, ctx)
    assert res.output == "done"


async def test_bash_caps_output_keeping_head_and_tail(ctx: ToolContext) -> None:
    cmd = "echo START; head -c 200000 /dev/zero | tr '\\0' x; echo; echo END"
    res = await Bash().run({"command": cmd}, ctx)
    assert res.output.startswith("START\n")
    body, note = res.output.rsplit("\n", 1)
    assert body.endswith("\nEND")
    assert "characters of output omitted" in body
    assert len(body) < OUTPUT_CAP + 200
    assert res.raw_output is not None
    log = res.raw_output.pop("outputFile")  # the full output, for the model (test_spill.py)
    assert log in note
    assert res.raw_output == {"exitCode": 0, "truncated": True}


async def test_bash_timeout_kills_process_group(ctx: ToolContext, ws: Path) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    res = await Bash().run(
        {"command": "sleep 30 & echo $! > child.pid; echo started; wait", "timeout": 0.5}, ctx
    )
    assert loop.time() - started < 10
    assert res.is_error is True
    assert res.output.startswith("started\n")
    assert "[timed out after 0.5 s" in res.output
    assert res.raw_output is not None and res.raw_output["timedOut"] is True
    child = int((ws / "child.pid").read_text())
    await wait_dead(child)


async def test_bash_sigterm_ignoring_child_gets_sigkill(ctx: ToolContext, ws: Path) -> None:
    cmd = "trap '' TERM; (trap '' TERM; sleep 30) & echo $! > child.pid; wait"
    res = await Bash().run({"command": cmd, "timeout": 0.3}, ctx)
    assert res.is_error is True and "timed out" in res.output
    await wait_dead(int((ws / "child.pid").read_text()))


async def test_bash_cancellation_kills_process_group(ctx: ToolContext, ws: Path) -> None:
    cmd = "echo $$ > shell.pid; sleep 30 & echo $! > child.pid; wait"
    task = asyncio.create_task(Bash().run({"command": cmd}, ctx))
    child = await wait_pid(ws / "child.pid")
    shell = await wait_pid(ws / "shell.pid")
    assert process_alive(child) and process_alive(shell)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_dead(child)
    await wait_dead(shell)


async def test_bash_background_leftovers_are_stopped(ctx: ToolContext, ws: Path) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    res = await Bash().run({"command": "sleep 30 & echo $! > bg.pid; echo launched"}, ctx)
    assert loop.time() - started < 5  # didn't wait for the background sleep's pipe to close
    assert res.output == "launched"
    await wait_dead(int((ws / "bg.pid").read_text()))


async def test_bash_streams_progress(ws: Path) -> None:
    reports: list[str] = []

    async def report(text: str) -> None:
        reports.append(text)

    ctx = ToolContext(cwd=ws, session_id="s", report_progress=report)
    res = await Bash().run({"command": "echo first; sleep 0.8; echo second"}, ctx)
    assert res.output == "first\nsecond"
    # "first" was streamed while the command was still sleeping.
    assert any(r == "first\n" for r in reports)
    # Rate limit: ~0.8 s of runtime at one report per 0.25 s at most.
    assert 1 <= len(reports) <= 5


async def test_bash_argument_errors(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="command"):
        await Bash().run({"command": "  "}, ctx)
    with pytest.raises(ToolError, match="timeout"):
        await Bash().run({"command": "true", "timeout": -1}, ctx)
    with pytest.raises(ToolError, match="timeout"):
        await Bash().run({"command": "true", "timeout": "10"}, ctx)


def test_bash_title() -> None:
    assert Bash().title({"command": "ls -la"}) == "Run `ls -la`"
    assert Bash().title({"command": "echo a\necho b"}) == "Run `echo a …`"


# --- registry and tool metadata ---


def test_builtin_tools_and_metadata() -> None:
    tools = builtin_tools()
    assert list(tools) == [
        "read_file",
        "write_file",
        "edit_file",
        "list_dir",
        "bash",
        "glob",
        "grep",
        "todo_write",
        "wait",
        "task_output",
    ]
    assert [type(t) for t in tools.values()] == list(BUILTIN_TOOLS)
    expected = {
        "read_file": (ToolKind.READ, Access.READ),
        "write_file": (ToolKind.EDIT, Access.WRITE),
        "edit_file": (ToolKind.EDIT, Access.WRITE),
        "list_dir": (ToolKind.READ, Access.READ),
        "bash": (ToolKind.EXECUTE, Access.EXECUTE),
        "glob": (ToolKind.SEARCH, Access.READ),
        "grep": (ToolKind.SEARCH, Access.READ),
        "todo_write": (ToolKind.THINK, Access.READ),
        "wait": (ToolKind.OTHER, Access.READ),
        "task_output": (ToolKind.OTHER, Access.READ),
    }
    for name, tool in tools.items():
        assert (tool.kind, tool.access) == expected[name]
        assert tool.description and "\n" not in tool.description
        assert 2 <= tool.guidance.count(". ") + 1 <= 5
        schema = tool.parameters
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert isinstance(schema["required"], list)
    assert tools["edit_file"].parameters["required"] == ["path", "old_string", "new_string"]
    assert tools["list_dir"].parameters["required"] == []


def test_system_prompt_guidance() -> None:
    tools = builtin_tools()
    text = system_prompt_guidance(tools)
    lines = text.split("\n")
    assert lines[0] == "## Tools"
    assert [line.split(":", 1)[0] for line in lines[1:]] == [f"- {n}" for n in tools]
    assert lines[1] == f"- read_file: {ReadFile.guidance}"
    assert system_prompt_guidance(tools.values()) == text  # iterable of tools works too
