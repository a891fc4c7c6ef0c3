"""glob, grep and list_dir respect the repository (issue 13, item 1): git's ignore rules,
binary files skipped, newest first, capped with a note; with ripgrep and with the pathspec
walk (the `engine` fixture), which must give the same results."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from agentd.tools.base import ToolContext
from agentd.tools.search.glob_tool import GLOB_MAX_RESULTS, Glob
from agentd.tools.search.grep import Grep
from agentd.tools.search.listdir import ListDir

needs_rg = pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep (Debian: ripgrep) not installed")

# path -> (content, mtime); everything ignored says "def main" too, so a leak shows.
REPO: dict[str, tuple[str | bytes, int]] = {
    ".gitignore": (".venv/\nnode_modules/\n*.log\n", 100),
    ".git/info/exclude": ("scratch.py\n", 100),
    ".git/config": ("def main\n", 100),
    "main.py": ("import sys\ndef main():\n    pass\n", 5000),
    "pkg/.gitignore": ("gen/\n!keep.log\n", 100),
    "pkg/mod.py": ("def main(): return 1\n", 4000),
    "pkg/keep.log": ("def main in a log kept by a negation\n", 3000),
    "pkg/gen/out.py": ("def main(): generated\n", 9000),
    "debug.log": ("def main in a log\n", 9000),
    "scratch.py": ("def main(): scratch\n", 9000),
    "notes.swp": ("def main swap\n", 9000),
    ".venv/lib/site.py": ("def main(): vendored\n", 9000),
    "node_modules/a/index.py": ("def main(): js land\n", 9000),
    "blob.py": (b"def main\x00\x01\x02 binary\n", 9000),
    "pkg/utf16.txt": ("\ufeffdef main(): UTF-16\n".encode("utf-16-le"), 9000),  # NULs: binary to both
    ".hidden/conf.py": ("def main(): hidden but not ignored\n", 2000),
}


@pytest.fixture(params=["python", pytest.param("rg", marks=needs_rg)])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("AGENTD_GREP_ENGINE", "python" if request.param == "python" else "auto")
    return str(request.param)


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / "cfg" / "git").mkdir(parents=True)
    (home / "cfg" / "git" / "ignore").write_text("*.swp\n")  # the global excludes file
    monkeypatch.setenv("HOME", str(home))  # rg reads the same environment
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "cfg"))
    root = tmp_path / "ws"
    for rel, (content, mtime) in REPO.items():
        _write(root / rel, content, mtime)
    return root.resolve()


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext(cwd=ws, session_id="s-ignore")


def _write(path: Path, content: str | bytes, mtime: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    os.utime(path, (mtime, mtime))


async def test_grep_honours_ignores_skips_binary_newest_first(ctx: ToolContext, engine: str) -> None:
    res = await Grep().run({"pattern": "def main"}, ctx)
    assert res.output.split("\n") == [
        "main.py:2: def main():",
        "pkg/mod.py:1: def main(): return 1",
        "pkg/keep.log:1: def main in a log kept by a negation",
        ".hidden/conf.py:1: def main(): hidden but not ignored",
    ]
    assert res.raw_output is not None and res.raw_output["engine"] == engine
    py_only = await Grep().run({"pattern": "def main", "glob": "*.py"}, ctx)
    assert [line.split(":")[0] for line in py_only.output.split("\n")] == [
        "main.py",
        "pkg/mod.py",
        ".hidden/conf.py",
    ]


async def test_grep_searches_an_ignored_path_named_explicitly(ctx: ToolContext, engine: str) -> None:
    venv = await Grep().run({"pattern": "def main", "path": ".venv"}, ctx)
    assert venv.output == ".venv/lib/site.py:1: def main(): vendored"
    one = await Grep().run({"pattern": "def main", "path": "node_modules/a/index.py"}, ctx)
    assert one.output == "node_modules/a/index.py:1: def main(): js land"
    below = await Grep().run({"pattern": "def main", "path": "pkg"}, ctx)  # nested rules still apply
    assert below.output.split("\n") == [
        "pkg/mod.py:1: def main(): return 1",
        "pkg/keep.log:1: def main in a log kept by a negation",
    ]


async def test_glob_honours_ignores_newest_first(ctx: ToolContext, engine: str) -> None:
    res = await Glob().run({"pattern": "**/*.py"}, ctx)
    # blob.py is binary, but glob is about names: it is listed (newest: first).
    assert res.output.split("\n") == ["blob.py", "main.py", "pkg/mod.py", ".hidden/conf.py"]
    everything = await Glob().run({"pattern": "**/*"}, ctx)
    assert not any(
        p in everything.output for p in (".venv", "node_modules", "gen/", "debug.log", ".git/", "swp")
    )
    named = await Glob().run({"pattern": ".venv/**/*.py"}, ctx)
    assert named.output == ".venv/lib/site.py"
    inside = await Glob().run({"pattern": "**/*.py", "path": "node_modules"}, ctx)
    assert inside.output == "node_modules/a/index.py"


async def test_glob_cap_is_not_spent_on_ignored_trees(ctx: ToolContext, ws: Path, engine: str) -> None:
    """The issue's case: 600 .py files in .venv and 150 in the project; all 150 are found."""
    for i in range(600):
        (ws / ".venv" / "lib" / f"v{i}.py").write_text("x\n")
    for i in range(150):
        _write(ws / "src" / f"m{i:03d}.py", "x\n", 10_000 + i)
    res = await Glob().run({"pattern": "src/**/*.py"}, ctx)
    assert res.output.split("\n") == [f"src/m{i:03d}.py" for i in reversed(range(150))]
    res = await Glob().run({"pattern": "**/*.py"}, ctx)
    assert res.raw_output == {"matches": 154, "truncated": False}
    for i in range(150, GLOB_MAX_RESULTS + 10):
        _write(ws / "src" / f"m{i:03d}.py", "x\n", 10_000 + i)
    capped = await Glob().run({"pattern": "**/*.py"}, ctx)
    lines = capped.output.split("\n")
    assert lines[0] == f"src/m{GLOB_MAX_RESULTS + 9:03d}.py" and len(lines) == GLOB_MAX_RESULTS + 1
    assert lines[-1].startswith("[... 14 more matches not shown (showing the 500 most recently modified)")


async def test_grep_cap_note_says_how_to_go_on(ctx: ToolContext, ws: Path, engine: str) -> None:
    for i in range(30):
        _write(ws / "many" / f"f{i:02d}.txt", "hit\nhit\n", 20_000 + i)
    res = await Grep().run({"pattern": "hit", "max_results": 5}, ctx)
    lines = res.output.split("\n")
    assert lines[:5] == [
        "many/f29.txt:1: hit",
        "many/f29.txt:2: hit",
        "many/f28.txt:1: hit",
        "many/f28.txt:2: hit",
        "many/f27.txt:1: hit",
    ]
    assert lines[5] == (
        "[stopped at 5 matches (3 file(s), newest first); more exist: narrow the pattern, path or glob, "
        "or raise max_results (up to 1000)]"
    )
    assert res.raw_output is not None and res.raw_output["truncated"] is True


async def test_list_dir_names_ignored_entries_in_a_note(ctx: ToolContext) -> None:
    res = await ListDir().run({}, ctx)
    assert res.output.split("\n") == [
        ".git/", ".gitignore", ".hidden/", "blob.py", "main.py", "pkg/",
        "[5 ignored by git, not listed: .venv/, debug.log, node_modules/, notes.swp, scratch.py; "
        "pass one as path to list it]",
    ]  # fmt: skip
    assert res.raw_output == {"entries": 6, "ignored": 5, "truncated": False}
    assert (await ListDir().run({"path": ".venv"}, ctx)).output == "lib/"  # named: listed in full
    assert (await ListDir().run({"path": "pkg"}, ctx)).output.endswith(
        "[1 ignored by git, not listed: gen/; pass one as path to list it]"
    )
