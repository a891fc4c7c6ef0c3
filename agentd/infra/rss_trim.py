"""Hand memory back to the operating system after a burst (issue 9, item 7).

CPython frees large objects with `free()`, but glibc keeps freed heap pages mapped unless
asked (`malloc_trim`), so after a flood of large prompts or replays a long-lived server
would stay at its peak size. A low-priority background task asks now and then — after a
full garbage collection, so cycles holding big buffers go first — when the resident size
grew since the last time it asked (or since its lowest reading after that), and when
sessions were unloaded since (`released`: an eviction after a load frees its sessions'
state, which no growth would ever reveal: freed memory does not show until trimmed).

Not while the server works, though: during a load its growth is memory in use (the loaded
sessions, their histories), which a trim cannot give back, and the full collection before
it stalls the event loop mid-turn for a whole big heap (90 ms for the 114,000 objects of
300 loaded sessions; issue 32 item 1: 2.5 % of the loop's samples over a steady run of
trivial turns). So a trim that is due waits until the server has been quiet (no commit)
for a tick, or for BUSY_WAIT_MAX_S at most under a load that never ends.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import logging
from collections.abc import Awaitable, Callable

from agentd.infra.idle_release import clear_type_cache, drain_free_lists
from agentd.infra.small_alloc import allocator_in_use

log = logging.getLogger(__name__)

GROWTH_TRIGGER = 16 * 2**20  # bytes of growth since the last trim worth a new one
# Sessions unloaded since the last trim: a trim at most this often for them (each is a full
# collection; a steady trickle of evictions must not turn into a collection every tick).
RELEASE_TRIM_EVERY_S = 30.0
# A trim that is due waits for the server to go quiet (no commit for `quiet_s`), but no
# longer than this under a load that never stops: at most one full collection this often.
BUSY_WAIT_MAX_S = 300.0
M_ARENA_MAX = -8  # glibc's mallopt parameter
# glibc gives each thread that allocates its own arena (up to 8 per core); the database
# driver's and the tools' threads then each keep their own high-water mark of freed memory.
# Two arenas measured: after a flood of 1 MB prompts, 164 MiB resident instead of 436.
ARENAS = 2
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
# Blocks this large (prompts, replays, tool outputs) are mmapped, so `free()` returns them
# to the OS at once. glibc's default threshold is dynamic: after the first large block is
# freed it rises to that size and later large blocks land in the heap, where freed pages
# stay. Fixed at 128 KiB: after a flood of 1 MB prompts, 110 MiB resident instead of 150.
MMAP_THRESHOLD = 128 * 1024


def _libc() -> ctypes.CDLL | None:
    """The process's own symbols, the C library's among them: no `ctypes.util.find_library`
    (it runs `ldconfig -p` in a child and imports more at every start; issue 32 item 3)."""
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def _libc_trim() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    libc = _libc()
    if libc is None:
        return None
    try:
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to do
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM = _libc_trim()


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas and fix its mmap threshold (call early, before worker
    threads start)."""
    libc = _libc()
    if libc is None:
        return False
    try:
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, arenas)) and bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096
    except (OSError, ValueError, IndexError):
        return 0


def trim() -> None:
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)


def should_trim(last: int, now: int, *, released: int = 0, since_trim_s: float = 0.0) -> bool:
    """Whether to trim: the resident size `now` grew by GROWTH_TRIGGER from `last` (the size
    after the last trim, or the lowest reading since), or `released` sessions were unloaded
    since the last trim, `since_trim_s` ago, and it was RELEASE_TRIM_EVERY_S ago or more."""
    return now - last >= GROWTH_TRIGGER or (released > 0 and since_trim_s >= RELEASE_TRIM_EVERY_S)


def may_trim(*, quiet_for_s: float | None, quiet_s: float, waited_s: float) -> bool:
    """Whether a trim that is due may run now: the server did no work (no commit) for the
    last `quiet_for_s` seconds (None: it worked since the last look), `quiet_s` or more; or
    the trim has waited `waited_s` for that, BUSY_WAIT_MAX_S or more."""
    return (quiet_for_s is not None and quiet_for_s >= quiet_s) or waited_s >= BUSY_WAIT_MAX_S


class _Quiet:
    """How long the server has done no work, as told by `activity()` (a count that moves
    while it works: the event writer's commits) read at each look: None when it moved since
    the last look, else the time since the look that saw it move (the work may have been
    anywhere in the span before that look)."""

    def __init__(self, activity: Callable[[], int] | None, at: float) -> None:
        self._activity = activity
        self._seen = activity() if activity is not None else 0
        self._since = at

    def for_s(self, at: float) -> float | None:
        if self._activity is None:
            return float("inf")  # nothing to tell: always quiet (the behaviour before)
        seen = self._activity()
        if seen != self._seen:
            self._seen, self._since = seen, at
            return None
        return at - self._since


async def run_trimmer(
    interval_s: float,
    unloaded: Callable[[], int] | None = None,
    wake: asyncio.Event | None = None,
    release: Callable[[], Awaitable[bool]] | None = None,
    activity: Callable[[], int] | None = None,
    quiet_s: float | None = None,
) -> None:
    """Every `interval_s`: if the process grew by GROWTH_TRIGGER since the last trim, or
    sessions were unloaded since (`unloaded()`: how many ever were), collect and trim (off
    the event loop: a big heap takes a moment). `wake` set (an eviction sweep unloaded
    sessions) asks at once rather than at the next tick: the memory of a wave of evicted
    sessions goes back within the minute after a load (issue 32 item 3). `release()`, asked
    after sessions were unloaded, lets go of what the load kept pooled (connections) once
    the last session is gone and says whether it did: that trims at once, whatever the rate
    limit (a wave is often unloaded over two sweeps: the last one's trim came 30 s late).
    `activity()`, a count that moves while the server works (the event writer's commits):
    a trim for growth or unloads waits until it has not moved for `quiet_s` (default
    `interval_s`: a tick; a load's end is trimmed within two ticks), BUSY_WAIT_MAX_S at most."""
    if interval_s <= 0:
        return
    loop = asyncio.get_running_loop()
    last = rss_bytes()
    count = unloaded or (lambda: 0)
    unloaded_at_trim, trimmed_at = count(), loop.time()
    unloaded_at_release = unloaded_at_trim
    quiet = _Quiet(activity, trimmed_at)
    quiet_s = interval_s if quiet_s is None else quiet_s
    due_at: float | None = None  # when a trim waiting for the server to go quiet came due
    while True:
        await _tick(interval_s, wake)
        now = rss_bytes()
        unloads = count()
        released = unloads - unloaded_at_trim
        went_idle = False
        if release is not None and unloads != unloaded_at_release:
            unloaded_at_release = unloads
            try:
                went_idle = await release()
            except Exception:  # never let housekeeping take the server down
                log.exception("releasing idle connections failed")
        at = loop.time()
        quiet_for_s = quiet.for_s(at)
        if not went_idle:
            if not should_trim(last, now, released=released, since_trim_s=at - trimmed_at):
                # A shrink lowers the mark, so later growth is measured from the low point. A
                # shrink itself is no reason to trim: measured after a flood, trims on shrinks
                # gave back 2-5 MiB more at best, and on a big heap each costs a full collection.
                last = min(last, now)
                due_at = None
                continue
            if due_at is None:
                due_at = at
            if not may_trim(quiet_for_s=quiet_for_s, quiet_s=quiet_s, waited_s=at - due_at):
                continue  # the server works: its growth is in use; the collection would stall it
        due_at = None
        try:
            if went_idle:
                clear_type_cache()  # the load's run-time attribute names it held
            gc.collect()
            if _TRIM is not None:
                await _trim_apart(_TRIM)
                if went_idle and allocator_in_use() == "malloc" and await drain_free_lists(loop):
                    await _trim_apart(_TRIM)  # the load's free-list objects, just let go
        except Exception:  # never let housekeeping take the server down
            log.exception("memory trim failed")
        last = rss_bytes()
        unloaded_at_trim, trimmed_at = count(), loop.time()


# The trim on a thread of its own that ends with it (False: the loop's default executor,
# whose thread then stays, as before; tests run both).
TRIM_APART = True


async def _trim_apart(trim_fn: Callable[[int], object]) -> None:
    """`trim_fn(0)` off the event loop. Not on the default executor: after a load's idle
    release (agentd/infra/idle_release.py) that starts a thread which stays for the server's
    life, its objects allocated in the load's half-empty allocator pools, which they then
    keep resident (issue 32 item 3). A trim is rare (growth or unloads, rate-limited)."""
    if not TRIM_APART:
        await asyncio.to_thread(trim_fn, 0)
        return
    from concurrent.futures import ThreadPoolExecutor  # (loaded by the loop already)

    executor = ThreadPoolExecutor(1, "memory-trim")
    try:
        await asyncio.get_running_loop().run_in_executor(executor, trim_fn, 0)
    finally:
        executor.shutdown(wait=False)


async def _tick(interval_s: float, wake: asyncio.Event | None) -> None:
    """`interval_s`, or less if `wake` is set meanwhile (it is cleared)."""
    if wake is None:
        await asyncio.sleep(interval_s)
        return
    try:
        await asyncio.wait_for(wake.wait(), interval_s)
    except TimeoutError:
        pass
    wake.clear()
