"""Blocking tool work off the event loop, on pools of its own, with a deadline.

Tools used to call `asyncio.to_thread`, i.e. the loop's default executor, which the server
also needs (e.g. `session/new` checks its cwd there). A tool stuck in blocking I/O could
exhaust that pool and hang every session. Tool work now runs on pools of its own, one for
short file operations and one for searches (which may run up to their own deadline and
must not make a quick read_file in another session wait). Each call has a deadline after
which the caller gets a `ToolError` and the worker is told to stop (`stop` is set); the
work itself never blocks unboundedly (non-regular files are refused, regex matching is
time-limited), so a worker comes free.

The hop (issue 32): each pool is a few threads taking calls from one `SimpleQueue`, each
result handed back with one `call_soon_threadsafe`, the deadline one `call_later` — as the
store's writer thread hands its commits back. `run_in_executor` plus `wait_for` cost a
one-tool turn ~60 Python calls on the loop (the executor's work item, concurrent future
and its Condition, the idle semaphore, the chained asyncio future, wait_for's waiter and
callbacks). `FAST_HOP = False` takes the general way (a `ThreadPoolExecutor` and
`asyncio.wait_for`); both keep the same guarantees: the loop never blocks, at most
`max_workers` threads per pool, a call withdrawn before it started never runs, a started
one is told to stop (`stop`) when its caller is cancelled or its deadline passes.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from typing import Any, TypeVar

from agentd.tools.errors import ToolError

T = TypeVar("T")

DEFAULT_DEADLINE = 60.0  # seconds; file I/O and searches finish far sooner
FAST_HOP = True  # False: the general way (`run_in_executor` + `wait_for`), for comparison


class Pool(Enum):
    FILES = "files"  # read/write/edit/list: milliseconds each
    SEARCH = "search"  # glob/grep walks: up to the search deadline


_WORKERS = {Pool.FILES: 8, Pool.SEARCH: 4}

_pools = {  # the general way's
    Pool.FILES: ThreadPoolExecutor(max_workers=_WORKERS[Pool.FILES], thread_name_prefix="agentd-files"),
    Pool.SEARCH: ThreadPoolExecutor(max_workers=_WORKERS[Pool.SEARCH], thread_name_prefix="agentd-search"),
}


class HopPool:
    """Up to `max_workers` daemon threads (started as calls need them) taking
    `(fn, stop, done, loop)` from one queue; `fn(stop)`'s outcome goes back to `done` on its
    loop with one `call_soon_threadsafe`. A call whose `stop` is set before a worker takes
    it is dropped unrun (a cancelled caller withdraws it, as from an executor)."""

    def __init__(self, name: str, max_workers: int) -> None:
        self._name = name
        self._max = max_workers
        self._calls: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._lock = threading.Lock()  # guards the two counts (callers may be on several loops)
        self._threads = 0
        self._pending = 0  # calls queued or running

    @property
    def threads(self) -> int:
        return self._threads

    def submit(
        self, fn: Callable[[threading.Event], Any], stop: threading.Event, done: asyncio.Future[Any]
    ) -> None:
        with self._lock:
            self._pending += 1
            spawn = self._pending > self._threads and self._threads < self._max
            if spawn:
                self._threads += 1
                n = self._threads
        self._calls.put((fn, stop, done, done.get_loop()))
        if spawn:
            threading.Thread(target=self._serve, name=f"{self._name}_{n - 1}", daemon=True).start()

    def _serve(self) -> None:
        while True:
            fn, stop, done, loop = self._calls.get()
            outcome: tuple[Any, BaseException | None] = (None, None)
            if not stop.is_set():
                try:
                    outcome = (fn(stop), None)
                except BaseException as exc:  # handed to the caller, as an executor does
                    outcome = (None, exc)
            with self._lock:
                self._pending -= 1
            try:
                loop.call_soon_threadsafe(_settle, done, *outcome)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass


def _settle(done: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if done.done():  # cancelled, or past its deadline
        return
    if exc is not None:
        done.set_exception(exc)
    else:
        done.set_result(result)


def _expire(done: asyncio.Future[Any], stop: threading.Event, what: str, deadline: float) -> None:
    if done.done():
        return
    stop.set()
    done.set_exception(ToolError(f"{what} did not finish within {deadline:g} s and was stopped"))


_hops = {pool: HopPool(f"agentd-{pool.value}", n) for pool, n in _WORKERS.items()}


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
    if FAST_HOP:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()
        _hops[pool].submit(fn, stop, done)
        timer = loop.call_later(deadline, _expire, done, stop, what, deadline)
        try:
            return await done
        except asyncio.CancelledError:
            stop.set()
            raise
        finally:
            timer.cancel()
    future = asyncio.get_running_loop().run_in_executor(_pools[pool], fn, stop)
    try:
        return await asyncio.wait_for(future, deadline)
    except TimeoutError:
        stop.set()
        raise ToolError(f"{what} did not finish within {deadline:g} s and was stopped") from None
    except asyncio.CancelledError:
        stop.set()
        raise
