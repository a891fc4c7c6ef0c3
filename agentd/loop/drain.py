"""The drain barrier (R-L3h): before a step's tools run, wait until the events of the
sampling round that asked for them have been handed to the clients' hubs — bounded.

Seed 000 §4.6: "采样成功后等待最多 5 秒让事件流排空再继续…超时则告警放行": wait at most
`timeout_s`, then log a warning and go on (the writer keeps events in order anyway; the
barrier only stops tools from acting before clients saw why). A user cancel ends the wait
at once: a stalled event log must not hold a cancelled turn's tools hostage.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agentd.loop.cancel_wait import waiters_of

log = logging.getLogger(__name__)
# A barrier that is a plain future (the event writer's) waits as the cancel event's waiter
# itself (issue 32: one loop pass fewer per tool round). False: the wake-callback future.
BARRIER_AS_WAITER = True


@dataclass(frozen=True)
class DrainLimits:
    timeout_s: float = 5.0  # the seed's bound; AGENTD_LIMITS {"drain": {"timeout_s": …}}

    def __post_init__(self) -> None:
        if self.timeout_s <= 0:
            raise ValueError("drain.timeout_s must be > 0")


class DrainResult(StrEnum):
    DRAINED = "drained"  # every event so far reached the hubs
    TIMED_OUT = "timed_out"  # not within the bound: warned, the tools run anyway
    CANCELLED = "cancelled"  # the user cancelled while it waited: run no tools


async def drain_barrier(
    flushed: Callable[[], Awaitable[None]], cancel: asyncio.Event, limits: DrainLimits
) -> DrainResult:
    """Wait for `flushed()`, at most `limits.timeout_s`, unless `cancel` fires first."""
    if cancel.is_set():
        return DrainResult.CANCELLED
    waiters = waiters_of(cancel)
    if waiters is None:
        result = await _wait_library(flushed, cancel, limits)
    else:
        result = await _wait_one_future(flushed, cancel, waiters, limits)
    if result is not None:
        return result
    log.warning(
        "drain barrier: the step's events were not delivered within %gs; running its tools anyway",
        limits.timeout_s,
    )
    return DrainResult.TIMED_OUT


async def _wait_one_future(
    flushed: Callable[[], Awaitable[None]],
    cancel: asyncio.Event,
    waiters: collections.deque[asyncio.Future[Any]],
    limits: DrainLimits,
) -> DrainResult | None:
    """DRAINED, CANCELLED or None (timed out): one future on the cancel event's waiters,
    completed by the flush's end, `cancel.set()` or the timer — no second task, no
    `asyncio.wait` (`agentd.loop.cancel_wait`)."""
    loop = asyncio.get_running_loop()
    awaited = flushed()
    if BARRIER_AS_WAITER and type(awaited) is asyncio.Future:
        return await _wait_on_barrier(awaited, cancel, waiters, limits)
    drained = asyncio.ensure_future(awaited)
    woken = loop.create_future()

    def wake(_: object = None) -> None:
        if not woken.done():
            woken.set_result(True)

    drained.add_done_callback(wake)
    waiters.append(woken)
    timer = loop.call_later(limits.timeout_s, wake)
    try:
        await woken
        finished = drained.done()
    finally:
        timer.cancel()
        drained.remove_done_callback(wake)
        try:  # (not contextlib.suppress: three Python calls per barrier)
            waiters.remove(woken)
        except ValueError:
            pass
        if not drained.done():
            drained.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await drained
    if finished:
        drained.result()  # a failing barrier is a bug: let it surface
        return DrainResult.DRAINED
    return DrainResult.CANCELLED if cancel.is_set() else None


async def _wait_on_barrier(
    barrier: asyncio.Future[Any],
    cancel: asyncio.Event,
    waiters: collections.deque[asyncio.Future[Any]],
    limits: DrainLimits,
) -> DrainResult | None:
    """The writer's barrier future itself is the waiter: the writer's answer (None),
    `cancel.set()` (True) or the timer (False) completes it, and the turn resumes in the
    next loop pass — not a done-callback's pass and then its own (issue 32). The writer
    answers only a barrier not done yet, so one completed here is left alone."""
    waiters.append(barrier)
    timer = asyncio.get_running_loop().call_later(limits.timeout_s, _expire, barrier)
    try:
        how = await barrier  # (a failing barrier is a bug: let it surface)
    finally:
        timer.cancel()
        try:
            waiters.remove(barrier)
        except ValueError:
            pass
    if how is None:
        return DrainResult.DRAINED
    return DrainResult.CANCELLED if cancel.is_set() else None


def _expire(barrier: asyncio.Future[Any]) -> None:
    if not barrier.done():
        barrier.set_result(False)


async def _wait_library(
    flushed: Callable[[], Awaitable[None]], cancel: asyncio.Event, limits: DrainLimits
) -> DrainResult | None:
    """DRAINED, CANCELLED or None (timed out): `asyncio.wait` on the flush and a task of
    `cancel.wait()`."""
    drained = asyncio.ensure_future(flushed())
    cancelled = asyncio.ensure_future(cancel.wait())
    try:
        done, _ = await asyncio.wait(
            {drained, cancelled}, timeout=limits.timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        for task in (drained, cancelled):
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    if drained in done:
        drained.result()  # a failing barrier is a bug: let it surface
        return DrainResult.DRAINED
    return DrainResult.CANCELLED if cancelled in done else None
