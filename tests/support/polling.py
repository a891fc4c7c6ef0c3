"""The one polling helper: wait for a real condition (a frame arrived, a row was stored, a
process died, a file was written). The bound only stops a hang; it is never a timing
assertion and never orders anything by itself."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_BOUND_S = 30.0
_INTERVAL_S = 0.01


async def until(
    predicate: Callable[[], object | Awaitable[object]], within: float = DEFAULT_BOUND_S, *, what: str = ""
) -> None:
    """Wait until `predicate()` (sync or async) is truthy; AssertionError after `within` s."""

    async def truthy() -> bool | None:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        return True if value else None

    await value_of(truthy, within, what=what)


async def value_of(
    check: Callable[[], T | Awaitable[T | None] | None], within: float = DEFAULT_BOUND_S, *, what: str = ""
) -> T:
    """Wait until `check()` (sync or async) returns something other than None; return it."""
    try:
        async with asyncio.timeout(within):
            while True:
                value = check()
                if inspect.isawaitable(value):
                    value = await value
                if value is not None:
                    return value  # type: ignore[return-value]
                await asyncio.sleep(_INTERVAL_S)
    except TimeoutError:
        raise AssertionError(f"timed out after {within} s waiting for {what or 'the condition'}") from None
