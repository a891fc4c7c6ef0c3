"""`LogReads` (issue 26 item 5): the log tails' reads go to the store together — one
statement in flight; those asked meanwhile wait for it and go out as the next one, each
read answered with its own page; a failed statement fails each of its reads."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from agentd.session.replicas.log_reads import LogReads
from agentd.store import StoredEvent
from tests.support.polling import until

pytestmark = pytest.mark.timeout(30)


class Gated:
    """A store whose statements wait for the test's go, and that records them."""

    def __init__(self) -> None:
        self.statements: list[list[tuple[str, int, int]]] = []
        self.go = asyncio.Event()
        self.fail: Exception | None = None

    async def read_events_many(self, reads: Sequence[tuple[str, int, int]]) -> list[list[StoredEvent]]:
        self.statements.append(list(reads))
        await self.go.wait()
        if self.fail is not None:
            raise self.fail
        return [[StoredEvent(after + 1, sid, {"limit": limit})] for sid, after, limit in reads]


async def test_reads_asked_during_a_statement_go_out_together_as_the_next() -> None:
    store = Gated()
    reads = LogReads(store)
    first = asyncio.create_task(reads.read("a", 0, 10))
    await until(lambda: len(store.statements) == 1, what="the first statement")
    later = [asyncio.create_task(reads.read(sid, 5, 3)) for sid in ("b", "c", "d")]
    await until(lambda: reads.waiting == 3, what="three reads asked")
    assert len(store.statements) == 1  # waiting for the one in flight
    store.go.set()
    pages = await asyncio.gather(first, *later)
    assert store.statements == [[("a", 0, 10)], [("b", 5, 3), ("c", 5, 3), ("d", 5, 3)]]
    assert [(p[0].seq, p[0].kind, p[0].payload) for p in pages] == [
        (1, "a", {"limit": 10}),
        (6, "b", {"limit": 3}),
        (6, "c", {"limit": 3}),
        (6, "d", {"limit": 3}),
    ]
    assert (reads.statements, reads.reads) == (2, 4)


async def test_a_failed_statement_fails_each_read_and_the_next_ones_go_on() -> None:
    store = Gated()
    store.fail = ConnectionError("the database is away")
    reads = LogReads(store)
    first = asyncio.create_task(reads.read("a", 0, 1))
    await until(lambda: len(store.statements) == 1, what="the first statement")
    together = [asyncio.create_task(reads.read(sid, 0, 1)) for sid in ("b", "c")]
    await until(lambda: reads.waiting == 2, what="two reads asked")
    store.go.set()
    results = await asyncio.gather(first, *together, return_exceptions=True)
    assert all(isinstance(r, ConnectionError) for r in results)
    assert store.statements == [[("a", 0, 1)], [("b", 0, 1), ("c", 0, 1)]]
    store.fail = None
    assert [e.seq for e in await reads.read("a", 2, 1)] == [3]


async def test_a_cancelled_read_is_left_out_and_stop_leaves_nobody_waiting() -> None:
    store = Gated()
    reads = LogReads(store)
    first = asyncio.create_task(reads.read("a", 0, 1))
    await until(lambda: len(store.statements) == 1, what="the first statement")
    gone = asyncio.create_task(reads.read("b", 0, 1))
    kept = asyncio.create_task(reads.read("c", 0, 1))
    await until(lambda: reads.waiting == 2, what="two reads asked")
    gone.cancel()
    store.go.set()
    await asyncio.gather(first, kept)
    assert store.statements[1] == [("c", 0, 1)]
    store.go.clear()
    sending = asyncio.create_task(reads.read("d", 0, 1))  # nothing in flight: sent at once
    await until(lambda: len(store.statements) == 3, what="a statement in flight")
    queued = asyncio.create_task(reads.read("e", 0, 1))
    await until(lambda: reads.waiting == 1, what="a read queued behind it")
    await reads.stop()
    with pytest.raises(asyncio.CancelledError):
        await queued
    store.go.set()
    assert [e.seq for e in await sending] == [1]
    assert store.statements[2] == [("d", 0, 1)]
