"""`run_cancellable` (issue 32): an operation awaited unless the turn's cancel fires first —
on each of its paths: in the caller's task (the default), in a task of its own with the
one-future wait (`AGENTD_CANCEL_WAIT=task`), and `asyncio.wait` on a task of `cancel.wait()`
(`AGENTD_CANCEL_WAIT=asyncio`)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator

import pytest

from agentd.loop import cancel_wait
from agentd.loop.context import TurnCancelled, run_cancellable


@pytest.fixture(params=["inline", "one-future", "asyncio"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(cancel_wait, "LIBRARY_CANCEL_WAIT", request.param == "asyncio")
    monkeypatch.setattr(cancel_wait, "INLINE_CANCEL_WAIT", request.param == "inline")
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
    if path != "asyncio":  # its waiter is off the event at once (the library's waiter task
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
    if path != "asyncio":
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


async def test_the_default_path_runs_the_operation_in_the_callers_task(path: str) -> None:
    caller, ran_in = asyncio.current_task(), []

    async def op() -> None:
        ran_in.append(asyncio.current_task())

    await run_cancellable(op(), asyncio.Event())
    assert (ran_in[0] is caller) == (path == "inline")  # no task of its own: no loop iteration


async def test_a_cancelled_turn_leaves_no_cancel_pending_on_the_caller(path: str) -> None:
    cancel, op = asyncio.Event(), _Op()

    async def caller() -> int:
        with pytest.raises(TurnCancelled):
            await run_cancellable(op(), cancel)
        await asyncio.sleep(0)  # no CancelledError left over for the next await
        task = asyncio.current_task()
        assert task is not None
        return task.cancelling()

    runner = asyncio.create_task(caller())
    await op.started.wait()
    cancel.set()
    assert await runner == 0  # the cancel was taken back: a TaskGroup or timeout around is not confused


async def test_a_cancel_from_elsewhere_beside_the_turns_propagates(path: str) -> None:
    cancel, op = asyncio.Event(), _Op()
    runner = asyncio.create_task(run_cancellable(op(), cancel))
    await op.started.wait()
    cancel.set()
    runner.cancel()  # e.g. the server shuts down as the user cancels
    with pytest.raises(asyncio.CancelledError):
        await runner
    await op.ended.wait()
    assert op.cancelled


async def test_an_operation_that_swallows_a_cancel_from_elsewhere_does_not_lose_it(path: str) -> None:
    started = asyncio.Event()

    async def stubborn() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return "ignored the cancel"
        return "unreachable"

    runner = asyncio.create_task(run_cancellable(stubborn(), asyncio.Event()))
    await started.wait()
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner


async def test_an_error_while_being_cancelled_is_a_cancelled_turn(path: str) -> None:
    cancel, started = asyncio.Event(), asyncio.Event()

    async def failing_cleanup() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            raise OSError("the stream would not close")

    runner = asyncio.create_task(run_cancellable(failing_cleanup(), cancel))
    await started.wait()
    cancel.set()
    with pytest.raises(TurnCancelled):
        await runner


async def test_an_operation_that_cancels_the_turn_itself_is_stopped_at_its_next_wait(path: str) -> None:
    cancel, op = asyncio.Event(), _Op()

    async def cancelling() -> int:
        cancel.set()  # e.g. a tool that ends the turn
        return await op()

    with pytest.raises(TurnCancelled):
        await run_cancellable(cancelling(), cancel)
    assert op.cancelled and op.cleaned_up
    await asyncio.sleep(0)  # nothing left pending on this task


async def test_an_operation_that_cancels_the_turn_and_ends_at_once_keeps_its_result(path: str) -> None:
    cancel = asyncio.Event()

    async def quick() -> str:
        cancel.set()
        return "done"

    assert await run_cancellable(quick(), cancel) == "done"  # as on the task path: it ended first
    await asyncio.sleep(0)  # and no cancel stays pending for the caller's next await
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_a_deadline_inside_the_operation_is_its_own(path: str) -> None:
    cancel = asyncio.Event()

    async def slow() -> None:
        async with asyncio.timeout(0):  # (already past: no wait on the clock)
            await asyncio.Event().wait()

    with pytest.raises(TimeoutError):
        await run_cancellable(slow(), cancel)


async def test_a_cancel_inside_a_deadline_of_the_operation_is_a_cancelled_turn(path: str) -> None:
    cancel, op = asyncio.Event(), _Op()

    async def bounded() -> int:
        async with asyncio.timeout(3600):
            return await op()

    runner = asyncio.create_task(run_cancellable(bounded(), cancel))
    await op.started.wait()
    cancel.set()
    with pytest.raises(TurnCancelled):  # not taken for the deadline (no TimeoutError)
        await runner
    assert op.cancelled


async def test_nested_waits_end_at_the_one_whose_cancel_fired(path: str) -> None:
    outer, inner, op = asyncio.Event(), asyncio.Event(), _Op()

    async def child() -> int:
        return await run_cancellable(op(), inner)  # e.g. a sub-agent's turn inside a tool

    runner = asyncio.create_task(run_cancellable(child(), outer))
    await op.started.wait()
    outer.set()
    with pytest.raises(TurnCancelled):
        await runner
    assert op.cancelled and not inner.is_set()
    assert not outer._waiters or path == "asyncio"
