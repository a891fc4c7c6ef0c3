"""The Postgres group commit wakes the other replicas (R-C1, issue 15 item 2): after the
events land it NOTIFYs `agentd_events` with "seq session_id" — the highest seq of each
session in the batch — in the same transaction, so nothing is announced that did not
commit. Both ways of committing (one statement; several in a transaction) do it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy.exc import IntegrityError

from agentd.store import EventWrite
from agentd.store.db import Batch, Store
from agentd.store.notify import EVENTS_CHANNEL, asyncpg_dsn, parse_events_payload
from tests.support.databases import event_write, postgres_database

pytestmark = pytest.mark.timeout(60)


def _events(first: int, last: int) -> list[EventWrite]:
    return [
        event_write(s, "agent_message", {"messageId": f"m{s}", "text": str(s)})
        for s in range(first, last + 1)
    ]


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with postgres_database() as url:
        yield url


async def _next(queue: asyncio.Queue[str]) -> tuple[str, int] | None:
    payload = await asyncio.wait_for(queue.get(), 10)
    return parse_events_payload(payload)


async def test_each_commit_notifies_the_last_seq_of_each_session(migrated_pg_url: str) -> None:
    store = await Store.open(migrated_pg_url)
    await store.migrate()
    for sid in ("s1", "s2"):
        await store.create_session(id=sid, owner="o", cwd="/w", mode="default", model="m")
    listener = await asyncpg.connect(asyncpg_dsn(migrated_pg_url))
    got: asyncio.Queue[str] = asyncio.Queue()
    await listener.add_listener(EVENTS_CHANNEL, lambda _c, _p, _ch, payload: got.put_nowait(payload))
    try:
        # One statement: two sessions, one batch each.
        await store.commit([Batch("s1", events=_events(1, 3)), Batch("s2", events=_events(1, 1))])
        assert {await _next(got), await _next(got)} == {("s1", 3), ("s2", 1)}
        # The general way (a truncation): the NOTIFY is its transaction's last statement.
        await store.commit(
            [Batch("s1", events=_events(4, 5), messages=[(0, {"role": "user"})], truncate_from=0)]
        )
        assert await _next(got) == ("s1", 5)
        # A batch with no events announces nothing; the next one still does.
        await store.commit([Batch("s2", session_fields={"title": "t"})])
        await store.commit([Batch("s2", events=_events(2, 2))])
        assert await _next(got) == ("s2", 2)
        # A refused write (a seq already taken) notifies nothing.
        with pytest.raises(IntegrityError):
            await store.commit([Batch("s1", events=_events(5, 6))])
        await store.commit([Batch("s1", events=_events(6, 6))])
        assert await _next(got) == ("s1", 6)
        assert got.empty()
    finally:
        await listener.close()
        await store.close()
