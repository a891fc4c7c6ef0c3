"""Stopping a replica service's background tasks: the live publisher's and the watch
announcer's `stop` are the same three steps, kept in one place."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any


async def cancel_and_wait(tasks: Sequence[asyncio.Task[Any]]) -> None:
    """Cancel every task first, then await each: none outlives the call, and one still
    unwinding does not delay the others' cancellation."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task


__all__ = ["cancel_and_wait"]
