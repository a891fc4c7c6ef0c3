"""What the event loop keeps from a load, let go when the server goes idle (issue 32 item 3).

CPython's small-object allocator returns a 1 MiB arena to the OS only once every block in
it is free, so after a load a few hundred survivors allocated during it keep the load's
arenas resident (tracemalloc started after the first turn, read 60 s after a load of 100
sessions: bench/RESULTS.md "Issue 32, hmem"). One kind belongs to the loop:

- the default executor's threads (`asyncio.to_thread`: a session's `cwd` check, the
  trimmer's own `malloc_trim`), started mid-load as concurrent sessions needed them, each
  with its `Thread`, locks, weak references and a thread stack; an executor never ends its
  threads. `DefaultExecutor` installs one of ours at start-up (no thread until used) and
  `renew()` swaps in a fresh one, the old one's threads ending once their work is done.

It runs once per idle period (the trimmer's release hook, agentd/app.py), never per turn.
`RELEASE` off: the executor is kept (the behaviour before; tests run both).

- the free lists of uvloop's timer handles and asyncio's future iterators (up to 250 and
  255 freed objects kept for reuse, the load's last, scattered over its memory; a
  collection does not empty them). `drain_free_lists()` refills them with fresh objects
  and frees the load's. Under pymalloc that was no help (the refill landed in the load's
  half-empty pools: 56-57 arenas either way, hmem); with new objects from malloc
  (small_alloc.py) and right after a trim, the refill comes from memory just consolidated
  and the load's go back for the next trim (bench/RESULTS.md "Issue 32, hmalloc").
  uvloop's plain `Handle`s (`call_soon`, up to 250 kept) too: the loop's ready queue frees
  the cancelled ones oldest first (the load's back on the list), so the drain holds them
  through two loop passes and frees them itself, newest first (bench/RESULTS.md "Issue 32,
  hmods").

- the interpreter's type attribute cache (CPython 3.11: 4096 entries, each holding a
  strong reference to the attribute name it was looked up by): names built at run time
  (`datetime.timetuple`'s "dst", `isoformat`'s "utcoffset", the io stack's, uvicorn's date
  header's) stay alive in it, a few dozen bytes each on the load's pages, until their slot
  is reused. `clear_type_cache()` drops them; the cache refills on the next look-ups.
"""

from __future__ import annotations

import asyncio
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

RELEASE = True  # module switch: False keeps the loop's executor and its threads
DRAIN = True  # module switch: False leaves the free lists as the load left them
HANDLES = True  # module switch: False leaves uvloop's plain handles (`call_soon`) out of the drain
TYPE_CACHE = True  # module switch: False keeps the type cache (and the names it holds)
# More than either free list holds (uvloop's 250, asyncio's 255): the first objects made
# come off the list (the load's), the rest are fresh.
_REFILL = 512


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


def _never() -> None:  # a timer's callback; the timers are cancelled unrun
    pass


async def drain_free_lists(loop: asyncio.AbstractEventLoop) -> bool:
    """Swap the load's objects on the loop's free lists for fresh ones (the caller trims
    after): the fresh ones are freed first and fill the lists, the load's then go back to
    the allocator. Whether it ran."""
    if not DRAIN:
        return False
    timers = [loop.call_at(loop.time() + 3600.0, _never) for _ in range(_REFILL)]
    handles = [loop.call_soon(_never) for _ in range(_REFILL)] if HANDLES else []
    for handle in (*timers, *handles):
        handle.cancel()
    future = loop.create_future()
    iterators = [future.__await__() for _ in range(_REFILL)]
    # Loop passes: the ready queue lets go of the cancelled handles (and uvloop closes the
    # timers); until then ours are not the last references, and the queue would free them
    # oldest first.
    for _ in range(2):
        await asyncio.sleep(0)
    _free_newest_first(timers)
    _free_newest_first(handles)
    _free_newest_first(iterators)
    future.cancel()
    return True


def _free_newest_first(kept: list[Any]) -> None:
    while kept:
        kept.pop()  # the last made (fresh) first


def clear_type_cache() -> bool:
    """Empty the interpreter's type attribute cache (the caller trims after). Whether it did."""
    if not TYPE_CACHE:
        return False
    sys._clear_type_cache()
    return True
