"""Claiming a dead replica's sessions in batches (issue 26 item 6, agentd/store/claims.py):
one statement leases up to N expired sessions with work to the claimer; replicas claiming
at the same moment never get the same session (SKIP LOCKED), live leases and idle
sessions are left alone, and `mine` takes back the claimer's own live leases (a restarted
replica with the same id)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text

from agentd.store import leases
from agentd.store.claims import claim_orphans
from agentd.store.db import Batch, Store
from tests.support.databases import postgres_database

pytestmark = pytest.mark.postgres

TTL = 30.0
SESSIONS = [f"s{i:02}" for i in range(16)]


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    async with postgres_database(migrated=True) as url:
        s = await Store.open(url)
        for sid in [*SESSIONS, "idle"]:
            await s.create_session(id=sid, owner="o", cwd="/w", mode="default", model="m")
        try:
            yield s
        finally:
            await s.close()


async def _running_under(store: Store, owner: str, sids: list[str]) -> dict[str, int]:
    """Each session mid-turn under a lease of `owner`; their tokens."""
    tokens = {}
    for sid in sids:
        token = await leases.acquire(store.engine, sid, owner, TTL, 1.0)
        assert isinstance(token, int)
        tokens[sid] = token
        await store.commit([Batch(sid, session_fields={"running_turn": f"turn_{sid}"}, fence=token)])
    return tokens


async def _expire_all(store: Store) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(text("UPDATE session_leases SET expires_at = now()"))


async def _owners(store: Store) -> dict[str, tuple[str, int]]:
    async with store.engine.connect() as conn:
        rows = (await conn.execute(text("SELECT session_id, owner, token FROM session_leases"))).all()
    return {str(r.session_id): (str(r.owner), int(r.token)) for r in rows}


async def test_replicas_claiming_together_share_the_sessions_and_never_claim_one_twice(store: Store) -> None:
    before = await _running_under(store, "dead", SESSIONS)
    await leases.acquire(store.engine, "idle", "dead", TTL, 1.0)  # no work: nobody needs it
    await _expire_all(store)
    survivors = ("b", "c", "d")

    async def claim_all(rid: str) -> dict[str, int]:
        got: dict[str, int] = {}
        while batch := await claim_orphans(store.engine, rid, 5, TTL, queued=True):
            got.update(batch)
        return got

    claimed = await asyncio.gather(*(claim_all(rid) for rid in survivors))
    seen = [sid for got in claimed for sid in got]
    assert sorted(seen) == SESSIONS  # every one, each by one survivor
    owners = await _owners(store)
    for rid, got in zip(survivors, claimed, strict=True):
        for sid, token in got.items():
            assert owners[sid] == (rid, token) and token == before[sid] + 1  # taken once
    assert owners["idle"][0] == "dead"  # idle: left for whoever is asked for it


async def test_live_leases_and_skipped_sessions_are_not_claimed_but_mine_takes_my_own_back(
    store: Store,
) -> None:
    await _running_under(store, "a", SESSIONS[:3])
    assert await claim_orphans(store.engine, "b", 10, TTL, queued=False) == {}  # A's leases are live
    assert await claim_orphans(store.engine, "a", 10, TTL, queued=False, skip=[SESSIONS[0]]) == {}
    mine = await claim_orphans(store.engine, "a", 10, TTL, queued=False, mine=True, skip=[SESSIONS[0]])
    assert sorted(mine) == SESSIONS[1:3]  # a restarted A takes its own at once, not what it holds
    await _expire_all(store)
    assert sorted(await claim_orphans(store.engine, "b", 2, TTL, queued=False)) == SESSIONS[:2]  # bounded
