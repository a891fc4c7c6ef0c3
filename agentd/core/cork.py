"""Direct writes held to the end of a synchronous stretch of work on the loop's thread.

A connection whose writer waits idle sends a publish's frames in the publishing step itself
(agentd/transport/connection.py `DIRECT_PUBLISH`). A model's network read brings several
deltas, each published on its own: the sampling loop `hold()`s around one read's events and
`release()`s after, so each connection's flush runs once, with all of them in one write (as
the woken writer task would have sent them), not one write per delta. Nothing awaits
between `hold` and `release`: no other task runs meanwhile, so nothing is delayed past the
step that made it. Per thread (each event loop has its own)."""

from __future__ import annotations

import threading
from collections.abc import Callable


class _Stretch(threading.local):
    """This thread's stretch: how deep `hold` is, and the flushes deferred to `release`."""

    def __init__(self) -> None:
        self.depth = 0
        self.pending: list[Callable[[], None]] = []


_local = _Stretch()


def hold_writes() -> None:
    _local.depth += 1


def release_writes() -> None:
    """The end of the stretch: every flush deferred during it runs now (once each)."""
    local = _local
    local.depth -= 1
    if not local.depth and local.pending:
        pending, local.pending = local.pending, []
        for flush in pending:
            flush()


def defer_flush(flush: Callable[[], None]) -> bool:
    """Whether `flush` was deferred to the current stretch's `release` (False: none held,
    flush now)."""
    local = _local
    if not local.depth:
        return False
    if flush not in local.pending:
        local.pending.append(flush)
    return True
