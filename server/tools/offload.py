"""Blocking tool work off the event loop, on a pool of its own, with a deadline.

Tools used to call `asyncio.to_thread`, i.e. the loop's default executor, which the server
also needs (e.g. `session/new` checks its cwd there). A tool stuck in blocking I/O could
exhaust that pool and hang every session. Tool work now runs on a separate, bounded pool;
each call has a deadline after which the caller gets a `ToolError` and the worker is told
to stop (`stop` is set) — the work itself is written so it never blocks unboundedly
(non-regular files are refused, regex matching is time-limited), so a worker comes free.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from server.tools.base import ToolError

T = TypeVar("T")

POOL_WORKERS = 8
DEFAULT_DEADLINE = 60.0  # seconds; file I/O and searches finish far sooner

_pool = ThreadPoolExecutor(max_workers=POOL_WORKERS, thread_name_prefix="agentd-tool")


async def run_blocking(
    fn: Callable[[threading.Event], T], *, what: str, deadline: float = DEFAULT_DEADLINE
) -> T:
    """Run `fn(stop)` on the tool pool. Cancelling the call, or passing `deadline`, sets
    `stop`; `fn` checks it between units of work. A missed deadline is a `ToolError`."""
    stop = threading.Event()
    future = asyncio.get_running_loop().run_in_executor(_pool, fn, stop)
    try:
        return await asyncio.wait_for(future, deadline)
    except TimeoutError:
        stop.set()
        raise ToolError(f"{what} did not finish within {deadline:g} s and was stopped") from None
    except asyncio.CancelledError:
        stop.set()
        raise
