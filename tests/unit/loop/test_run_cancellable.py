"""`run_cancellable` (issue 32): an operation awaited unless the turn's cancel fires first —
on both of its paths, the one-future wait (the default) and `asyncio.wait` on a task of
`cancel.wait()` (`AGENTD_CANCEL_WAIT=asyncio`)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator

import pytest

from agentd.loop import cancel_wait
from agentd.loop.context import TurnCancelled, run_cancellable


@pytest.fixture(params=["one-future", "asyncio"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(cancel_wait, "LIBRARY_CANCEL_WAIT", request.param == "asyncio")
    yield request.param


class _Op:
    """An operation that waits until released, and records how it ended."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cleaned_up = False
        self.cancelled = False
        self.ended = asyncio.Event()

    async def __call__(self, value: int = 7) -> int:
        self.started.set()
        try:
            await self.release.wait()
            return value
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        finally:
            self.cleaned_up = True
            self.ended.set()


async def test_the_result_comes_back_and_nothing_stays_on_the_event(path: str) -> None:
    cancel, op = asyncio.Event(), _Op()
    op.release.set()
    assert await run_cancellable(op(), cancel) == 7
    assert not op.cancelled
    if path == "one-future":  # its future is off the event at once (the library's waiter task
        assert not cancel._waiters  # takes its own off a step later)


async def test_a_plain_awaitable_works_too(path: str) -> None:
    future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    future.set_result("done")
    assert await run_cancellable(future, asyncio.Event()) == "done"


async def test_cancel_stops_the_operation_and_waits_for_its_cleanup(path: str) -> None:
    cancel, op = asyncio.Event(), _Op()
    runner = asyncio.create_task(run_cancellable(op(), cancel))
    await op.started.wait()
    cancel.set()
    with pytest.raises(TurnCancelled):
        await runner
    assert op.cancelled and op.cleaned_up  # cleaned up before TurnCancelled was raised


async def test_an_already_cancelled_turn_never_starts_it(path: str) -> None:
    cancel, op = asyncio.Event(), _Op()
    cancel.set()
    coro = op()
    with pytest.raises(TurnCancelled):
        await run_cancellable(coro, cancel)
    assert not op.started.is_set()
    assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED  # not left to warn it was never awaited


async def test_its_failure_is_raised_as_it_is(path: str) -> None:
    async def failing() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await run_cancellable(failing(), asyncio.Event())


async def test_an_operation_that_swallows_the_cancel_still_ends_the_turn(path: str) -> None:
    cancel, started = asyncio.Event(), asyncio.Event()

    async def stubborn() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return "ignored the cancel"
        return "unreachable"

    runner = asyncio.create_task(run_cancellable(stubborn(), cancel))
    await started.wait()
    cancel.set()
    with pytest.raises(TurnCancelled):
        await runner


async def test_cancelling_the_caller_cancels_the_operation(path: str) -> None:
    cancel, op = asyncio.Event(), _Op()
    runner = asyncio.create_task(run_cancellable(op(), cancel))
    await op.started.wait()
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    await op.ended.wait()  # the operation's task ran its cancellation
    assert op.cancelled
    if path == "one-future":
        assert not cancel._waiters


async def test_many_waits_on_one_event_end_together(path: str) -> None:
    cancel = asyncio.Event()
    ops = [_Op() for _ in range(3)]
    runners = [asyncio.create_task(run_cancellable(op(), cancel)) for op in ops]
    for op in ops:
        await op.started.wait()
    ops[0].release.set()
    assert await runners[0] == 7
    cancel.set()
    for runner in runners[1:]:
        with pytest.raises(TurnCancelled):
            await runner
    assert all(op.cancelled for op in ops[1:])
