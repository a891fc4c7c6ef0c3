"""What the event loop lets go when the server goes idle (agentd/infra/idle_release.py):
the default executor renewed, so the threads a load started end; uvloop's handle free
lists emptied of the load's handles. Each also with the module switch off (the behaviour
before: threads and handles kept)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import uvloop

from agentd.infra import idle_release
from agentd.infra.idle_release import FREE_LIST, DefaultExecutor, drop_handle_free_lists


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
        executor.close()


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
        executor.close()


def _on_uvloop(main: Callable[[], Awaitable[Any]]) -> Any:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main())


async def _handle_addresses(n: int) -> tuple[set[int], set[int]]:
    """The addresses of `n` callback and `n` timer handles made and freed (back on the
    free lists, if the lists had room)."""
    loop = asyncio.get_running_loop()
    soon = [loop.call_soon(lambda: None) for _ in range(n)]
    later = [loop.call_later(3600, lambda: None) for _ in range(n)]
    for h in later:
        h.cancel()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    addresses = {id(h) for h in soon}, {id(h) for h in later}
    soon.clear()
    later.clear()
    return addresses


def test_the_loads_handles_leave_uvloops_free_lists(release: bool) -> None:
    async def main() -> tuple[int, int]:
        loads = await _handle_addresses(FREE_LIST)  # the free lists now hold these
        await drop_handle_free_lists()
        # The next handles come off the free lists: the load's, unless they were dropped.
        again = await _handle_addresses(FREE_LIST)
        return len(loads[0] & again[0]), len(loads[1] & again[1])

    soon_kept, later_kept = _on_uvloop(main)
    if release:
        assert soon_kept < FREE_LIST // 10 and later_kept < FREE_LIST // 10
    else:
        assert soon_kept > FREE_LIST * 9 // 10 and later_kept > FREE_LIST * 9 // 10


async def test_on_asyncios_own_loop_it_runs_and_leaves_the_loop_working() -> None:
    await drop_handle_free_lists()  # no free lists there: the general path
    assert await asyncio.to_thread(lambda: 5) == 5
