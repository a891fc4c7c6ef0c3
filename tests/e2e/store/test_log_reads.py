"""Several sessions' log pages in one statement (issue 26 item 5): `Store.read_events_many`
answers each (session, after seq, limit) read exactly as `read_events` would, in the reads'
order — on Postgres one statement for all of them; a replica's log tails read through it
together (agentd/session/replicas/log_reads.py)."""

from __future__ import annotations

import asyncio

import pytest

from agentd.core.events import Event
from agentd.session.replicas.log_reads import LogReads
from agentd.session.replicas.log_tail import LogTail
from agentd.store.db import Batch, Store
from tests.support.databases import event_write

pytestmark = pytest.mark.timeout(60)
SIDS = ("s-a", "s-b", "s-c")


async def _open(url: str) -> Store:
    store = await Store.open(url)
    await store.migrate()
    for sid in SIDS:
        await store.create_session(id=sid, owner="o", cwd="/w", mode="default", model="m")
    return store


async def _append(store: Store, sid: str, first: int, last: int) -> None:
    events = [
        event_write(seq, "agent_message", {"messageId": f"m{seq}", "text": f"{sid}:{seq}"})
        for seq in range(first, last + 1)
    ]
    await store.commit([Batch(sid, events=events)])


async def test_many_reads_answer_as_each_read_alone_on_both_databases(migrated_db_url: str) -> None:
    store = await _open(migrated_db_url)
    try:
        await _append(store, "s-a", 1, 5)
        await _append(store, "s-b", 1, 2)
        reads = [("s-a", 0, 3), ("s-b", 1, 10), ("s-c", 0, 10), ("s-a", 3, 10), ("nope", 0, 5), ("s-a", 0, 3)]
        many = await store.read_events_many(reads)
        alone = [await store.read_events(sid, after_seq=after, limit=limit) for sid, after, limit in reads]
        assert many == alone
        assert [[e.seq for e in page] for page in many] == [[1, 2, 3], [2], [], [4, 5], [], [1, 2, 3]]
        assert many[1][0].payload == {"messageId": "m2", "text": "s-b:2"}
        assert many[1][0].kind == "agent_message"
        assert await store.read_events_many([]) == []
    finally:
        await store.close()


async def test_tails_reading_together_publish_each_session_in_order(migrated_db_url: str) -> None:
    store = await _open(migrated_db_url)
    reads = LogReads(store)
    try:
        got: dict[str, list[Event]] = {sid: [] for sid in SIDS}
        tails = [
            LogTail(store, sid, got[sid].append, after_seq=0, page_size=2, read=reads.read) for sid in SIDS
        ]
        for n, sid in enumerate(SIDS):
            await _append(store, sid, 1, 3 + n)
        await asyncio.gather(*(tail.catch_up() for tail in tails))
        for n, sid in enumerate(SIDS):
            assert [e.seq for e in got[sid]] == list(range(1, 4 + n)), sid
            assert all(e.payload["text"].startswith(sid) for e in got[sid])
        # Pages of 2: 3, 4 and 5 events are 2, 3 and 3 reads — in fewer statements (the
        # reads asked while one was in flight went together).
        assert reads.reads == 8 and reads.statements < 8, (reads.reads, reads.statements)
    finally:
        await reads.stop()
        await store.close()


async def test_the_owners_of_many_sessions_in_one_read_on_both_databases(migrated_db_url: str) -> None:
    """A replica whose LISTEN reconnected re-checks its watchers of every session with one
    read of their owners (and one of their shares), not one read per session."""
    store = await _open(migrated_db_url)
    try:
        await store.create_session(id="s-bob", owner="bob", cwd="/w", mode="default", model="m")
        owners = await store.session_owners(["s-a", "s-bob", "gone", "s-c"])
        assert owners == {"s-a": "o", "s-bob": "bob", "s-c": "o"}
        assert await store.session_owners([]) == {}
    finally:
        await store.close()
