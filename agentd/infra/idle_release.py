"""What the event loop keeps from a load, let go when the server goes idle (issue 32 item 3).

CPython's small-object allocator returns a 1 MiB arena to the OS only once every block in
it is free, so after a load a few hundred survivors allocated during it keep the load's
arenas resident (tracemalloc started after the first turn, read 60 s after a load of 100
sessions: bench/RESULTS.md "Issue 32, hmem"). Two of those kinds belong to the loop:

- the default executor's threads (`asyncio.to_thread`: a session's `cwd` check, the
  trimmer's own `malloc_trim`), started mid-load as concurrent sessions needed them, each
  with its `Thread`, locks, weak references and a thread stack; an executor never ends its
  threads. `DefaultExecutor` installs one of ours at start-up (no thread until used) and
  `renew()` swaps in a fresh one, the old one's threads ending once their work is done.
- uvloop's callback and timer handles: Cython keeps up to 250 freed objects of each type on
  a free list for reuse, so the handles the load's last callbacks and timeouts used stay
  allocated, scattered through its arenas. `drop_handle_free_lists()` takes every one off
  the list (allocating fresh ones), then frees the fresh ones first: they refill the list
  while the load's go back to the allocator. (asyncio's own loop keeps no such list: a
  no-op there, the general path.)

Both run once per idle period (the trimmer's release hook, agentd/app.py), never per turn.
`RELEASE` off: neither runs (the behaviour before; tests run both).
"""

from __future__ import annotations

import asyncio
import contextvars
from concurrent.futures import ThreadPoolExecutor
from typing import Any

RELEASE = True  # module switch: False keeps the loop's executor threads and free lists

# uvloop's `DEFAULT_FREELIST_SIZE` (its includes/consts.pxi): more than a free list holds.
FREE_LIST = 250


class DefaultExecutor:
    """The loop's default executor, ours so that it can be renewed when the server is idle
    (the loop does not say which executor it has)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, prefix: str = "agentd-worker") -> None:
        self._loop = loop
        self._prefix = prefix
        self.current = self._install()
        self.renewals = 0  # for tests

    def _install(self) -> ThreadPoolExecutor:
        executor = ThreadPoolExecutor(thread_name_prefix=self._prefix)  # no thread until used
        self._loop.set_default_executor(executor)
        return executor

    def renew(self) -> None:
        """A fresh executor for the next work; the old one's threads end when theirs is done
        (what was queued there still runs)."""
        if not RELEASE:
            return
        old, self.current = self.current, self._install()
        old.shutdown(wait=False)
        self.renewals += 1

    def close(self) -> None:
        self.current.shutdown(wait=False)


def _nothing() -> None:
    pass


async def drop_handle_free_lists(n: int = 2 * FREE_LIST) -> None:
    """Free the callback and timer handles a uvloop free list holds (see the module's doc)."""
    if not RELEASE:
        return
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    # The first FREE_LIST of each come off the free list (the load's), the rest are new.
    soon: list[Any] = [loop.call_soon(_nothing, context=ctx) for _ in range(n)]
    later: list[Any] = [loop.call_later(3600.0, _nothing, context=ctx) for _ in range(n)]
    for handle in later:
        handle.cancel()
    await asyncio.sleep(0)  # the loop runs the callbacks and drops its references
    await asyncio.sleep(0)
    # The new ones freed first refill the lists; the load's then go back to the allocator.
    del soon[FREE_LIST:], later[FREE_LIST:]
    soon.clear()
    later.clear()
