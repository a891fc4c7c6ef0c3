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

Not done here, measured: uvloop's handle free lists and asyncio's future-iterator free
list (up to 250/255 freed objects each, the load's last, scattered) can be emptied of
the load's objects, but only by refilling them with fresh ones allocated at that moment,
which land in the load's half-empty pools just the same: 56-57 arenas after either way.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

RELEASE = True  # module switch: False keeps the loop's executor and its threads


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
