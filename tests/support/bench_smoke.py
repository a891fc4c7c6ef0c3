"""Running a benchmark script in its smoke mode (tests/e2e/bench)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPO_ROOT


def run_smoke(script: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / script), "--smoke", *args],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=110,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout
