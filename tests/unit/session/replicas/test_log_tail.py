"""A log tail never strands its clients silently (issue 26 item 2): reads that fail are
retried until they succeed, a page that does not continue the cursor is never published,
and a tail that cannot move on for its bound gives up and says so (`on_stuck`, whose owner
tells the clients to resync). A stand-in store injects the faults; the tail against a
real database is tests/e2e/store/test_log_tail.py."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from agentd.core.events import Event
from agentd.session.replicas.log_tail import LogTail
from agentd.store.db import Store, StoredEvent
from tests.support.polling import until

SID = "s-tail"
pytestmark = pytest.mark.timeout(30)


class FlakyStore:
    """The log as a list; `failures` reads raise first; `hold` makes reads hang."""

    def __init__(self) -> None:
        self.events: list[StoredEvent] = []
        self.failures = 0
        self.hold: asyncio.Event | None = None

    def append(self, first: int, last: int) -> None:
        for seq in range(first, last + 1):
            self.events.append(StoredEvent(seq, "agent_message", {"messageId": f"m{seq}", "text": str(seq)}))

    async def read_events(self, session_id: str, *, after_seq: int = 0, limit: int | None = None) -> Any:
        assert session_id == SID
        if self.hold is not None:
            await self.hold.wait()
        if self.failures:
            self.failures -= 1
            raise ConnectionError("connection was closed in the middle of operation")
        page = [e for e in self.events if e.seq > after_seq]
        return page[:limit] if limit is not None else page


def tail_of(store: FlakyStore, publish: Any, **kw: Any) -> LogTail:
    return LogTail(cast(Store, store), SID, publish, after_seq=0, **kw)


async def _running(tail: LogTail) -> asyncio.Task[None]:
    return asyncio.create_task(tail.run())


async def test_failed_reads_are_retried_until_every_event_is_published_once() -> None:
    store = FlakyStore()
    got: list[Event] = []
    stuck: list[bool] = []
    tail = tail_of(store, got.append, on_stuck=lambda: stuck.append(True))
    task = await _running(tail)
    try:
        store.append(1, 3)
        store.failures = 3  # the database was reset: the next reads fail
        tail.wake(3)  # one wake-up, then nothing more is announced
        await until(lambda: [e.seq for e in got] == [1, 2, 3], what="events 1-3 after the failed reads")
        assert tail.failures == 3 and not stuck and not task.done()
        store.append(4, 5)
        tail.wake(5)
        await until(lambda: [e.seq for e in got] == [1, 2, 3, 4, 5], what="the tail going on")
    finally:
        task.cancel()


async def test_a_tail_that_cannot_read_for_its_bound_gives_up_and_says_so() -> None:
    store = FlakyStore()
    got: list[Event] = []
    stuck: list[bool] = []
    tail = tail_of(store, got.append, on_stuck=lambda: stuck.append(True), stuck_after_s=0.3)
    task = await _running(tail)
    store.append(1, 2)
    store.failures = 10**6  # down for good
    tail.wake(2)
    await until(lambda: task.done(), what="the tail giving up")
    assert stuck == [True] and tail.stuck and not got


async def test_a_read_that_hangs_counts_as_failed() -> None:
    store = FlakyStore()
    store.hold = asyncio.Event()  # never set: a dead connection that never answers
    stuck: list[bool] = []
    tail = tail_of(store, lambda _e: None, on_stuck=lambda: stuck.append(True), stuck_after_s=0.2)
    task = await _running(tail)
    tail.wake()
    await until(lambda: task.done(), what="the hung read timing out")
    assert stuck == [True]


async def test_a_gap_is_never_published_and_a_lasting_one_ends_the_tail() -> None:
    store = FlakyStore()
    got: list[Event] = []
    stuck: list[bool] = []
    tail = tail_of(store, got.append, on_stuck=lambda: stuck.append(True), stuck_after_s=0.3)
    task = await _running(tail)
    store.append(1, 2)
    store.append(5, 6)  # 3 and 4 are missing
    tail.wake(6)
    await until(lambda: task.done(), what="the tail giving up on the gap")
    assert [e.seq for e in got] == [1, 2] and tail.cursor == 2 and stuck == [True]


async def test_a_gap_that_fills_in_is_published_in_order() -> None:
    store = FlakyStore()
    got: list[Event] = []
    tail = tail_of(store, got.append)
    task = await _running(tail)
    try:
        store.append(2, 3)  # 1 is not visible yet
        tail.wake(3)
        await until(lambda: tail.failures >= 1, what="the tail seeing the gap")
        assert got == []
        store.events.insert(0, StoredEvent(1, "agent_message", {"messageId": "m1", "text": "1"}))
        await until(lambda: [e.seq for e in got] == [1, 2, 3], what="events in order once 1 is there")
    finally:
        task.cancel()


async def test_caught_up_waits_for_the_read_in_flight_and_reads_again_only_when_behind() -> None:
    """A routed prompt's answer arrives while the tail reads its turn's last events: it is
    given once that read is through, without a second read; something announced and not
    read yet is read before the answer."""
    store = FlakyStore()
    got: list[Event] = []
    tail = tail_of(store, got.append)
    task = await _running(tail)
    try:
        store.append(1, 3)
        store.hold = asyncio.Event()
        tail.wake(3)
        await until(lambda: tail.reads == 0 and tail._reading.locked(), what="the read in flight")
        answered = asyncio.create_task(tail.caught_up())
        await asyncio.sleep(0)  # it waits for the read in flight (no second read is started)
        assert not answered.done()
        store.hold.set()
        store.hold = None
        await answered
        assert [e.seq for e in got] == [1, 2, 3] and tail.reads == 1
        store.append(4, 4)
        tail.announced = 4  # its notification came, its read not yet begun: read now
        await tail.caught_up()
        assert [e.seq for e in got] == [1, 2, 3, 4] and tail.reads == 2
    finally:
        task.cancel()
