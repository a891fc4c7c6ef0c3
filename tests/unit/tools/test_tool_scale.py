"""Tool results stay useful at scale (issue 13, item 6: read_file and grep): a huge or binary
file and a million matches give a bounded, clearly truncated result that says where to go
on, and the server's memory does not grow with the file or the output (measured with
tracemalloc in a fresh interpreter, so nothing else in the test process muddies the peak)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentd.tools.base import ToolContext
from agentd.tools.files.tools import READ_MAX_LINE_CHARS, ReadFile
from agentd.tools.search.grep import GREP_DEFAULT_RESULTS, Grep

REPO_ROOT = Path(__file__).resolve().parents[3]
BIG = 200 * 1024 * 1024
needs_rg = pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep (Debian: ripgrep) not installed")
# Far below the file (200 MiB), and below a list of the million lines held at once (20 MiB
# even for one-character lines, which Python shares): the grep of old peaked there.
PEAK_LIMIT = 12 * 1024 * 1024


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root.resolve()


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext(cwd=ws, session_id="s-scale")


def _sparse_text(path: Path) -> int:
    """100 short lines, one line of 9000 x's, then a hole up to 200 MiB (NUL bytes: valid
    UTF-8, so one enormous "line" for read_file) and a last line. Returns the hole's length."""
    head = b"".join(b"line %d\n" % i for i in range(1, 101)) + b"x" * 9000 + b"\n"
    with path.open("wb") as f:
        f.write(head)
        f.seek(BIG)
        f.write(b"\ntail\n")
    return BIG - len(head)


def _peak(call: str, ws: Path, env: dict[str, str] | None = None) -> tuple[dict[str, object], int]:
    """Run `call` (an expression awaiting a tool) in a fresh interpreter under tracemalloc;
    its raw_output and output length, and the peak of traced memory."""
    script = textwrap.dedent(f"""
        import asyncio, json, tracemalloc
        from pathlib import Path
        from agentd.tools.base import ToolContext
        from agentd.tools.files.tools import ReadFile
        from agentd.tools.search.grep import Grep
        ctx = ToolContext(cwd=Path({str(ws)!r}), session_id="s")
        tracemalloc.start()
        res = asyncio.run({call})
        _, peak = tracemalloc.get_traced_memory()
        print(json.dumps({{"raw": res.raw_output, "chars": len(res.output), "peak": peak}}))
    """)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return {**report["raw"], "chars": report["chars"]}, int(report["peak"])


async def test_read_file_of_a_huge_sparse_file_is_bounded(ctx: ToolContext, ws: Path) -> None:
    hole = _sparse_text(ws / "huge.txt")
    res = await ReadFile().run({"path": "huge.txt", "offset": 95}, ctx)
    lines = res.output.split("\n")
    assert lines[:6] == [f"{n:6d}\tline {n}" for n in range(95, 101)]
    shortened = f" [... line truncated, {9000 - READ_MAX_LINE_CHARS} more characters]"
    assert lines[6] == f"   101\t{'x' * READ_MAX_LINE_CHARS}{shortened}"
    # The hole: one 200 MiB line of NULs, shortened; then the last line.
    assert lines[7].endswith(f" [... line truncated, {hole - READ_MAX_LINE_CHARS} more characters]")
    assert lines[7].startswith("   102\t\0") and lines[8] == "   103\ttail"
    assert len(res.output) < 10_000

    first = await ReadFile().run({"path": "huge.txt", "limit": 3}, ctx)
    assert first.output.endswith("[showing lines 1-3 of 103; the file continues at line 4]")


def test_read_file_memory_stays_flat_on_a_200_mib_line(ws: Path) -> None:
    _sparse_text(ws / "huge.txt")
    raw, peak = _peak('ReadFile().run({"path": "huge.txt", "offset": 100}, ctx)', ws)
    assert raw["lines"] == 4 and int(str(raw["chars"])) < 10_000
    print(f"read_file peak: {peak / 2**20:.1f} MiB")
    assert peak < PEAK_LIMIT, f"read_file peaked at {peak / 2**20:.1f} MiB"


async def test_read_file_describes_a_binary_file(ctx: ToolContext, ws: Path) -> None:
    with (ws / "disk.img").open("wb") as f:  # all NULs: a sparse 200 MiB file
        f.truncate(BIG)
    (ws / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(3000))
    img = await ReadFile().run({"path": "disk.img"}, ctx)
    assert img.output.startswith("disk.img is a binary file (application/octet-stream, 200.0 MiB);")
    assert img.raw_output == {"lines": 0, "binary": True, "bytes": BIG, "mime": "application/octet-stream"}
    png = await ReadFile().run({"path": "logo.png"}, ctx)
    assert png.output.startswith("logo.png is a binary file (image/png, 2.9 KiB);")
    assert "IHDR" not in png.output and len(png.output) < 400


@pytest.mark.parametrize("engine", ["python", pytest.param("auto", marks=needs_rg)])
async def test_grep_with_a_million_matches_is_bounded(
    ctx: ToolContext, ws: Path, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "million.txt").write_bytes(b"a\n" * 1_000_000)
    monkeypatch.setenv("AGENTD_GREP_ENGINE", engine)
    res = await Grep().run({"pattern": "a"}, ctx)
    lines = res.output.split("\n")
    assert lines[:3] == ["million.txt:1: a", "million.txt:2: a", "million.txt:3: a"]
    assert len(lines) == GREP_DEFAULT_RESULTS + 1
    assert lines[-1].startswith(
        f"[stopped at {GREP_DEFAULT_RESULTS} matches (1 file(s), newest first); more exist"
    )
    assert res.raw_output is not None and res.raw_output["truncated"] is True
    assert res.raw_output["engine"] == ("rg" if engine == "auto" else "python")

    raw, peak = _peak(
        'Grep().run({"pattern": "a", "max_results": 1000}, ctx)', ws, {"AGENTD_GREP_ENGINE": engine}
    )
    assert raw["matches"] == 1000 and raw["truncated"] is True
    print(f"grep ({engine}) peak: {peak / 2**20:.1f} MiB")
    assert peak < PEAK_LIMIT, f"grep ({engine}) peaked at {peak / 2**20:.1f} MiB"


@pytest.mark.parametrize("engine", ["python", pytest.param("auto", marks=needs_rg)])
async def test_grep_bounds_a_very_long_matching_line(
    ctx: ToolContext, ws: Path, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "min.js").write_text("var a=1;" * 200_000 + "\n")  # 1.6 MB on one line
    monkeypatch.setenv("AGENTD_GREP_ENGINE", engine)
    res = await Grep().run({"pattern": "var"}, ctx)
    assert res.output.startswith("min.js:1: var a=1;")
    assert res.output.endswith(f" [... {1_600_000 - 300} more characters]")
    assert len(res.output) < 500
