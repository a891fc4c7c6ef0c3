"""grep/glob on a repository with a large ignored tree, agentd's tools vs rg (prints figures; no asserts).

    .venv/bin/python bench/search_repo.py [--vendored N]   (default N = 15000 files per ignored tree)

Generates a git-style repository: 150 project .py files (7 define `main`), plus `.venv/` and
`node_modules/` (ignored by .gitignore) with N files each, many defining `main` too: the
shape of issue 13's report (grep "def main" gave 157 lines, 150 of them from ignored folders,
in 2.55 s; ripgrep: 7 lines, 0.02 s). Then times, median of 5 runs each, agentd's `grep` and
`glob` tools with both engines (rg's walk; the pathspec walk) against running `rg` directly.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentd.tools.base import ToolContext
from agentd.tools.search.glob_tool import Glob
from agentd.tools.search.grep import Grep

RUNS = 5
PROJECT_FILES = 150
PROJECT_MAINS = 7


def generate(root: Path, vendored: int) -> None:
    (root / ".git" / "info").mkdir(parents=True)
    (root / ".gitignore").write_text(".venv/\nnode_modules/\n__pycache__/\n")
    body = "".join(f"def helper_{i}(x):\n    return x * {i}\n\n" for i in range(20))
    for i in range(PROJECT_FILES):
        d = root / "src" / f"pkg{i % 10}"
        d.mkdir(parents=True, exist_ok=True)
        main = "def main():\n    pass\n" if i < PROJECT_MAINS else ""
        (d / f"mod{i}.py").write_text(f'"""Module {i}."""\n{body}{main}')
    for i in range(vendored):
        d = root / ".venv" / "lib" / "site-packages" / f"dist{i % 300}"
        d.mkdir(parents=True, exist_ok=True)
        main = "def main():\n    pass\n" if i % 100 == 0 else ""
        (d / f"m{i}.py").write_text(f"{body}{main}")
        j = root / "node_modules" / f"pkg{i % 300}" / "lib"
        j.mkdir(parents=True, exist_ok=True)
        js_main = "def main\n" if i % 100 == 0 else ""
        (j / f"f{i}.js").write_text("function f(x) { return x; }\n" * 30 + js_main)


def median_time(fn: Callable[[], object]) -> tuple[float, object]:
    times, result = [], None
    for _ in range(RUNS):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def tool_call(make: Callable[[], Coroutine[object, object, object]]) -> Callable[[], object]:
    return lambda: asyncio.run(make())


def run_rg(argv: list[str], cwd: Path) -> Callable[[], object]:
    return lambda: subprocess.run(argv, cwd=cwd, capture_output=True, check=False).stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vendored", type=int, default=15_000, help="files in each ignored tree")
    args = parser.parse_args()
    rg = shutil.which("rg")
    with tempfile.TemporaryDirectory(prefix="agentd-bench-") as tmp:
        root = Path(tmp).resolve()
        t0 = time.perf_counter()
        generate(root, args.vendored)
        total = sum(len(files) for _, _, files in os.walk(root))
        print(f"repository: {total} files ({PROJECT_FILES} project .py, {2 * args.vendored} in ignored "
              f".venv/ and node_modules/), generated in {time.perf_counter() - t0:.1f} s")  # fmt: skip
        ctx = ToolContext(cwd=root, session_id="bench")
        rows: list[tuple[str, float, str]] = []
        for engine in (["auto"] if rg else []) + ["python"]:
            os.environ["AGENTD_GREP_ENGINE"] = engine
            label = "rg walk" if engine == "auto" else "pathspec walk"
            secs, res = median_time(tool_call(lambda: Grep().run({"pattern": "def main"}, ctx)))
            rows.append((f'agentd grep "def main" ({label})', secs, _count(res)))
            secs, res = median_time(tool_call(lambda: Glob().run({"pattern": "**/*.py"}, ctx)))
            rows.append((f'agentd glob "**/*.py" ({label})', secs, _count(res)))
        if rg:
            for title, argv in [
                ('rg -n "def main"', [rg, "-n", "def main"]),
                ('rg --files -g "*.py"', [rg, "--files", "-g", "*.py"]),
                ('rg -n "def main" --no-ignore (what ignoring saves)', [rg, "-n", "--no-ignore", "def main"]),
            ]:
                secs, out = median_time(run_rg(argv, root))
                assert isinstance(out, bytes)
                rows.append((title, secs, f"{len(out.splitlines())} lines"))
        else:
            print("rg not on PATH (Debian: ripgrep): only the pathspec walk is timed")
        width = max(len(r[0]) for r in rows)
        print(f"{'what':<{width}}  {'median':>9}  result   (median of {RUNS} runs)")
        for title, secs, result in rows:
            print(f"{title:<{width}}  {secs * 1000:7.1f} ms  {result}")


def _count(res: object) -> str:
    raw = getattr(res, "raw_output", None) or {}
    return f"{raw.get('matches')} matches" + (" (truncated)" if raw.get("truncated") else "")


if __name__ == "__main__":
    main()
