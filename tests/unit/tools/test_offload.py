"""The tool pools (agentd/tools/offload.py): the hop (`FAST_HOP`, a SimpleQueue and
`call_soon_threadsafe`) and the general way (`run_in_executor` + `wait_for`) keep the
same contract — result, exception, deadline, cancellation, withdrawal, thread cap."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from agentd.tools import offload
from agentd.tools.errors import ToolError
from tests.support.polling import until


@pytest.fixture(params=[True, False], ids=["hop", "executor"])
def fast(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(offload, "FAST_HOP", request.param)
    return bool(request.param)


async def test_result_comes_back_from_a_worker_thread(fast: bool) -> None:
    def work(stop: threading.Event) -> tuple[str, bool]:
        return threading.current_thread().name, stop.is_set()

    name, stopped = await offload.run_blocking(work, what="w")
    assert name.startswith("agentd-files") and name != threading.main_thread().name
    assert stopped is False


async def test_an_exception_is_the_callers(fast: bool) -> None:
    def work(stop: threading.Event) -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await offload.run_blocking(work, what="w", pool=offload.Pool.SEARCH)


async def test_deadline_is_a_tool_error_and_stops_the_worker(fast: bool) -> None:
    stopped = threading.Event()

    def work(stop: threading.Event) -> None:
        stop.wait(30)
        stopped.set()

    with pytest.raises(ToolError, match=r"slow thing did not finish within 0\.05 s and was stopped"):
        await offload.run_blocking(work, what="slow thing", deadline=0.05)
    await until(lambda: stopped.is_set(), what="the worker to see stop")


async def test_a_call_cancelled_before_a_worker_took_it_never_runs(fast: bool) -> None:
    """Every worker of the pool busy: a queued call that is cancelled is withdrawn."""
    release = threading.Event()
    started = threading.Semaphore(0)
    ran = threading.Event()
    n = offload._WORKERS[offload.Pool.SEARCH]

    def busy(stop: threading.Event) -> None:
        started.release()
        release.wait(30)

    def queued(stop: threading.Event) -> None:
        ran.set()

    blockers = [
        asyncio.create_task(offload.run_blocking(busy, what="b", pool=offload.Pool.SEARCH)) for _ in range(n)
    ]
    for _ in range(n):
        await asyncio.to_thread(started.acquire, True, 30)
    call = asyncio.create_task(offload.run_blocking(queued, what="q", pool=offload.Pool.SEARCH))
    await asyncio.sleep(0)  # let it be queued (no worker is free to take it)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    release.set()
    await asyncio.gather(*blockers)
    # Every worker free again: a call after it runs, so the withdrawn one had its turn.
    await offload.run_blocking(lambda stop: None, what="after", pool=offload.Pool.SEARCH)
    assert not ran.is_set()


async def test_the_hop_starts_threads_as_calls_need_them_up_to_its_cap() -> None:
    pool = offload.HopPool("test-hop", 2)
    loop = asyncio.get_running_loop()
    assert pool.threads == 0
    done = loop.create_future()
    pool.submit(lambda stop: 1, threading.Event(), done)
    assert await done == 1
    assert pool.threads == 1
    # One after another: the one thread serves them all.
    for _ in range(3):
        done = loop.create_future()
        pool.submit(lambda stop: 2, threading.Event(), done)
        assert await done == 2
    assert pool.threads == 1
    # Three at once, each waiting for a release: two threads at most, the third queued.
    release, started = threading.Event(), threading.Semaphore(0)

    def hold(stop: threading.Event) -> str:
        started.release()
        release.wait(30)
        return threading.current_thread().name

    futures = [loop.create_future() for _ in range(3)]
    for f in futures:
        pool.submit(hold, threading.Event(), f)
    for _ in range(2):
        await asyncio.to_thread(started.acquire, True, 30)
    assert pool.threads == 2
    release.set()
    names = await asyncio.gather(*futures)
    assert set(names) <= {"test-hop_0", "test-hop_1"}
    assert pool.threads == 2


async def test_a_deadline_that_lands_as_the_task_is_cancelled_is_a_cancel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The deadline and a cancel of the caller in the same loop iteration (the hop's own
    `call_later` deadline): the caller's cancel wins — it must never turn into a ToolError the
    turn would carry on from."""
    monkeypatch.setattr(offload, "FAST_HOP", True)
    running = threading.Event()

    def work(stop: threading.Event) -> None:
        running.set()
        stop.wait(30)

    loop = asyncio.get_running_loop()
    timers: list[tuple[Callable[..., object], tuple[object, ...]]] = []
    real_call_later = loop.call_later

    def call_later(delay: float, callback: Callable[..., object], *args: object) -> asyncio.TimerHandle:
        if delay == 3600:  # the call's deadline (not the polling's sleeps)
            timers.append((callback, args))
        return real_call_later(delay, callback, *args)

    monkeypatch.setattr(loop, "call_later", call_later)
    call = asyncio.create_task(offload.run_blocking(work, what="w", deadline=3600))
    await until(lambda: running.is_set(), what="the worker to start")
    deadline, args = timers[0]
    deadline(*args)  # the deadline is due now (its timer's callback, run in this iteration)
    call.cancel()  # and the caller is cancelled before it ran again
    with pytest.raises(asyncio.CancelledError):
        await call
