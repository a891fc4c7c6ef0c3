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


def _noop() -> None:
    pass


async def _passes(n: int = 3) -> None:
    for _ in range(n):  # loop passes: uvloop frees a cancelled timer at its handle's close
        await asyncio.sleep(0)


async def _reused_after_a_load(drain: bool) -> tuple[int, int, int]:
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def load() -> tuple[list[asyncio.TimerHandle], list[asyncio.Handle], list[object]]:
        return (
            [loop.call_at(10**6, _noop) for _ in range(200)],
            [loop.call_soon(_noop) for _ in range(200)],
            [future.__await__() for _ in range(200)],
        )

    timers, handles, iterators = load()
    for timer in timers:
        timer.cancel()
    seen = [{id(x) for x in kind} for kind in (timers, handles, iterators)]
    del timers, handles, iterators  # onto the free lists (the handles once they have run)
    await _passes()
    assert await idle_release.drain_free_lists(loop) is drain
    await _passes()
    timers, handles, iterators = load()  # fewer than the lists hold: all off the lists
    for timer in timers:
        timer.cancel()
    future.cancel()
    now: list[set[int]] = [{id(x) for x in kind} for kind in (timers, handles, iterators)]
    await _passes()  # (the handles run)
    return len(seen[0] & now[0]), len(seen[1] & now[1]), len(seen[2] & now[2])


@pytest.mark.parametrize("drain", [True, False], ids=["drain", "keep"])
def test_drain_swaps_the_loads_free_list_objects_for_fresh_ones(
    drain: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(uvloop's timer handles and plain handles, asyncio's future iterators, the server's
    loop: after the drain the next ones are none of the load's; kept, nearly all are the
    load's.)"""
    import uvloop

    monkeypatch.setattr(idle_release, "DRAIN", drain)
    timers, handles, iterators = uvloop.run(_reused_after_a_load(drain))
    if drain:
        assert (timers, handles, iterators) == (0, 0, 0)
    else:
        assert timers >= 150 and handles >= 150 and iterators >= 150


def test_plain_handles_left_out_with_their_switch_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """(`HANDLES` off: the timers and iterators are swapped, the plain handles are the load's.)"""
    import uvloop

    monkeypatch.setattr(idle_release, "HANDLES", False)
    timers, handles, iterators = uvloop.run(_reused_after_a_load(True))
    assert (timers, iterators) == (0, 0)
    assert handles >= 150


@pytest.mark.parametrize("clear", [True, False], ids=["clear", "keep"])
def test_the_type_cache_lets_go_of_the_names_it_was_looked_up_by(
    clear: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(An attribute name built at run time, as `datetime.timetuple`'s "dst": the type cache
    holds a reference to it after the look-up, until it is cleared.)"""
    import sys
    from datetime import UTC, datetime

    monkeypatch.setattr(idle_release, "TYPE_CACHE", clear)
    name = "".join(["utc", "offset"])  # not interned: a new string
    alone = sys.getrefcount(name)
    getattr(datetime.now(UTC), name)
    assert sys.getrefcount(name) == alone + 1  # the cache's entry
    assert idle_release.clear_type_cache() is clear
    assert sys.getrefcount(name) == alone + (0 if clear else 1)
