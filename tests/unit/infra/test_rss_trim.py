"""The trimmer's decision (agentd/infra/rss_trim.py): trim on growth of GROWTH_TRIGGER or more since
the mark, never on a shrink or a smaller change; and after sessions were unloaded (their
freed state shows only once trimmed), at most every RELEASE_TRIM_EVERY_S; either only once the
server has done no work for a while (its growth mid-load is memory in use, and the collection
would stall the loop mid-turn), or after BUSY_WAIT_MAX_S under a load that never ends."""

from __future__ import annotations

import asyncio
import platform
import subprocess
import sys
from collections.abc import Awaitable, Callable

import pytest

from agentd.infra.rss_trim import BUSY_WAIT_MAX_S, GROWTH_TRIGGER, RELEASE_TRIM_EVERY_S, may_trim, should_trim

MIB = 2**20
BASE = 100 * MIB


@pytest.mark.parametrize(
    ("last", "now", "trim"),
    [
        (BASE, BASE, False),  # unchanged
        (BASE, BASE + GROWTH_TRIGGER - 1, False),  # grew, but not enough
        (BASE, BASE + GROWTH_TRIGGER, True),  # grew by the trigger exactly
        (BASE, BASE + 10 * GROWTH_TRIGGER, True),  # a flood
        (BASE, BASE - 1, False),  # a wobble down
        (BASE, BASE - 10 * GROWTH_TRIGGER, False),  # a big shrink: memory already went back
        (0, GROWTH_TRIGGER, True),  # /proc unreadable at the start: first real reading
        (BASE, 0, False),  # /proc unreadable now
    ],
)
def test_should_trim(last: int, now: int, trim: bool) -> None:
    assert should_trim(last, now) is trim


@pytest.mark.parametrize(
    ("released", "since_trim_s", "trim"),
    [
        (0, 10 * RELEASE_TRIM_EVERY_S, False),  # nothing unloaded: no reason
        (1, RELEASE_TRIM_EVERY_S, True),  # a session unloaded, the last trim long enough ago
        (100, RELEASE_TRIM_EVERY_S - 1, False),  # a load's end, but a trim just ran: next tick
        (100, 10 * RELEASE_TRIM_EVERY_S, True),
    ],
)
def test_should_trim_after_sessions_were_unloaded(released: int, since_trim_s: float, trim: bool) -> None:
    assert should_trim(BASE, BASE, released=released, since_trim_s=since_trim_s) is trim


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim and mallopt are glibc's")
def test_the_trimmer_finds_glibc_without_ctypes_util() -> None:
    """libc's functions come from the process's own symbols (`CDLL(None)`), not
    `ctypes.util.find_library` (a child `ldconfig -p` and more imports at every start)."""
    code = (
        "import sys, agentd.infra.rss_trim as r\n"
        "print(r._TRIM is not None, r.limit_arenas(), 'ctypes.util' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["True", "True", "False"]


async def test_a_wake_after_an_eviction_wave_trims_at_once_not_at_the_next_tick(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The eviction sweep sets `wake` when it unloaded sessions: the trimmer asks then, not
    `interval_s` later (issue 32 item 3: the memory is back within the minute after a load)."""
    import asyncio

    from agentd.infra import rss_trim

    loop = asyncio.get_running_loop()
    trimmed = asyncio.Event()
    monkeypatch.setattr(rss_trim, "_TRIM", lambda _pad: loop.call_soon_threadsafe(trimmed.set))
    monkeypatch.setattr(rss_trim, "RELEASE_TRIM_EVERY_S", 0.0)  # no rate limit for this test
    monkeypatch.setattr(rss_trim, "rss_bytes", lambda: BASE)  # no growth: only the unloads ask
    unloaded, wake = [0], asyncio.Event()
    task = asyncio.create_task(rss_trim.run_trimmer(3600.0, lambda: unloaded[0], wake))
    try:
        await asyncio.sleep(0)  # the trimmer reads its marks and waits
        unloaded[0] = 3
        wake.set()
        # (a bound against a hang, not a timed assertion: the tick is an hour away)
        await asyncio.wait_for(trimmed.wait(), 30)
        assert not wake.is_set()  # cleared for the next wave
    finally:
        task.cancel()


async def test_without_unloads_a_wake_does_not_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from agentd.infra import rss_trim

    trims: list[int] = []
    monkeypatch.setattr(rss_trim, "_TRIM", trims.append)
    monkeypatch.setattr(rss_trim, "RELEASE_TRIM_EVERY_S", 0.0)
    monkeypatch.setattr(rss_trim, "rss_bytes", lambda: BASE)
    wake = asyncio.Event()
    task = asyncio.create_task(rss_trim.run_trimmer(3600.0, lambda: 0, wake))
    try:
        await asyncio.sleep(0)
        wake.set()
        for _ in range(5):  # the woken trimmer runs its check and waits again
            await asyncio.sleep(0)
        assert not wake.is_set() and trims == []
    finally:
        task.cancel()


async def _released_then_trimmed(
    monkeypatch: pytest.MonkeyPatch, *, idle: bool, rate_limit_s: float, unloads: int = 2
) -> list[str]:
    """What the trimmer does when an eviction wave wakes it: `release()` answering `idle`
    (the app's: the request pool let go once no session is loaded)."""
    import asyncio

    from agentd.infra import rss_trim

    loop = asyncio.get_running_loop()
    order: list[str] = []
    asked = asyncio.Event()

    async def release() -> bool:
        order.append("release")
        loop.call_soon(asked.set)
        return idle

    # The collection comes before the trimmer next yields (the trim itself then runs in a
    # thread): once `asked` wakes this test, whether it collected is known.
    monkeypatch.setattr(rss_trim.gc, "collect", lambda: order.append("collect"))
    monkeypatch.setattr(rss_trim, "_TRIM", None)
    monkeypatch.setattr(rss_trim, "RELEASE_TRIM_EVERY_S", rate_limit_s)
    monkeypatch.setattr(rss_trim, "rss_bytes", lambda: BASE)  # no growth: only the unloads ask
    await _unloads_wake_the_trimmer(unloads, release, asked)
    return order


async def test_the_last_session_unloaded_releases_the_pools_then_trims_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Within the rate limit for unloads, going idle trims all the same, and after the
    release, so what it let go is trimmed too (issue 32 item 3)."""
    assert await _released_then_trimmed(monkeypatch, idle=True, rate_limit_s=3600.0) == ["release", "collect"]


async def test_unloads_that_leave_sessions_loaded_wait_for_the_rate_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert await _released_then_trimmed(monkeypatch, idle=False, rate_limit_s=3600.0) == ["release"]


async def test_a_trim_for_growth_alone_asks_no_release(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from agentd.infra import rss_trim

    loop = asyncio.get_running_loop()
    order: list[str] = []
    trimmed = asyncio.Event()
    sizes = iter([BASE, BASE + rss_trim.GROWTH_TRIGGER])

    def trim(_pad: int) -> None:
        order.append("trim")
        loop.call_soon_threadsafe(trimmed.set)

    async def release() -> bool:
        order.append("release")
        return True

    monkeypatch.setattr(rss_trim, "_TRIM", trim)
    monkeypatch.setattr(rss_trim, "rss_bytes", lambda: next(sizes, BASE))
    wake = asyncio.Event()
    task = asyncio.create_task(rss_trim.run_trimmer(3600.0, lambda: 0, wake, release))
    try:
        await asyncio.sleep(0)
        wake.set()  # (a tick: the growth is what asks)
        await asyncio.wait_for(trimmed.wait(), 30)  # (a bound against a hang)
        assert order == ["trim"]
    finally:
        task.cancel()


@pytest.mark.parametrize("apart", [True, False], ids=["own-thread", "default-executor"])
async def test_the_trims_thread_ends_with_it_unless_switched_off(
    monkeypatch: pytest.MonkeyPatch, apart: bool
) -> None:
    """The trim runs on a thread of its own that ends after it: a default-executor thread
    started after a load's idle release stays, its objects keeping the load's allocator
    arenas resident (issue 32 item 3). `TRIM_APART` off: the default executor, as before."""
    import asyncio
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from agentd.infra import rss_trim

    monkeypatch.setattr(rss_trim, "TRIM_APART", apart)
    loop = asyncio.get_running_loop()
    loop.set_default_executor(default := ThreadPoolExecutor(thread_name_prefix="test-default"))
    ran_on: list[threading.Thread] = []
    try:
        await rss_trim._trim_apart(lambda _pad: ran_on.append(threading.current_thread()))
        (thread,) = ran_on
        if apart:
            assert thread.name.startswith("memory-trim")
            await asyncio.to_thread(thread.join)
            assert not thread.is_alive()
        else:
            assert thread.name.startswith("test-default") and thread.is_alive()
    finally:
        default.shutdown(wait=False)


async def _going_idle_under(
    monkeypatch: pytest.MonkeyPatch, allocator: str, *, idle: bool = True
) -> list[str]:
    """The trimmer's steps when the last session goes (`release()` says idle) while new
    objects come from `allocator`: under malloc, the loop's free lists are drained between
    two trims (agentd/infra/idle_release.py); the type cache is emptied before the first.
    Not idle: a plain trim."""
    import asyncio

    from agentd.infra import rss_trim

    order: list[str] = []
    done = asyncio.Event()
    readings = iter([BASE, BASE])  # the start and the tick; the next reading ends the round

    def rss() -> int:
        value = next(readings, None)
        if value is None:
            done.set()
            return BASE
        return value

    async def trim_apart(_fn: object) -> None:
        order.append("trim")

    async def release() -> bool:
        return idle

    monkeypatch.setattr(rss_trim.gc, "collect", lambda: None)
    monkeypatch.setattr(rss_trim, "_TRIM", lambda _pad: 0)
    monkeypatch.setattr(rss_trim, "_trim_apart", trim_apart)
    monkeypatch.setattr(rss_trim, "allocator_in_use", lambda: allocator)

    async def drain(_loop: object) -> bool:
        order.append("drain")
        return True

    monkeypatch.setattr(rss_trim, "drain_free_lists", drain)
    monkeypatch.setattr(rss_trim, "clear_type_cache", lambda: order.append("type cache") is None)
    monkeypatch.setattr(rss_trim, "RELEASE_TRIM_EVERY_S", 0.0)
    monkeypatch.setattr(rss_trim, "rss_bytes", rss)
    await _unloads_wake_the_trimmer(1, release, done)
    return order


async def test_going_idle_under_malloc_drains_the_free_lists_between_two_trims(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert await _going_idle_under(monkeypatch, "malloc") == ["type cache", "trim", "drain", "trim"]


async def test_under_pymalloc_or_not_idle_no_drain(monkeypatch: pytest.MonkeyPatch) -> None:
    assert await _going_idle_under(monkeypatch, "pymalloc") == ["type cache", "trim"]
    assert await _going_idle_under(monkeypatch, "malloc", idle=False) == ["trim"]


async def _unloads_wake_the_trimmer(
    unloads: int, release: Callable[[], Awaitable[bool]], until: asyncio.Event
) -> None:
    """A trimmer (its tick an hour away) told of `unloads` sessions unloaded, run until
    `until` is set, then stopped."""
    from agentd.infra import rss_trim

    unloaded, wake = [0], asyncio.Event()
    task = asyncio.create_task(rss_trim.run_trimmer(3600.0, lambda: unloaded[0], wake, release))
    try:
        await asyncio.sleep(0)
        unloaded[0] = unloads
        wake.set()
        await asyncio.wait_for(until.wait(), 30)  # (a bound against a hang: the tick is an hour away)
    finally:
        task.cancel()


@pytest.mark.parametrize(
    ("quiet_for_s", "waited_s", "trim"),
    [
        (10.0, 0.0, True),  # quiet for the span asked
        (None, 0.0, False),  # worked since the last look
        (9.9, 0.0, False),  # work within the span: the load goes on
        (0.0, BUSY_WAIT_MAX_S - 1, False),
        (0.0, BUSY_WAIT_MAX_S, True),  # a load that never ends: one trim this often
    ],
)
def test_may_trim(quiet_for_s: float | None, waited_s: float, trim: bool) -> None:
    assert may_trim(quiet_for_s=quiet_for_s, quiet_s=10.0, waited_s=waited_s) is trim


async def _looks_under_work(
    monkeypatch: pytest.MonkeyPatch, counts: list[int], *, quiet_s: float, idle: bool | None = None
) -> list[list[str]]:
    """A trimmer (its tick an hour away) woken once per entry of `counts`, the activity count
    it reads at that look, the process grown by GROWTH_TRIGGER since it started (and each
    look after an unload when `idle` is not None: `release()` answering it): what it did at
    each look."""
    from agentd.infra import rss_trim

    order: list[str] = []
    looked = asyncio.Event()
    current = [0]

    def activity() -> int:
        looked.set()  # the decision follows before the trimmer waits again
        return current[0]

    async def trim_apart(_fn: object) -> None:
        order.append("trim")

    async def release() -> bool:
        assert idle is not None
        return idle

    sizes = iter([BASE])  # the start; every reading after it has grown
    monkeypatch.setattr(rss_trim.gc, "collect", lambda: order.append("collect"))
    monkeypatch.setattr(rss_trim, "_TRIM", lambda _pad: 0)
    monkeypatch.setattr(rss_trim, "_trim_apart", trim_apart)
    monkeypatch.setattr(rss_trim, "allocator_in_use", lambda: "pymalloc")
    monkeypatch.setattr(rss_trim, "rss_bytes", lambda: next(sizes, BASE + rss_trim.GROWTH_TRIGGER))
    unloaded, wake = [0], asyncio.Event()
    task = asyncio.create_task(
        rss_trim.run_trimmer(
            3600.0, lambda: unloaded[0], wake, None if idle is None else release, activity, quiet_s=quiet_s
        )
    )
    done: list[list[str]] = []
    try:
        await asyncio.wait_for(looked.wait(), 30)  # its first reading (a bound against a hang)
        for count in counts:
            looked.clear()
            current[0] = count
            unloaded[0] += idle is not None
            wake.set()
            await asyncio.wait_for(looked.wait(), 30)
            done.append(order.copy())
            order.clear()
    finally:
        task.cancel()
    return done


async def test_a_load_that_goes_on_is_not_trimmed_for_its_growth(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commits at every look: the growth is the load's memory in use, no collection mid-load."""
    assert await _looks_under_work(monkeypatch, [1, 2, 3, 4], quiet_s=0.0) == [[], [], [], []]


async def test_the_growth_is_trimmed_once_the_load_went_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    assert await _looks_under_work(monkeypatch, [1, 2, 2, 2], quiet_s=0.0) == [
        [],
        [],
        ["collect", "trim"],
        [],
    ]


async def test_quiet_means_quiet_for_the_whole_span(monkeypatch: pytest.MonkeyPatch) -> None:
    """A look soon after one that saw work (an eviction sweep's wake mid-load) is no quiet."""
    assert await _looks_under_work(monkeypatch, [1, 1, 1], quiet_s=3600.0) == [[], [], []]


async def test_a_load_that_never_ends_is_trimmed_after_the_longest_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentd.infra import rss_trim

    monkeypatch.setattr(rss_trim, "BUSY_WAIT_MAX_S", 0.0)
    assert await _looks_under_work(monkeypatch, [1, 2], quiet_s=3600.0) == [["collect", "trim"], []]


async def test_unloads_under_a_load_wait_too_but_going_idle_trims_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sessions unloaded while others work: no trim (nor its collection) until quiet; the last
    session gone (`release()` says idle) trims whatever the count did."""
    from agentd.infra import rss_trim

    monkeypatch.setattr(rss_trim, "RELEASE_TRIM_EVERY_S", 0.0)
    assert await _looks_under_work(monkeypatch, [1, 2], quiet_s=3600.0, idle=False) == [[], []]
    assert await _looks_under_work(monkeypatch, [1, 2], quiet_s=3600.0, idle=True) == [
        ["collect", "trim"],
        ["collect", "trim"],
    ]
