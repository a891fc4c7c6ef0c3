"""What the event loop lets go when the server goes idle (agentd/infra/idle_release.py):
the default executor renewed, so the threads a load started end. Also with the module
switch off (the behaviour before: the threads kept)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agentd.infra import idle_release
from agentd.infra.idle_release import DefaultExecutor


@pytest.fixture(params=[True, False], ids=["release", "keep"])
def release(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(idle_release, "RELEASE", request.param)
    return bool(request.param)


async def test_renew_ends_the_threads_the_old_executor_started(release: bool) -> None:
    executor = DefaultExecutor(asyncio.get_running_loop(), prefix="test-idle")
    try:
        worker = await asyncio.to_thread(threading.current_thread)
        assert worker.name.startswith("test-idle")  # ours is the loop's default
        old = executor.current
        executor.renew()
        if release:
            assert executor.current is not old and executor.renewals == 1
            await asyncio.to_thread(worker.join)  # (on the new executor's thread)
            assert not worker.is_alive()
            assert await asyncio.to_thread(threading.current_thread) is not worker
        else:
            assert executor.current is old and executor.renewals == 0
            assert worker.is_alive()
            assert await asyncio.to_thread(threading.current_thread) is worker
    finally:
        executor.current.shutdown(wait=False)


async def test_work_queued_on_the_old_executor_still_runs() -> None:
    loop = asyncio.get_running_loop()
    executor = DefaultExecutor(loop, prefix="test-idle")
    gate = threading.Event()
    try:
        held = asyncio.ensure_future(asyncio.to_thread(gate.wait, 30))
        queued = [loop.run_in_executor(None, lambda n=n: n) for n in range(3)]
        executor.renew()
        gate.set()
        assert await held is True
        assert await asyncio.gather(*queued) == [0, 1, 2]
    finally:
        executor.current.shutdown(wait=False)
