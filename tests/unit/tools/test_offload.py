"""`run_blocking`'s deadline on both of its paths: one `call_later` handle that sets `stop`
and cancels the awaited future (the default), and `asyncio.wait_for`
(`AGENTD_OFFLOAD_DEADLINE=asyncio`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator

import pytest

from agentd.tools import offload
from agentd.tools.errors import ToolError
from tests.support.polling import until


@pytest.fixture(params=["call-later", "wait_for"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(offload, "LIBRARY_DEADLINE", request.param == "wait_for")
    yield request.param


async def test_the_result_comes_back(path: str) -> None:
    assert await offload.run_blocking(lambda stop: 41 + 1, what="sum") == 42
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_a_failure_is_raised_as_it_is(path: str) -> None:
    def fail(stop: threading.Event) -> None:
        raise OSError("disk on fire")

    with pytest.raises(OSError, match="disk on fire"):
        await offload.run_blocking(fail, what="fail")


async def test_a_missed_deadline_is_a_tool_error_and_stops_the_worker(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    running, stopped = threading.Event(), threading.Event()

    def work(stop: threading.Event) -> None:
        running.set()
        stop.wait(30)
        stopped.set()

    timers = _deadline_timers(monkeypatch)
    call = asyncio.create_task(offload.run_blocking(work, what="slow thing", deadline=3600))
    # The deadline made due once the worker runs (a short real deadline could pass before a
    # busy machine starts the worker at all: then the work is dropped, never stopped).
    await until(lambda: running.is_set(), what="the worker to start")
    deadline, args = timers[0]
    deadline(*args)
    with pytest.raises(ToolError, match=r"slow thing did not finish within 3600 s"):
        await call
    await until(lambda: stopped.is_set(), what="the worker to see stop")
    await asyncio.sleep(0)  # no cancel left pending on the caller
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_cancelling_the_call_sets_stop_and_propagates(path: str) -> None:
    running, stopped = threading.Event(), threading.Event()

    def work(stop: threading.Event) -> None:
        running.set()
        stop.wait(30)
        stopped.set()

    call = asyncio.create_task(offload.run_blocking(work, what="w"))
    await until(lambda: running.is_set(), what="the worker to start")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await until(lambda: stopped.is_set(), what="the worker to see stop")


async def test_a_deadline_that_lands_as_the_task_is_cancelled_is_a_cancel(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline and a cancel of the caller in the same loop iteration: the caller's cancel
    wins (it must never turn into a ToolError the turn would carry on from)."""
    running = threading.Event()

    def work(stop: threading.Event) -> None:
        running.set()
        stop.wait(30)

    timers = _deadline_timers(monkeypatch)
    call = asyncio.create_task(offload.run_blocking(work, what="w", deadline=3600))
    await until(lambda: running.is_set(), what="the worker to start")
    deadline, args = timers[0]
    deadline(*args)  # the deadline is due now (its timer's callback, run in this iteration)
    call.cancel()  # and the caller is cancelled before it ran again
    with pytest.raises(asyncio.CancelledError):
        await call


def _deadline_timers(
    monkeypatch: pytest.MonkeyPatch,
) -> list[tuple[Callable[..., object], tuple[object, ...]]]:
    """The callbacks (and arguments) of the loop's `call_later` timers of 3600 s from now on:
    the call's deadline, which a test then runs itself when it wants it due."""
    loop = asyncio.get_running_loop()
    timers: list[tuple[Callable[..., object], tuple[object, ...]]] = []
    real_call_later = loop.call_later

    def call_later(delay: float, callback: Callable[..., object], *args: object) -> asyncio.TimerHandle:
        if delay == 3600:  # the call's deadline (not the polling's sleeps)
            timers.append((callback, args))
        return real_call_later(delay, callback, *args)

    monkeypatch.setattr(loop, "call_later", call_later)
    return timers
