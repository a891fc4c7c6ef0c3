"""Search, todo and background-task tools: glob, grep, todo_write, wait, task_output,
bash run_in_background, and the registry with all built-in tools."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import jsonschema
import pytest

from agentd.tools.base import Access, ToolContext, ToolKind
from agentd.tools.errors import ToolError
from agentd.tools.registry import BUILTIN_TOOLS, builtin_tools, system_prompt_guidance
from agentd.tools.search.grep import GLOB_MAX_RESULTS, GREP_MAX_FILE_BYTES, Glob, Grep
from agentd.tools.shell.background import INTERRUPTED_TEXT, BackgroundTasks, TaskOutput
from agentd.tools.shell.bash import Bash
from agentd.tools.shell.wait_tool import Wait
from agentd.tools.todo import TodoList, TodoWrite
from tests.support.polling import until
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
    (d / "secret.txt").write_text("top secret needle\n")
    (d / "deep").mkdir()
    (d / "deep" / "more.txt").write_text("needle\n")
    return d.resolve()


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext(cwd=ws, session_id="s-test")


@pytest.fixture
async def bg() -> AsyncIterator[BackgroundTasks]:
    tasks = BackgroundTasks()
    try:
        yield tasks
    finally:
        await tasks.close()


@pytest.fixture
def bg_ctx(ws: Path, bg: BackgroundTasks) -> ToolContext:
    return ToolContext(cwd=ws, session_id="s-bg", background=bg, interrupted=asyncio.Event())


class ObservedEvent(asyncio.Event):
    """An Event that announces when someone starts waiting on it (no sleeps in tests)."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = asyncio.Event()

    async def wait(self) -> bool:  # type: ignore[override]
        self.waiting.set()
        return await super().wait()


def _write(path: Path, text: str, mtime: float | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


# --- glob ---


async def test_glob_recursive_sorted_newest_first(ctx: ToolContext, ws: Path) -> None:
    _write(ws / "a.py", "", mtime=1_000)
    _write(ws / "src" / "b.py", "", mtime=3_000)
    _write(ws / "src" / "deep" / "c.py", "", mtime=2_000)
    _write(ws / "src" / "notes.txt", "", mtime=4_000)
    _write(ws / ".git" / "hooks" / "x.py", "")
    res = await Glob().run({"pattern": "**/*.py"}, ctx)
    assert res.output == "src/b.py\nsrc/deep/c.py\na.py"
    assert res.raw_output == {"matches": 3, "truncated": False}
    assert res.locations == [{"path": str(ws)}]

    top = await Glob().run({"pattern": "*.py"}, ctx)
    assert top.output == "a.py"  # `*` does not cross directories
    assert (await Glob().run({"pattern": "src/*"}, ctx)).output == "src/notes.txt\nsrc/b.py"
    assert (await Glob().run({"pattern": "src/**/*.{py,txt}"}, ctx)).output.split("\n") == [
        "src/notes.txt",
        "src/b.py",
        "src/deep/c.py",
    ]


async def test_glob_in_subdirectory_reports_workspace_paths(ctx: ToolContext, ws: Path) -> None:
    _write(ws / "pkg" / "mod" / "x.py", "")
    _write(ws / "other" / "y.py", "")
    res = await Glob().run({"pattern": "**/*.py", "path": "pkg"}, ctx)
    assert res.output == "pkg/mod/x.py"  # usable with read_file as is
    assert res.locations == [{"path": str(ws / "pkg")}]
    assert Glob().locations({"pattern": "*", "path": "pkg"}, ctx) == [{"path": str(ws / "pkg")}]


async def test_glob_no_match_hints_at_recursion(ctx: ToolContext, ws: Path) -> None:
    _write(ws / "src" / "b.py", "")
    res = await Glob().run({"pattern": "*.py"}, ctx)
    assert res.output.startswith("No files match '*.py' in .")
    assert "'**/*.py'" in res.output
    assert res.raw_output == {"matches": 0, "truncated": False}


async def test_glob_confinement(ctx: ToolContext, ws: Path, outside: Path) -> None:
    _write(ws / "inside.txt", "")
    (ws / "linkdir").symlink_to(outside, target_is_directory=True)
    (ws / "linkfile.txt").symlink_to(outside / "secret.txt")
    (ws / "alias.txt").symlink_to(ws / "inside.txt")  # inside, but symlinks are skipped (as rg does)
    (ws / "loop").symlink_to(ws, target_is_directory=True)  # never descended, so no loop
    res = await Glob().run({"pattern": "**/*"}, ctx)
    assert res.output == "inside.txt"
    assert str(outside) not in res.output and "secret" not in res.output
    for path in ["../", "..", str(outside), "linkdir"]:
        with pytest.raises(ToolError, match="outside the workspace"):
            await Glob().run({"pattern": "*", "path": path}, ctx)
    with pytest.raises(ToolError, match=r"'\.\.'"):
        await Glob().run({"pattern": "../outside/*"}, ctx)
    with pytest.raises(ToolError, match="absolute"):
        await Glob().run({"pattern": str(outside) + "/*"}, ctx)
    assert Glob().locations({"pattern": "*", "path": "../"}, ctx) == []


async def test_glob_caps_results(ctx: ToolContext, ws: Path) -> None:
    for i in range(GLOB_MAX_RESULTS + 7):
        _write(ws / "many" / f"f{i:04d}.txt", "", mtime=10_000 + i)
    res = await Glob().run({"pattern": "many/*.txt"}, ctx)
    lines = res.output.split("\n")
    assert len(lines) == GLOB_MAX_RESULTS + 1
    assert lines[0] == f"many/f{GLOB_MAX_RESULTS + 6:04d}.txt"  # newest first
    assert lines[-1].startswith("[... 7 more matches not shown")
    assert res.raw_output == {"matches": GLOB_MAX_RESULTS + 7, "truncated": True}


async def test_glob_argument_errors(ctx: ToolContext, ws: Path) -> None:
    _write(ws / "f.txt", "")
    with pytest.raises(ToolError, match="directory not found"):
        await Glob().run({"pattern": "*", "path": "nope"}, ctx)
    with pytest.raises(ToolError, match="is a file"):
        await Glob().run({"pattern": "*", "path": "f.txt"}, ctx)
    with pytest.raises(ToolError, match="pattern"):
        await Glob().run({"pattern": ""}, ctx)
    with pytest.raises(ToolError, match="pattern"):
        await Glob().run({}, ctx)


def test_glob_title() -> None:
    assert Glob().title({"pattern": "**/*.py"}) == "Find **/*.py"
    assert Glob().title({"pattern": "*.py", "path": "src"}) == "Find *.py in src"


# --- grep ---


async def test_grep_results_format_and_filters(ctx: ToolContext, ws: Path) -> None:
    _write(ws / "src" / "app.py", "import os\ndef main():\n    return os.getcwd()\n", mtime=2_000)
    _write(ws / "src" / "util.js", "function main() {}\r\n", mtime=1_000)  # older: after app.py
    _write(ws / "README.md", "Run MAIN to start\n")
    _write(ws / ".git" / "config", "def main(): pass\n")
    res = await Grep().run({"pattern": r"def main\(|function main"}, ctx)
    assert res.output == "src/app.py:2: def main():\nsrc/util.js:1: function main() {}"
    assert res.raw_output is not None
    assert res.raw_output["matches"] == 2 and res.raw_output["truncated"] is False
    assert res.locations == [{"path": str(ws)}]

    ci = await Grep().run({"pattern": "main", "case_insensitive": True, "glob": "*.md"}, ctx)
    assert ci.output == "README.md:1: Run MAIN to start"
    by_path = await Grep().run({"pattern": "main", "glob": "src/**/*.py"}, ctx)
    assert by_path.output == "src/app.py:2: def main():"
    one_file = await Grep().run({"pattern": "os", "path": "src/app.py"}, ctx)
    assert one_file.output == "src/app.py:1: import os\nsrc/app.py:3:     return os.getcwd()"
    sub = await Grep().run({"pattern": "main", "path": "src"}, ctx)
    assert sub.output.split("\n") == ["src/app.py:2: def main():", "src/util.js:1: function main() {}"]
    none = await Grep().run({"pattern": "nothing_here"}, ctx)
    assert none.output == "No matches for /nothing_here/ in ."
    assert none.raw_output is not None and none.raw_output["matches"] == 0


async def test_grep_invalid_regex(ctx: ToolContext, ws: Path) -> None:
    _write(ws / "a.txt", "x\n")
    with pytest.raises(ToolError, match=re.escape("invalid regular expression '(unclosed': missing )")):
        await Grep().run({"pattern": "(unclosed"}, ctx)
    with pytest.raises(ToolError, match="max_results"):
        await Grep().run({"pattern": "x", "max_results": 0}, ctx)
    with pytest.raises(ToolError, match="case_insensitive"):
        await Grep().run({"pattern": "x", "case_insensitive": "yes"}, ctx)
    with pytest.raises(ToolError, match="path not found"):
        await Grep().run({"pattern": "x", "path": "missing"}, ctx)


async def test_grep_skips_binary_and_large_files(
    ctx: ToolContext, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "blob.bin").write_bytes(b"needle\x00\x01\x02needle")
    (ws / "huge.txt").write_text("needle\n" + "x" * GREP_MAX_FILE_BYTES)
    _write(ws / "ok.txt", "a needle here\n")
    res = await Grep().run({"pattern": "needle"}, ctx)  # rg when installed: its walk skips them
    assert res.output == "ok.txt:1: a needle here"
    monkeypatch.setenv("AGENTD_GREP_ENGINE", "python")  # the Python walk counts what it skipped
    res = await Grep().run({"pattern": "needle"}, ctx)
    assert res.output == "ok.txt:1: a needle here"
    assert res.raw_output is not None
    assert (res.raw_output["skippedBinary"], res.raw_output["skippedLarge"]) == (1, 1)
    monkeypatch.delenv("AGENTD_GREP_ENGINE")
    only_binary = await Grep().run({"pattern": "needle", "path": "blob.bin"}, ctx)
    assert only_binary.output == "No matches for /needle/ in blob.bin\n[skipped 1 binary file(s)]"


async def test_grep_confinement(ctx: ToolContext, ws: Path, outside: Path) -> None:
    (ws / "linkdir").symlink_to(outside, target_is_directory=True)
    (ws / "linkfile.txt").symlink_to(outside / "secret.txt")
    _write(ws / "mine.txt", "needle\n")
    res = await Grep().run({"pattern": "needle"}, ctx)
    assert res.output == "mine.txt:1: needle"
    for path in ["../", "linkdir", "linkfile.txt", str(outside / "secret.txt")]:
        with pytest.raises(ToolError, match="outside the workspace"):
            await Grep().run({"pattern": "needle", "path": path}, ctx)


async def test_grep_caps_matches_and_long_lines(ctx: ToolContext, ws: Path) -> None:
    _write(ws / "many.txt", "hit\n" * 50)
    res = await Grep().run({"pattern": "hit", "max_results": 10}, ctx)
    lines = res.output.split("\n")
    assert lines[:10] == [f"many.txt:{i}: hit" for i in range(1, 11)]
    assert lines[10].startswith("[stopped at 10 matches")
    assert res.raw_output is not None
    assert res.raw_output["matches"] == 10 and res.raw_output["truncated"] is True
    exact = await Grep().run({"pattern": "hit", "max_results": 50}, ctx)
    assert exact.raw_output is not None and exact.raw_output["truncated"] is False  # exactly 50: no cap

    _write(ws / "wide.txt", "needle" + "y" * 5000 + "\n")
    wide = await Grep().run({"pattern": "needle", "path": "wide.txt"}, ctx)
    assert len(wide.output) < 400 and "more characters]" in wide.output


def test_grep_title() -> None:
    assert Grep().title({"pattern": "foo"}) == "Search for /foo/"
    assert Grep().title({"pattern": "foo", "path": "src", "glob": "*.py"}) == "Search for /foo/ in src (*.py)"


# --- todo_write ---


async def test_todo_write_replaces_list_and_returns_acp_plan(ws: Path) -> None:
    todos = TodoList()
    ctx = ToolContext(cwd=ws, session_id="s", todos=todos)
    first = await TodoWrite().run(
        {
            "todos": [
                {"content": "Read the code", "status": "completed", "priority": "high"},
                {"content": "Write the fix", "status": "in_progress"},
                {"content": "Run the tests", "status": "pending", "priority": "low"},
            ]
        },
        ctx,
    )
    assert first.plan == [
        {"content": "Read the code", "priority": "high", "status": "completed"},
        {"content": "Write the fix", "priority": "medium", "status": "in_progress"},
        {"content": "Run the tests", "priority": "low", "status": "pending"},
    ]
    assert first.output == "Updated the todo list: 3 items — 1 completed, 1 in progress, 1 pending."
    assert [e["content"] for e in todos.unfinished()] == ["Write the fix", "Run the tests"]
    # The ACP PlanEntry shape: exactly these keys, valid enum values.
    for entry in first.plan:
        assert set(entry) == {"content", "priority", "status"}

    second = await TodoWrite().run({"todos": [{"content": "Write the fix", "status": "completed"}]}, ctx)
    assert todos.as_plan() == [{"content": "Write the fix", "priority": "medium", "status": "completed"}]
    assert second.plan == todos.as_plan()
    assert todos.unfinished() == []
    assert "All items are done" in second.output

    cleared = await TodoWrite().run({"todos": []}, ctx)
    assert cleared.plan == [] and len(todos) == 0


async def test_todo_write_errors_leave_list_unchanged(ws: Path) -> None:
    todos = TodoList([{"content": "keep me", "status": "pending"}])
    ctx = ToolContext(cwd=ws, session_id="s", todos=todos)
    with pytest.raises(ToolError, match=r"todo #2: status must be one of"):
        await TodoWrite().run(
            {"todos": [{"content": "a", "status": "pending"}, {"content": "b", "status": "done"}]}, ctx
        )
    with pytest.raises(ToolError, match="priority"):
        await TodoWrite().run({"todos": [{"content": "a", "status": "pending", "priority": "urgent"}]}, ctx)
    with pytest.raises(ToolError, match="content"):
        await TodoWrite().run({"todos": [{"content": " ", "status": "pending"}]}, ctx)
    assert todos.entries == [{"content": "keep me", "status": "pending"}]
    with pytest.raises(ToolError, match="no todo list"):
        await TodoWrite().run({"todos": []}, ToolContext(cwd=ws, session_id="s"))


# --- background tasks ---


async def test_background_start_and_wait_done(bg: BackgroundTasks, ws: Path) -> None:
    task_id = bg.start("sleep 0.2; echo done", ws, None)
    assert bg.running() == [task_id]
    result = await bg.wait(task_id, 30, None)
    assert (result.reason, result.task_id) == ("done", task_id)
    assert bg.output(task_id) == ("done\n", True, 0)
    assert bg.status(task_id) == f"task {task_id} finished with exit code 0"

    failing = bg.start("echo oops; exit 4", ws, None)
    assert (await bg.wait(None, 30, None)).task_id == failing
    assert bg.output(failing) == ("oops\n", True, 4)
    # Nothing running and every completion reported: a wait on "any" returns at once.
    assert (await bg.wait(None, 30, None)).reason == "idle"


async def test_background_wait_any_returns_unreported_finished_task(bg: BackgroundTasks, ws: Path) -> None:
    quick = bg.start("true", ws, None)
    slow = bg.start("sleep 30", ws, None)
    await bg.wait(quick, 30)  # reported: the next wait on "any" must not return it again
    third = bg.start("echo x", ws, None)
    await until(lambda: third not in bg.running())
    result = await bg.wait(None, 30)  # `third` finished unnoticed: returned at once
    assert (result.reason, result.task_id, result.running) == ("done", third, [slow])


async def test_wait_tool_done_and_timeout(bg: BackgroundTasks, bg_ctx: ToolContext, ws: Path) -> None:
    quick = bg.start("sleep 0.2; echo done", ws, None)
    res = await Wait().run({"task_id": quick}, bg_ctx)
    assert res.output == f"done\n[task {quick} finished with exit code 0]"
    assert res.raw_output is not None
    assert res.raw_output["reason"] == "done" and res.raw_output["exitCode"] == 0

    slow = bg.start("sleep 30", ws, None)
    res = await Wait().run({"task_id": slow, "timeout": 0.1}, bg_ctx)
    assert res.output == f"task {slow} is still running after waiting 0.1 s"
    assert res.raw_output is not None and res.raw_output["reason"] == "timeout"
    res = await Wait().run({"timeout": 0}, bg_ctx)
    assert res.output == f"still running: {slow} after waiting 0 s"

    with pytest.raises(ToolError, match="no background task 'bg-99'"):
        await Wait().run({"task_id": "bg-99"}, bg_ctx)
    with pytest.raises(ToolError, match="timeout"):
        await Wait().run({"timeout": -1}, bg_ctx)
    with pytest.raises(ToolError, match="not available"):
        await Wait().run({}, ToolContext(cwd=ws, session_id="s"))


async def test_wait_returns_early_when_interrupted(bg: BackgroundTasks, ws: Path) -> None:
    slow = bg.start("sleep 30", ws, None)
    interrupted = ObservedEvent()
    ctx = ToolContext(cwd=ws, session_id="s", background=bg, interrupted=interrupted)
    waiter = asyncio.create_task(Wait().run({"task_id": slow, "timeout": 600}, ctx))
    await interrupted.waiting.wait()  # the tool is now blocked in its wait
    assert not waiter.done()
    interrupted.set()  # new user input arrives from another task
    res = await waiter
    assert res.output.startswith(INTERRUPTED_TEXT)
    assert res.output == f"interrupted by new user input; task {slow} is still running"
    assert res.raw_output is not None and res.raw_output["reason"] == "interrupted"
    assert bg.running() == [slow]  # an interruption does not touch the task


async def test_wait_checks_interruption_before_waiting(bg: BackgroundTasks, ws: Path) -> None:
    slow = bg.start("sleep 30", ws, None)
    interrupted = ObservedEvent()
    interrupted.set()
    ctx = ToolContext(cwd=ws, session_id="s", background=bg, interrupted=interrupted)
    res = await Wait().run({"timeout": 600}, ctx)
    assert res.output == f"interrupted by new user input; still running: {slow}"
    assert not interrupted.waiting.is_set()  # returned without waiting at all


async def test_task_output_without_and_with_wait(bg: BackgroundTasks, bg_ctx: ToolContext, ws: Path) -> None:
    marker = ws / "go"
    task_id = bg.start(f"echo first; while [ ! -e {marker} ]; do sleep 0.01; done; echo second", ws, None)
    # Without wait: the output so far and "still running" once "first" is out.
    await until(lambda: "first" in bg.output(task_id)[0])
    res = await TaskOutput().run({"task_id": task_id}, bg_ctx)
    assert res.output == f"first\n[task {task_id} is still running]"
    assert res.raw_output == {"taskId": task_id, "done": False, "exitCode": None}

    marker.touch()
    res = await TaskOutput().run({"task_id": task_id, "wait": True, "timeout": 30}, bg_ctx)
    assert res.output == f"first\nsecond\n[task {task_id} finished with exit code 0]"
    assert res.raw_output == {"taskId": task_id, "done": True, "exitCode": 0, "reason": "done"}

    with pytest.raises(ToolError, match="task_id"):
        await TaskOutput().run({}, bg_ctx)
    with pytest.raises(ToolError, match="no background task"):
        await TaskOutput().run({"task_id": "nope"}, bg_ctx)


async def test_task_output_wait_is_preemptible(bg: BackgroundTasks, ws: Path) -> None:
    task_id = bg.start("echo partial; sleep 30", ws, None)
    interrupted = ObservedEvent()
    ctx = ToolContext(cwd=ws, session_id="s", background=bg, interrupted=interrupted)
    waiter = asyncio.create_task(TaskOutput().run({"task_id": task_id, "wait": True, "timeout": 600}, ctx))
    await interrupted.waiting.wait()
    interrupted.set()
    res = await waiter
    assert res.output.startswith(f"{INTERRUPTED_TEXT}; output so far:\n")
    assert res.output.endswith(f"[task {task_id} is still running]")
    assert res.raw_output is not None and res.raw_output["reason"] == "interrupted"


async def test_background_close_kills_process_groups(ws: Path) -> None:
    tasks = BackgroundTasks()
    task_id = tasks.start("echo $$ > shell.pid; sleep 30 & echo $! > child.pid; wait", ws, None)
    shell = await wait_pid(ws / "shell.pid")
    child = await wait_pid(ws / "child.pid")
    assert process_alive(shell) and process_alive(child)
    await tasks.close()
    await wait_dead(child)
    await wait_dead(shell)
    _, done, rc = tasks.output(task_id)
    assert done and rc == -9
    assert tasks.status(task_id) == f"task {task_id} was killed by signal SIGKILL"
    with pytest.raises(ToolError, match="closing"):
        tasks.start("true", ws, None)


async def test_background_kill_and_timeout(bg: BackgroundTasks, ws: Path) -> None:
    victim = bg.start("sleep 30", ws, None)
    assert bg.kill(victim) is True
    assert (await bg.wait(victim, 30)).reason == "done"
    assert bg.kill(victim) is False  # already finished
    timed = bg.start("echo begin; sleep 30", ws, 0.2)
    assert (await bg.wait(timed, 30)).reason == "done"
    text, done, _ = bg.output(timed)
    assert text == "begin\n" and done
    assert bg.status(timed) == f"task {timed} timed out after 0.2 s and was killed"


async def test_bash_run_in_background(bg: BackgroundTasks, bg_ctx: ToolContext, ws: Path) -> None:
    res = await Bash().run({"command": "echo $$ > bg.pid; exec sleep 30", "run_in_background": True}, bg_ctx)
    task_id = res.raw_output["taskId"] if res.raw_output else None
    assert res.output == f"started background task {task_id}"
    assert res.raw_output == {"taskId": task_id}
    assert bg.running() == [task_id]  # returned while the command still runs
    pid = await wait_pid(ws / "bg.pid")
    assert process_alive(pid)
    await bg.close()
    await wait_dead(pid)

    with pytest.raises(ToolError, match="not available"):
        await Bash().run({"command": "true", "run_in_background": True}, ToolContext(cwd=ws, session_id="s"))
    with pytest.raises(ToolError, match="run_in_background"):
        await Bash().run({"command": "true", "run_in_background": "yes"}, bg_ctx)
    assert Bash().title({"command": "npm start", "run_in_background": True}) == (
        "Run `npm start` in the background"
    )


# --- registry and metadata ---


def test_all_builtin_tools_metadata() -> None:
    tools = builtin_tools()
    assert list(tools)[:5] == ["read_file", "write_file", "edit_file", "list_dir", "bash"]
    assert list(tools)[5:] == ["glob", "grep", "todo_write", "wait", "task_output"]
    assert [type(t) for t in tools.values()] == list(BUILTIN_TOOLS)
    expected = {
        "glob": (ToolKind.SEARCH, Access.READ),
        "grep": (ToolKind.SEARCH, Access.READ),
        "todo_write": (ToolKind.THINK, Access.READ),
        "wait": (ToolKind.OTHER, Access.READ),
        "task_output": (ToolKind.OTHER, Access.READ),
    }
    for name, tool in tools.items():
        if name in expected:
            assert (tool.kind, tool.access) == expected[name]
        assert tool.description and "\n" not in tool.description
        assert 2 <= tool.guidance.count(". ") + 1 <= 5
        schema = tool.parameters
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert isinstance(schema["required"], list)
        assert isinstance(tool.title({}), str)
    assert tools["bash"].parameters["properties"]["run_in_background"] == {
        "type": "boolean",
        "description": "Start the command as a background task and return its id at once.",
    }
    assert "newest" in Glob.guidance or "most recently" in Glob.guidance
    assert INTERRUPTED_TEXT in Wait.guidance and INTERRUPTED_TEXT in TaskOutput.guidance
    text = system_prompt_guidance(tools)
    assert [line.split(":", 1)[0] for line in text.split("\n")[1:]] == [f"- {n}" for n in tools]
