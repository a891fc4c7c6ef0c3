"""The per-test timeout really ends a hung test (issue 10): a test whose event loop keeps
running callbacks (where the signal method's exception would be swallowed) must end the
run with a stack dump rather than hang it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

HUNG = textwrap.dedent(
    """
    import asyncio

    async def test_hangs_in_callbacks():
        loop = asyncio.get_running_loop()

        def spin():
            loop.call_later(0.01, spin)  # the loop stays busy with callbacks, forever

        spin()
        await asyncio.Event().wait()
    """
)


@pytest.mark.parametrize(
    "parallel",
    [
        pytest.param(["-n", "0"], id="serial"),
        # The suite runs under pytest-xdist: the timeout ends the worker, the run goes on,
        # and the worker's stacks still reach the output (tests/support/xdist_stderr.py).
        pytest.param(["-n", "1", "-p", "tests.support.xdist_stderr"], id="xdist"),
    ],
)
def test_a_hung_async_test_is_ended_by_the_timeout(tmp_path: Path, parallel: list[str]) -> None:
    (tmp_path / "test_hung.py").write_text(HUNG)
    root = REPO_ROOT
    path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}  # the subprocess imports tests.support
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=2", *parallel,
         "--rootdir", str(tmp_path), "-c", str(root / "pyproject.toml"), str(tmp_path / "test_hung.py")],
        capture_output=True,
        text=True,
        timeout=90,  # far beyond the 2 s test timeout: only a broken timeout gets here
        cwd=tmp_path,
        env=env,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Timeout" in out, out
    assert "Stack of MainThread" in out, out  # the stacks are dumped for diagnosis
