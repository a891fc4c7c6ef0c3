"""Pure and tool-level parts of tool isolation (issue 9): the linear glob matcher, grep's
time limits, the tool pool's deadline, safe file I/O (FIFOs, hard links, symlink swaps)
and killing processes that left the shell's process group. The end-to-end canary is in
tests/e2e/tools/test_tool_isolation.py."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentd.tools import offload
from agentd.tools.base import ToolContext
from agentd.tools.errors import ToolError
from agentd.tools.files import tools as files
from agentd.tools.files.tools import EditFile, ReadFile, WriteFile
from agentd.tools.files.workspace import resolve_and_display
from agentd.tools.hooks import CommandHook
from agentd.tools.search import engine as grepengine
from agentd.tools.search import grep as search
from agentd.tools.search import regexguard
from agentd.tools.search.globmatch import compile_path, compile_segment, match_path, match_segment
from agentd.tools.search.grep import Glob, Grep
from agentd.tools.shell.background import BackgroundTasks
from agentd.tools.shell.bash import Bash
from tests.support.polling import until, value_of
from tests.support.proc import process_alive, read_pid


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root.resolve()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text("outside secret\n")
    return d.resolve()


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext(cwd=ws, session_id="s-test")


# ---------------------------------------------------------------------------- glob matcher


def _reference_regex(seg: str) -> str:
    """The translation glob used before (a backtracking regex): the semantics to keep."""
    out: list[str] = []
    i, n = 0, len(seg)
    while i < n:
        ch = seg[i]
        if ch == "*":
            while i + 1 < n and seg[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            j = i + 1
            if j < n and seg[j] in "!^":
                j += 1
            if j < n and seg[j] == "]":
                j += 1
            while j < n and seg[j] != "]":
                j += 1
            if j >= n:
                out.append(re.escape(ch))
            else:
                body = seg[i + 1 : j]
                negate = body[:1] in ("!", "^")
                if negate:
                    body = body[1:]
                body = body.replace("\\", "\\\\").replace("[", "\\[")
                out.append(f"[^/{body}]" if negate else f"[{body}]")
                i = j
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


@settings(max_examples=400, deadline=None)
@given(
    seg=st.text(alphabet="ab.*?[]!", min_size=1, max_size=8),
    name=st.text(alphabet="ab.]!", min_size=0, max_size=10),
)
def test_segment_matcher_agrees_with_the_regex_translation(seg: str, name: str) -> None:
    try:
        expected = re.fullmatch(_reference_regex(seg), name, re.DOTALL) is not None
    except re.error:  # e.g. an empty class `[]]`-like body the regex rejects: not comparable
        return
    assert match_segment(compile_segment(seg), name) is expected


@pytest.mark.parametrize(
    ("seg", "name", "expected"),
    [
        ("*.py", "app.py", True),
        ("*.py", ".hidden.py", True),
        ("*.py", "app.pyc", False),
        ("te?t", "test", True),
        ("[a-c]x", "bx", True),
        ("[!a-c]x", "bx", False),
        ("[]]", "]", True),
        ("[abc", "[abc", True),  # no closing bracket: literal
        ("a\\b", "a\\b", True),  # backslash is literal
        ("**", "anything", True),
    ],
)
def test_segment_matcher_cases(seg: str, name: str, expected: bool) -> None:
    assert match_segment(compile_segment(seg), name) is expected


def test_star_heavy_pattern_on_a_very_long_name_is_answered() -> None:
    # A backtracking regex needs on the order of n^5 steps here; this is n * m.
    toks = compile_segment("*a*a*a*a*a*c")
    assert match_segment(toks, "a" * 20_000) is False
    assert match_segment(toks, "a" * 20_000 + "c") is True


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("**/*.py", "a.py", True),
        ("**/*.py", "x/y/a.py", True),
        ("src/**/*.ts", "src/a.ts", True),
        ("src/**/*.ts", "src/x/y/a.ts", True),
        ("src/**/*.ts", "lib/a.ts", False),
        ("src/**", "src/a/b", True),
        ("src/**", "src", False),
        ("*/*.py", "a/b.py", True),
        ("*/*.py", "a/b/c.py", False),
        ("**", "a/b/c", True),
    ],
)
def test_path_matcher_globstar(pattern: str, path: str, expected: bool) -> None:
    assert match_path(compile_path(pattern.split("/")), path.split("/")) is expected


async def test_glob_tool_matches_long_names(ctx: ToolContext, ws: Path) -> None:
    (ws / ("a" * 200 + "c")).write_text("x")
    (ws / ("a" * 200)).write_text("x")
    result = await Glob().run({"pattern": "*a*a*a*a*a*c"}, ctx)
    assert result.output == "a" * 200 + "c"


# ---------------------------------------------------------------------------- grep limits


@pytest.fixture
def python_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """grep without ripgrep (as on a machine where it is not installed)."""
    monkeypatch.setenv("AGENTD_GREP_ENGINE", "python")


needs_rg = pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep (Debian: ripgrep) not installed")


@pytest.fixture(params=["python", pytest.param("rg", marks=needs_rg)])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("AGENTD_GREP_ENGINE", "python" if request.param == "python" else "auto")
    return str(request.param)


async def test_grep_refuses_a_pattern_that_backtracks_on_one_line(
    ctx: ToolContext, ws: Path, monkeypatch: pytest.MonkeyPatch, python_engine: None
) -> None:
    monkeypatch.setattr(search, "GREP_LINE_BUDGET", 0.05)
    (ws / "f.txt").write_text("ok\n" + "a" * 40 + "\n")
    with pytest.raises(ToolError, match=r"took over 0\.05 s on one line \(f\.txt:2\).*catastrophically"):
        await Grep().run({"pattern": "(a|aa)+$b"}, ctx)


async def test_grep_deadline_returns_partial_results_with_a_note(
    ctx: ToolContext, ws: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    monkeypatch.setattr(search, "SEARCH_DEADLINE", 0.0)
    (ws / "f.txt").write_text("needle\n")
    result = await Grep().run({"pattern": "needle"}, ctx)
    assert "[search stopped after 0 s; results are incomplete" in result.output
    assert result.raw_output is not None and result.raw_output["truncated"] is True
    assert result.raw_output["engine"] == engine


async def test_grep_uses_python_syntax_and_flags(ctx: ToolContext, ws: Path, engine: str) -> None:
    (ws / "f.py").write_text("def Main():\n    pass\n")
    # A look-behind is Python syntax that rg lacks: that call falls back to the regex module.
    result = await Grep().run({"pattern": r"(?<=def )main\(", "case_insensitive": True}, ctx)
    assert result.output == "f.py:1: def Main():"
    assert result.raw_output is not None and result.raw_output["engine"] == "python"
    result = await Grep().run({"pattern": r"def\s+MAIN", "case_insensitive": True}, ctx)
    assert result.output == "f.py:1: def Main():"
    assert result.raw_output is not None and result.raw_output["engine"] == engine
    with pytest.raises(ToolError, match="invalid regular expression"):
        await Grep().run({"pattern": "(unclosed"}, ctx)


async def test_cancelled_grep_stops_its_worker(
    ctx: ToolContext, ws: Path, monkeypatch: pytest.MonkeyPatch, python_engine: None
) -> None:
    (ws / "many.txt").write_text(("a" * 20 + "\n") * 5000)
    monkeypatch.setattr(search, "SEARCH_DEADLINE", 600.0)
    started, finished = threading.Event(), threading.Event()
    real = search._grep

    def observed(*args: object) -> object:
        started.set()
        try:
            return real(*args)  # type: ignore[arg-type]
        finally:
            finished.set()

    monkeypatch.setattr(search, "_grep", observed)
    call = asyncio.create_task(Grep().run({"pattern": "(a|aa)+$b"}, ctx))
    await until(lambda: started.is_set(), what="grep to start")
    assert not finished.is_set()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await until(lambda: finished.is_set(), what="the worker to stop")


@pytest.mark.parametrize(
    ("pattern", "size"),
    [
        ("def\\s+(\\w+)\\(", 8),
        ("(a|b){3}c", 10),
        ("a{2,1000}b{5}", 1005),
        ("x{,5}", 5),
        ("[a-z{]{10}", 10),  # a brace inside a class is not a quantifier
        ("\\p{L}{3}", 3),  # nor is an escape's brace
        ("a{", 2),
    ],
)
def test_expanded_size_estimate(pattern: str, size: int) -> None:
    assert regexguard.expanded_size(pattern) == size


async def test_grep_refuses_a_pattern_that_would_take_minutes_to_compile(ctx: ToolContext, ws: Path) -> None:
    # The regex module expands counted repeats while compiling, holding the GIL: 10^8 here.
    (ws / "f.txt").write_text("a\n")
    with pytest.raises(ToolError, match=r"counted repetitions .* too big to compile"):
        await Grep().run({"pattern": "((((a{100}){100}){100}){100})"}, ctx)
    with pytest.raises(ToolError, match="at most 10000 are accepted"):
        await Grep().run({"pattern": "a" * 10_001}, ctx)


GREP_CORPUS = {
    "a.py": "import os\r\ndef main():\n    return os.getcwd()  # cwd\n\n",
    "b.txt": "Alpha beta\nalpha\tgamma\n" + "x" * 5000 + "alpha\n" + "ünïcode wörd\nlast line no newline",
    "sub/c.md": "# Title\n\nalpha and omega\n",
    "crlf.txt": "call()\r\nalpha()\r\n",  # rg lists it only if `$` matches before \r\n too
}


@needs_rg
@pytest.mark.parametrize(
    ("pattern", "ci"),
    [
        ("alpha", False),
        ("alpha", True),
        (r"^\s*$", False),  # empty lines (none after a final newline, as in rg)
        (r"\)$", False),  # `$` before a stripped \r
        (r"w\w+d", False),  # Unicode word characters
        (r"(a|aa)+$b", False),
        ("^def (\\w+)", False),
        ("[0-9]", False),
    ],
)
async def test_rg_and_python_engines_agree(
    ctx: ToolContext, ws: Path, monkeypatch: pytest.MonkeyPatch, pattern: str, ci: bool
) -> None:
    for rel, text in GREP_CORPUS.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_bytes(text.encode())
    args = {"pattern": pattern, "case_insensitive": ci}
    monkeypatch.setenv("AGENTD_GREP_ENGINE", "auto")
    by_rg = await Grep().run(args, ctx)
    monkeypatch.setenv("AGENTD_GREP_ENGINE", "python")
    by_python = await Grep().run(args, ctx)
    assert by_rg.raw_output is not None and by_rg.raw_output["engine"] == "rg"
    assert by_python.raw_output is not None and by_python.raw_output["engine"] == "python"
    assert by_rg.output == by_python.output
    uncounted = {"engine": "", "filesSearched": 0, "skippedBinary": 0, "skippedLarge": 0}  # rg's walk
    assert {**by_rg.raw_output, **uncounted} == {**by_python.raw_output, **uncounted}


@needs_rg
async def test_rg_limit_and_stop(ctx: ToolContext, ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTD_GREP_ENGINE", "auto")
    (ws / "f.txt").write_text("hit\n" * 50)
    result = await Grep().run({"pattern": "hit", "max_results": 5}, ctx)
    assert result.output.count("\n") >= 5 and "[stopped at 5 matches" in result.output
    # A stopped call kills its rg and says why (no deadline: the caller went away).
    stop = threading.Event()
    stop.set()
    rg = grepengine.find_rg()
    assert rg is not None
    engine = grepengine.RgEngine(rg, "hit", False, time.monotonic() + 60, stop, 300)
    with pytest.raises(grepengine.SearchStopped) as stopped:
        list(engine.matches(ws, [("f.txt", "f.txt")]))
    assert stopped.value.deadline is False


# ---------------------------------------------------------------------------- tool pool


async def test_run_blocking_deadline_is_a_tool_error_and_stops_the_worker() -> None:
    stopped = threading.Event()

    def work(stop: threading.Event) -> None:
        stop.wait(30)
        stopped.set()

    with pytest.raises(ToolError, match=r"slow thing did not finish within 0\.1 s"):
        await offload.run_blocking(work, what="slow thing", deadline=0.1)
    await until(lambda: stopped.is_set(), what="the worker to see stop")


async def test_run_blocking_cancel_sets_stop() -> None:
    running, stopped = threading.Event(), threading.Event()

    def work(stop: threading.Event) -> None:
        running.set()
        stop.wait(30)
        stopped.set()

    call = asyncio.create_task(offload.run_blocking(work, what="w"))
    await until(lambda: running.is_set(), what="the worker to start")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await until(lambda: stopped.is_set(), what="the worker to see stop")


def test_read_stops_when_the_call_is_gone(ws: Path) -> None:
    (ws / "big.txt").write_text("line\n" * 10_000)
    stop = threading.Event()
    stop.set()  # cancelled, or past its deadline: the worker gives up instead of reading on
    with pytest.raises(ToolError, match=r"reading big\.txt was stopped"):
        ReadFile._read(ws, ws / "big.txt", "big.txt", 9_000, 10, None, stop)


# ---------------------------------------------------------------------------- special files


async def test_fifo_is_refused_by_every_file_tool(ctx: ToolContext, ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    for tool, args in [
        (ReadFile(), {"path": "pipe"}),
        (WriteFile(), {"path": "pipe", "content": "x"}),
        (EditFile(), {"path": "pipe", "old_string": "a", "new_string": "b"}),
        (Grep(), {"pattern": "x", "path": "pipe"}),
    ]:
        with pytest.raises(ToolError, match=r"pipe is a named pipe \(FIFO\); only regular files"):
            await asyncio.wait_for(tool.run(args, ctx), 10)
    assert (ws / "pipe").is_fifo()  # not replaced by the write
    # A directory search skips it without opening it.
    (ws / "f.txt").write_text("x\n")
    result = await asyncio.wait_for(Grep().run({"pattern": "x"}, ctx), 10)
    assert result.output == "f.txt:1: x"


async def test_hard_linked_file_is_refused(ctx: ToolContext, ws: Path, outside: Path) -> None:
    os.link(outside / "secret.txt", ws / "alias.txt")
    for tool, args in [
        (ReadFile(), {"path": "alias.txt"}),
        (WriteFile(), {"path": "alias.txt", "content": "x"}),
        (EditFile(), {"path": "alias.txt", "old_string": "outside", "new_string": "x"}),
        (Grep(), {"pattern": "secret", "path": "alias.txt"}),
    ]:
        with pytest.raises(ToolError, match=r"alias\.txt has 2 hard links"):
            await tool.run(args, ctx)
    assert (outside / "secret.txt").read_text() == "outside secret\n"
    result = await Grep().run({"pattern": "secret"}, ctx)
    assert "outside secret" not in result.output
    assert result.raw_output is not None and result.raw_output["skippedHardLinked"] == 1


def _swap_after_resolving(monkeypatch: pytest.MonkeyPatch, swap: object) -> None:
    """The race, made deterministic: the path is checked, then the swap happens."""

    def resolve_and_display_then_swap(root: Path, path: str) -> tuple[Path, str]:
        answer = resolve_and_display(root, path)  # (the file tools resolve with this one)
        swap()  # type: ignore[operator]
        return answer

    monkeypatch.setattr(files, "resolve_and_display", resolve_and_display_then_swap)


async def test_directory_swapped_for_a_symlink_after_the_check_is_refused(
    ctx: ToolContext, ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "sub").mkdir()
    (ws / "sub" / "secret.txt").write_text("inside\n")

    def swap() -> None:
        (ws / "sub" / "secret.txt").unlink()
        (ws / "sub").rmdir()
        (ws / "sub").symlink_to(outside, target_is_directory=True)

    _swap_after_resolving(monkeypatch, swap)
    with pytest.raises(ToolError, match="symbolic link or was replaced"):
        await WriteFile().run({"path": "sub/secret.txt", "content": "pwned\n"}, ctx)
    assert (outside / "secret.txt").read_text() == "outside secret\n"


async def test_file_swapped_for_a_symlink_after_the_check_is_refused(
    ctx: ToolContext, ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def swap() -> None:
        (ws / "f.txt").unlink()
        (ws / "f.txt").symlink_to(outside / "secret.txt")

    _swap_after_resolving(monkeypatch, swap)
    for tool, args in [
        (ReadFile(), {"path": "f.txt"}),
        (EditFile(), {"path": "f.txt", "old_string": "outside", "new_string": "x"}),
        (WriteFile(), {"path": "f.txt", "content": "pwned\n"}),
    ]:
        (ws / "f.txt").unlink(missing_ok=True)
        (ws / "f.txt").write_text("inside\n")  # a plain file when checked, a link when used
        with pytest.raises(ToolError, match="symbolic link"):
            await tool.run(args, ctx)
        assert (ws / "f.txt").is_symlink()
    assert (outside / "secret.txt").read_text() == "outside secret\n"


async def test_write_creates_missing_directories_without_following_links(ctx: ToolContext, ws: Path) -> None:
    result = await WriteFile().run({"path": "a/b/c.txt", "content": "x\n"}, ctx)
    assert result.raw_output == {"bytes": 2, "created": True}
    assert (ws / "a" / "b" / "c.txt").read_text() == "x\n"


# ---------------------------------------------------------------------------- processes


async def test_bash_kills_a_setsid_child_left_behind_when_it_exits(ctx: ToolContext, ws: Path) -> None:
    command = (
        "setsid sh -c 'echo $$ > orphan.pid; exec sleep 1000' >/dev/null 2>&1 & "
        "while [ ! -s orphan.pid ]; do sleep 0.01; done"
    )
    await asyncio.wait_for(Bash().run({"command": command}, ctx), 30)
    pid = read_pid(ws / "orphan.pid")
    assert pid is not None
    await until(lambda: not process_alive(pid), what=f"process {pid} to die")


async def test_bash_timeout_kills_a_setsid_child(ctx: ToolContext, ws: Path) -> None:
    command = "setsid sh -c 'echo $$ > child.pid; exec sleep 1000' & wait"
    result = await asyncio.wait_for(Bash().run({"command": command, "timeout": 1}, ctx), 30)
    assert result.is_error and result.raw_output is not None and result.raw_output["timedOut"]
    pid = read_pid(ws / "child.pid")
    assert pid is not None
    await until(lambda: not process_alive(pid), what=f"process {pid} to die")


async def test_background_task_kill_reaches_a_setsid_child(ws: Path) -> None:
    bg = BackgroundTasks()
    try:
        task_id = bg.start("setsid sh -c 'echo $$ > bg.pid; exec sleep 1000' & wait", ws)
        pid = await value_of(lambda: read_pid(ws / "bg.pid"), what="bg.pid")
        assert bg.kill(task_id)
        await until(lambda: not process_alive(pid), what=f"process {pid} to die")
    finally:
        await bg.close()


async def test_hook_timeout_kills_a_setsid_child(ws: Path) -> None:
    hook = CommandHook("setsid sh -c 'echo $$ > hook.pid; exec sleep 1000' & wait", timeout=1.0, cwd=ws)
    answer = await asyncio.wait_for(hook.run({"event": "pre_tool"}), 30)
    assert answer == "timed out after 1s"
    pid = read_pid(ws / "hook.pid")
    assert pid is not None
    await until(lambda: not process_alive(pid), what=f"process {pid} to die")
