"""A task that ignores its cancellation no longer hangs a test's teardown (and with it the
run): the test errors once the loop's teardown deadline passes, naming the task and the
await that holds it (tests/support/loop_teardown.py); the tests after it still run."""

from __future__ import annotations

import asyncio
import asyncio.runners
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.loop_teardown import DEADLINE_SETTING, cancel_all_tasks_bounded
from tests.support.paths import REPO_ROOT

STUBBORN = textwrap.dedent(
    """
    import asyncio

    async def held_here():
        await asyncio.sleep(3600)

    async def test_leaves_a_stubborn_task():
        async def stubborn():
            while True:
                try:
                    await held_here()
                except asyncio.CancelledError:
                    pass  # ignores it: the loop's teardown would wait for ever

        asyncio.create_task(stubborn(), name="the-stubborn-one")
        await asyncio.sleep(0)

    async def test_leaves_a_task_that_takes_its_cancellation_slowly():
        async def slow():
            try:
                await asyncio.sleep(3600)
            finally:
                await asyncio.sleep(0.01)  # cleans up, then ends: not a hang

        asyncio.create_task(slow(), name="slow")
        await asyncio.sleep(0)

    def test_after_it():
        pass
    """
)


def test_a_task_ignoring_its_cancellation_fails_its_test_with_the_stack(tmp_path: Path) -> None:
    (tmp_path / "test_stubborn.py").write_text(STUBBORN)
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, DEADLINE_SETTING: "1"}
    args = ["-q", "-p", "no:cacheprovider", "-n", "0", "-p", "tests.support.loop_teardown"]
    args += ["--rootdir", str(tmp_path), "-c", str(REPO_ROOT / "pyproject.toml")]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *args, str(tmp_path / "test_stubborn.py")],
        capture_output=True,
        text=True,
        timeout=90,  # far beyond the 1 s deadline: only a hang gets here
        cwd=tmp_path,
        env=env,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "3 passed, 1 error" in out, out  # the teardown errors; the tests after it run
    assert "ERROR at teardown of test_leaves_a_stubborn_task" in out, out
    assert "LoopTeardownHang: 1 task(s) still running 1 s after" in out, out
    assert "'the-stubborn-one'" in out, out
    assert "in held_here" in out, out  # the inner await, not only the task's own frame


def test_the_suite_runs_with_the_bounded_teardown() -> None:
    assert asyncio.runners._cancel_all_tasks is cancel_all_tasks_bounded  # type: ignore[attr-defined]


def test_tasks_that_end_when_cancelled_are_awaited_as_before() -> None:
    ended: list[str] = []

    async def cleanup(name: str) -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(0)
            ended.append(name)

    async def start() -> None:
        for name in ("a", "b"):
            asyncio.get_running_loop().create_task(cleanup(name))
        await asyncio.sleep(0)

    with asyncio.Runner() as runner:
        runner.run(start())
    assert sorted(ended) == ["a", "b"]
