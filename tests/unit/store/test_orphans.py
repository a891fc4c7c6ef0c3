"""Finding the sessions a dead replica left with work (R-C1 takeover, migration 0012):
`sessions.running_turn` follows the group commit, and `store.leases.orphaned` lists only
sessions nobody holds a live lease on that have a turn open or (when asked) queued prompts.
And replicas starting together on a fresh database all get it migrated."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text

from agentd.store import leases
from agentd.store.db import Batch, Store
from agentd.store.engine import SCHEMA_HEAD
from agentd.store.queue_rows import QueueWrite
from tests.support.databases import postgres_database

pytestmark = pytest.mark.postgres

TTL = 30.0
SESSIONS = ("s1", "s2", "s3")


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    async with postgres_database(migrated=True) as url:
        s = await Store.open(url)
        await s.migrate()
        for sid in SESSIONS:
            await s.create_session(id=sid, owner="o", cwd="/w", mode="default", model="m")
        try:
            yield s
        finally:
            await s.close()


async def _expire(store: Store, sid: str) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(
            text("UPDATE session_leases SET expires_at = now() WHERE session_id = :s"), {"s": sid}
        )


async def _token(store: Store, sid: str, owner: str) -> int:
    token = await leases.acquire(store.engine, sid, owner, TTL, 1.0)
    assert isinstance(token, int)
    return token


def _queued(prompt_id: str) -> QueueWrite:
    row = {
        "id": prompt_id, "position": 0, "kind": "prompt", "version": 1, "owner": "o", "last_editor": "o",
        "send_now": False, "request_id": None, "blocks": [], "meta": {},
    }  # fmt: skip
    return QueueWrite(upserts=[row])


async def test_a_session_mid_turn_is_orphaned_only_once_its_lease_ran_out(store: Store) -> None:
    a = await _token(store, "s1", "A")
    await store.commit([Batch("s1", session_fields={"running_turn": "turn_1"}, fence=a)])
    assert (await store.get_session("s1")).running_turn == "turn_1"  # type: ignore[union-attr]
    assert await leases.orphaned(store.engine, 10, queued=True) == []  # A's lease is live
    await _expire(store, "s1")
    assert await leases.orphaned(store.engine, 10, queued=False) == ["s1"]
    b = await _token(store, "s1", "B")  # taken over: live again
    assert await leases.orphaned(store.engine, 10, queued=True) == []
    await store.commit([Batch("s1", session_fields={"running_turn": None}, fence=b)])
    await _expire(store, "s1")
    assert await leases.orphaned(store.engine, 10, queued=True) == []  # no work left


async def test_queued_prompts_count_only_when_asked_and_the_batch_bounds_the_answer(store: Store) -> None:
    for sid in SESSIONS:
        token = await _token(store, sid, "A")
        await store.commit([Batch(sid, queue=[_queued(f"q_{sid}")], fence=token)])
        await _expire(store, sid)
    assert await leases.orphaned(store.engine, 10, queued=False) == []
    assert sorted(await leases.orphaned(store.engine, 10, queued=True)) == list(SESSIONS)
    assert len(await leases.orphaned(store.engine, 2, queued=True)) == 2
    await _token(store, "s2", "B")
    assert sorted(await leases.orphaned(store.engine, 10, queued=True)) == ["s1", "s3"]


async def test_replicas_migrating_a_fresh_database_together_all_start() -> None:
    """Three replicas started at once on a new database: one migrates it (under an advisory
    lock), the others wait for it and find the schema at head."""
    async with postgres_database() as url:
        stores = [await Store.open(url) for _ in range(3)]
        try:
            await asyncio.gather(*(s.migrate() for s in stores))
            assert [(await s.migration_status())[0] for s in stores] == [SCHEMA_HEAD] * 3
        finally:
            for s in stores:
                await s.close()
