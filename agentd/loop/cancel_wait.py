"""Waiting for "this, or the turn's cancel" without a task per wait (issue 32).

`asyncio.Event.wait` puts a future on the event's `_waiters` and `Event.set` sets every
future there; `waiters_of` hands out that deque so a wait can put its own future on it —
one future completed by whichever comes first (the awaited thing's end, `cancel.set()`, a
deadline) — instead of a second task running `cancel.wait()` and `asyncio.wait` over both.

`run_cancellable` goes further by default: the operation runs in the caller's task and
`cancel.set()` cancels that task (`agentd.loop.context`). `AGENTD_CANCEL_WAIT=task` runs it
in a task of its own with the one-future wait; `AGENTD_CANCEL_WAIT=asyncio` (or an event
without that deque) takes the library path: `asyncio.wait` on a task of `cancel.wait()`.
"""

from __future__ import annotations

import asyncio
import collections
import os
from typing import Any

_MODE = os.environ.get("AGENTD_CANCEL_WAIT", "").strip().lower()
LIBRARY_CANCEL_WAIT = _MODE == "asyncio"
# The operation of `run_cancellable` awaited in the caller's task (no task of its own).
INLINE_CANCEL_WAIT = _MODE not in ("asyncio", "task")


def waiters_of(event: asyncio.Event) -> collections.deque[asyncio.Future[Any]] | None:
    """The event's waiters (to put a future on, then take it off), or None: the library path."""
    if LIBRARY_CANCEL_WAIT:
        return None
    waiters = getattr(event, "_waiters", None)
    return waiters if isinstance(waiters, collections.deque) else None
