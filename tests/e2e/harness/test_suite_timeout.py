"""The per-test timeout really ends a hung test (issue 10): a test whose event loop keeps
running callbacks (where the signal method's exception would be swallowed) must end the
run with a stack dump rather than hang it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

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


def test_a_hung_async_test_is_ended_by_the_timeout(tmp_path: Path) -> None:
    (tmp_path / "test_hung.py").write_text(HUNG)
    root = REPO_ROOT
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=2",
         "--rootdir", str(tmp_path), "-c", str(root / "pyproject.toml"), str(tmp_path / "test_hung.py")],
        capture_output=True,
        text=True,
        timeout=90,  # far beyond the 2 s test timeout: only a broken timeout gets here
        cwd=tmp_path,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Timeout" in out, out
    assert "Stack of MainThread" in out, out  # the stacks are dumped for diagnosis
