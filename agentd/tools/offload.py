"""Blocking tool work off the event loop, on pools of its own, with a deadline.

Tools used to call `asyncio.to_thread`, i.e. the loop's default executor, which the server
also needs (e.g. `session/new` checks its cwd there). A tool stuck in blocking I/O could
exhaust that pool and hang every session. Tool work now runs on pools of its own, one for
short file operations and one for searches (which may run up to their own deadline and
must not make a quick read_file in another session wait). Each call has a deadline after
which the caller gets a `ToolError` and the worker is told to stop (`stop` is set); the
work itself never blocks unboundedly (non-regular files are refused, regex matching is
time-limited), so a worker comes free.

The deadline is one `call_later` handle that sets `stop` and cancels the awaited future
(`asyncio.wait_for` costs ~10 calls and an extra loop hop per call);
`AGENTD_OFFLOAD_DEADLINE=asyncio` keeps `asyncio.wait_for`.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from typing import Any, TypeVar

from agentd.tools.errors import ToolError

T = TypeVar("T")

DEFAULT_DEADLINE = 60.0  # seconds; file I/O and searches finish far sooner

LIBRARY_DEADLINE = os.environ.get("AGENTD_OFFLOAD_DEADLINE", "").strip().lower() == "asyncio"


class Pool(Enum):
    FILES = "files"  # read/write/edit/list: milliseconds each
    SEARCH = "search"  # glob/grep walks: up to the search deadline


_pools = {
    Pool.FILES: ThreadPoolExecutor(max_workers=8, thread_name_prefix="agentd-files"),
    Pool.SEARCH: ThreadPoolExecutor(max_workers=4, thread_name_prefix="agentd-search"),
}


def _expire(future: asyncio.Future[Any], stop: threading.Event, expired: list[bool]) -> None:
    if not future.done():
        expired.append(True)
        stop.set()
        future.cancel()


async def run_blocking(
    fn: Callable[[threading.Event], T],
    *,
    what: str,
    deadline: float = DEFAULT_DEADLINE,
    pool: Pool = Pool.FILES,
) -> T:
    """Run `fn(stop)` on the tool pool. Cancelling the call, or passing `deadline`, sets
    `stop`; `fn` checks it between units of work. A missed deadline is a `ToolError`."""
    stop = threading.Event()
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(_pools[pool], fn, stop)
    if LIBRARY_DEADLINE:
        try:
            return await asyncio.wait_for(future, deadline)
        except TimeoutError:
            stop.set()
            raise _missed(what, deadline) from None
        except asyncio.CancelledError:
            stop.set()
            raise
    expired: list[bool] = []
    handle = loop.call_later(deadline, _expire, future, stop, expired)
    try:
        return await future
    except asyncio.CancelledError:
        stop.set()
        # Our deadline cancelled the future, and no cancel of this task came with it (a task
        # being cancelled gets its CancelledError, as `wait_for` would give it).
        if expired and not _cancelling():
            raise _missed(what, deadline) from None
        raise
    finally:
        handle.cancel()


def _cancelling() -> int:
    task = asyncio.current_task()
    return task.cancelling() if task is not None else 0


def _missed(what: str, deadline: float) -> ToolError:
    return ToolError(f"{what} did not finish within {deadline:g} s and was stopped")
