"""The deadline of a connection's wait in progress (a read, or a write waiting for room),
watched by one long-lived timer.

A streamed answer is read a network chunk at a time, and every read is bounded (the read
timeout, the first-token deadline, the stream idle timeout). A timer per read — scheduled,
then cancelled a millisecond later when the chunk came — was a fixed cost per chunk (issue 14:
a model streaming chunk by chunk paid it for every one). Here a read only records when it
fails; the timer is armed once and, when it fires, fails the read whose deadline passed or
re-arms itself at the deadline of the read now in progress (as servers watch their idle
connections). Only a read with an earlier deadline than the timer's re-arms it early.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

# A timer may fire up to this much before its time: uvloop counts in whole milliseconds
# (asyncio's own loop in its clock's resolution). A deadline that near has passed.
_RESOLUTION_S = 0.001


class ReadDeadline:
    """One connection's: `watch` a read's waiter until `when`, `release` it when it ends."""

    __slots__ = ("_armed_at", "_error", "_timer", "_waiter", "when")

    def __init__(self) -> None:
        self.when: float | None = None  # the read in progress fails then (loop time)
        self._waiter: asyncio.Future[None] | None = None
        self._error: Callable[[], BaseException] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._armed_at = 0.0

    def watch(
        self,
        loop: asyncio.AbstractEventLoop,
        waiter: asyncio.Future[None],
        when: float,
        error: Callable[[], BaseException],
    ) -> None:
        """Fail `waiter` with `error()` at `when` unless the read ends (`release`) first."""
        self.when, self._waiter, self._error = when, waiter, error
        timer = self._timer
        if timer is None or when < self._armed_at:
            if timer is not None:
                timer.cancel()
            self._timer = loop.call_at(when, self._fire, loop)
            self._armed_at = when

    def release(self) -> None:
        """The read ended (its timer stays armed for the next one)."""
        self.when = self._waiter = self._error = None

    def close(self) -> None:
        self.release()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        when, waiter, error = self.when, self._waiter, self._error
        if when is None or waiter is None or error is None or waiter.done():
            return  # no read in progress: the next one arms the timer again
        if loop.time() >= when - _RESOLUTION_S:
            self.release()
            waiter.set_exception(error())
            return
        self._timer = loop.call_at(when, self._fire, loop)
        self._armed_at = when
