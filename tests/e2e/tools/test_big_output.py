"""`bash` printing 100 MB (issue 13, item 6): a bounded, clearly cut result that says
where the full output is, and the server's memory does not grow with the output.

The command runs in a fresh Python process (the real tool, the real pipe) that reports
its own peak RSS (`VmHWM`; not `ru_maxrss`, which a child inherits from the parent that
forked it: here pytest's) before and after: holding the output, even once, would raise
the peak by at least 100 MB; reading it into a head buffer and a tail ring does not.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agentd.tools.shell.spill import SPILL_CAP
from tests.support.paths import REPO_ROOT

MB = 1_000_000

SCRIPT = r"""
import asyncio, json, sys
from pathlib import Path
from agentd.tools.base import ToolContext
from agentd.tools.shell.bash import Bash

def peak_kib() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise SystemExit("no VmHWM")

async def main() -> None:
    ctx = ToolContext(cwd=Path(sys.argv[1]), session_id="s")
    await Bash().run({"command": "seq 1 100000"}, ctx)  # warm up: imports, buffers, a log
    before = peak_kib()
    res = await Bash().run({"command": sys.argv[2], "timeout": 100}, ctx)
    after = peak_kib()
    print(json.dumps({"before_kib": before, "after_kib": after, "output": res.output,
                      "raw": res.raw_output, "is_error": res.is_error}))

asyncio.run(main())
"""


def test_100_mb_of_output_is_cut_spilled_to_a_capped_log_and_memory_stays_flat(tmp_path: Path) -> None:
    # 100 MB between a first and a last line, so the head and the tail can be told apart.
    command = "echo THE-START; yes 'a line of output' | head -c 100000000; echo; echo THE-END"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), command],
        capture_output=True,
        text=True,
        timeout=110,
        cwd=REPO_ROOT,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    output: str = report["output"]
    raw = report["raw"]
    assert not report["is_error"] and raw["exitCode"] == 0 and raw["truncated"] is True
    # Bounded, with the head and the tail, and clearly cut.
    assert len(output) < 40_000
    assert output.startswith("THE-START\na line of output\n")
    assert "characters of output omitted" in output
    assert "THE-END" in output
    # Where to look next: the log in the workspace, capped.
    rel = raw["outputFile"]
    assert f"the first {SPILL_CAP} bytes of output is in {rel}" in output
    assert "100000019 bytes in all" in output
    log = tmp_path / rel
    assert log.stat().st_size < SPILL_CAP + 200
    with log.open("rb") as f:
        assert f.read(27) == b"THE-START\na line of output\n"
        f.seek(SPILL_CAP)
        assert b"log cut at" in f.read()
    # The server process did not hold the output: its peak grew far less than 100 MB.
    grew = (report["after_kib"] - report["before_kib"]) * 1024
    assert grew < 30 * MB, f"peak RSS grew by {grew / MB:.0f} MB for 100 MB of output"
