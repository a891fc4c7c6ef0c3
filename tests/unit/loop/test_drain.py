"""The drain barrier's three ends (issue 16 item 9). Seed 000: "等待最多 5 秒…超时则告警放行"."""

from __future__ import annotations

import asyncio
import logging

import pytest

from agentd.loop import cancel_wait
from agentd.loop.drain import DrainLimits, DrainResult, drain_barrier
from agentd.loop.limits import LoopLimits


@pytest.fixture(autouse=True, params=["one-future", "asyncio"])
def wait_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test on both ways of waiting (`AGENTD_CANCEL_WAIT`)."""
    monkeypatch.setattr(cancel_wait, "LIBRARY_CANCEL_WAIT", request.param == "asyncio")
    return str(request.param)


async def _instant() -> None:
    return None


class _Stalled:
    """An event log that never delivers; records whether its waiter was let go."""

    def __init__(self) -> None:
        self.abandoned = False

    async def __call__(self) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.abandoned = True
            raise


def test_the_default_bound_is_the_seeds_five_seconds() -> None:
    assert LoopLimits().drain.timeout_s == 5.0
    assert LoopLimits().with_overrides({"drain": {"timeout_s": 0.5}}).drain.timeout_s == 0.5
    with pytest.raises(ValueError):
        DrainLimits(timeout_s=0)


async def test_delivered_events_pass_the_barrier() -> None:
    assert await drain_barrier(_instant, asyncio.Event(), DrainLimits()) is DrainResult.DRAINED


async def test_a_stalled_log_is_waited_for_at_most_the_bound_then_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="agentd.loop.drain")
    stalled = _Stalled()
    result = await drain_barrier(stalled, asyncio.Event(), DrainLimits(timeout_s=0.01))
    assert result is DrainResult.TIMED_OUT
    assert stalled.abandoned
    assert any("drain barrier" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


async def test_a_cancel_ends_the_wait_at_once() -> None:
    cancel = asyncio.Event()
    stalled = _Stalled()
    waiting = asyncio.create_task(drain_barrier(stalled, cancel, DrainLimits(timeout_s=3600)))
    await asyncio.sleep(0)  # let it start waiting (ordering only; nothing is timed)
    cancel.set()
    assert await waiting is DrainResult.CANCELLED
    assert stalled.abandoned


async def test_an_already_cancelled_turn_does_not_wait() -> None:
    cancel = asyncio.Event()
    cancel.set()
    assert await drain_barrier(_Stalled(), cancel, DrainLimits(timeout_s=3600)) is DrainResult.CANCELLED


async def test_a_failing_flush_surfaces(wait_path: str) -> None:
    async def failing() -> None:
        raise RuntimeError("the log broke")

    with pytest.raises(RuntimeError, match="the log broke"):
        await drain_barrier(failing, asyncio.Event(), DrainLimits())


async def test_the_wait_leaves_nothing_on_the_cancel_event(wait_path: str) -> None:
    cancel = asyncio.Event()
    assert await drain_barrier(_instant, cancel, DrainLimits()) is DrainResult.DRAINED
    assert await drain_barrier(_Stalled(), cancel, DrainLimits(timeout_s=0.01)) is DrainResult.TIMED_OUT
    if wait_path == "one-future":  # (the library's waiter task takes its future off a step later)
        assert not cancel._waiters


class _Writer:
    """Barriers as the event writer gives them: plain futures it answers itself — unless
    one is done already (then it leaves it alone, as `publish_items` does)."""

    def __init__(self) -> None:
        self.barriers: list[asyncio.Future[None]] = []

    def __call__(self) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.barriers.append(fut)
        return fut

    def answer(self) -> None:
        for fut in self.barriers:
            if not fut.done():
                fut.set_result(None)


async def test_a_writer_barrier_ends_each_way_and_leaves_nothing_behind(wait_path: str) -> None:
    writer, cancel = _Writer(), asyncio.Event()
    waiting = asyncio.create_task(drain_barrier(writer, cancel, DrainLimits(timeout_s=3600)))
    await asyncio.sleep(0)
    writer.answer()
    assert await waiting is DrainResult.DRAINED
    waiting = asyncio.create_task(drain_barrier(writer, cancel, DrainLimits(timeout_s=3600)))
    await asyncio.sleep(0)
    cancel.set()
    assert await waiting is DrainResult.CANCELLED
    writer.answer()  # (the writer meets a barrier the cancel completed: left alone)
    cancel.clear()
    assert await drain_barrier(writer, cancel, DrainLimits(timeout_s=0.01)) is DrainResult.TIMED_OUT
    failing = _Writer()
    waiting = asyncio.create_task(drain_barrier(failing, cancel, DrainLimits(timeout_s=3600)))
    await asyncio.sleep(0)
    failing.barriers[0].set_exception(RuntimeError("the log broke"))
    with pytest.raises(RuntimeError, match="the log broke"):
        await waiting
    if wait_path == "one-future":
        assert not cancel._waiters


async def test_a_writer_barrier_resumes_the_turn_in_the_next_pass(wait_path: str) -> None:
    """Issue 32: the barrier future is the waiter itself — no wake-callback pass between the
    writer's answer and the turn."""
    if wait_path != "one-future":
        pytest.skip("the library's wait has its own tasks")
    writer = _Writer()
    waiting = asyncio.create_task(drain_barrier(writer, asyncio.Event(), DrainLimits(timeout_s=3600)))
    await asyncio.sleep(0)
    writer.answer()
    await asyncio.sleep(0)  # one pass: the turn's step runs before this task's
    assert waiting.done() and waiting.result() is DrainResult.DRAINED
