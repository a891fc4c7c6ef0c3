"""The drain barrier (R-L3h): before a step's tools run, wait until the events of the
sampling round that asked for them have been handed to the clients' hubs — bounded.

Seed 000 §4.6: "采样成功后等待最多 5 秒让事件流排空再继续…超时则告警放行": wait at most
`timeout_s`, then log a warning and go on (the writer keeps events in order anyway; the
barrier only stops tools from acting before clients saw why). A user cancel ends the wait
at once: a stalled event log must not hold a cancelled turn's tools hostage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum

log = logging.getLogger(__name__)


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
    if cancelled in done:
        return DrainResult.CANCELLED
    log.warning(
        "drain barrier: the step's events were not delivered within %gs; running its tools anyway",
        limits.timeout_s,
    )
    return DrainResult.TIMED_OUT
