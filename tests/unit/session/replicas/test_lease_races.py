"""One replica's own token-taking statements never fence out its own writes (issue 26: after
`kill -9`, a re-loaded session was refused "the database refused its recovery writes").

A restarted replica takes back its sessions (`claim_orphans(mine=True)`) while clients
re-attach (`acquire`); the takeover sweep claims while requests load. Each statement bumps
the fencing token, and the load stamps its writes with the token it was given: when two of
them crossed, the load wrote under a token the other had already replaced. Each interleaving
is injected here against a real Postgres (the fence triggers judge): the load's token must
still be the session's when its writes arrive, and `fences` must hold the database's token.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import text

from agentd.session.replicas.leases import PostgresLeases
from agentd.store import claims
from agentd.store import leases as store_leases
from agentd.store.db import Batch, Store
from tests.support.databases import postgres_database

pytestmark = pytest.mark.postgres

TTL = 30.0
SID = "s1"


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    """s1 mid-turn under a lease of replica A's previous process (token 1, live)."""
    async with postgres_database(migrated=True) as url:
        s = await Store.open(url)
        await s.create_session(id=SID, owner="o", cwd="/w", mode="default", model="m")
        token = await store_leases.acquire(s.engine, SID, "A", TTL, 1.0)
        assert token == 1
        await s.commit([Batch(SID, session_fields={"running_turn": "turn_1"}, fence=token)])
        try:
            yield s
        finally:
            await s.close()


@pytest.fixture
async def keeper(store: Store) -> AsyncIterator[PostgresLeases]:
    """Replica A restarted (same replica id, a new process)."""
    k = PostgresLeases(store.engine, "A", ttl_s=TTL)
    try:
        yield k
    finally:
        await k.stop()


class Gate:
    """Holds a wrapped coroutine at one point until opened; `reached` once it is there."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self.opened = asyncio.Event()

    async def hold(self) -> None:
        self.reached.set()
        await self.opened.wait()


def gated(real: Callable[..., Awaitable[Any]], gate: Gate, *, after: bool) -> Callable[..., Awaitable[Any]]:
    """`real`, held at `gate` before its statement is sent, or (`after`) once it has
    committed but before its caller hears the answer."""

    async def call(*args: Any, **kwargs: Any) -> Any:
        if not after:
            await gate.hold()
        result = await real(*args, **kwargs)
        if after:
            await gate.hold()
        return result

    return call


_TOKEN = text("SELECT token FROM session_leases WHERE session_id = :s")


async def _db_token(store: Store) -> int:
    async with store.engine.connect() as conn:
        return int((await conn.execute(_TOKEN, {"s": SID})).scalar_one())


async def _load(keeper: PostgresLeases) -> int:
    """What `SessionManager.get` does first: the lease, then writes stamped with its token."""
    await keeper.acquire(SID)
    return keeper.fences[SID]


async def _assert_the_load_can_write(store: Store, keeper: PostgresLeases, fence: int) -> None:
    # The recovery's writes (turn_ended, running_turn cleared) under the load's token.
    await store.commit([Batch(SID, session_fields={"running_turn": None}, fence=fence)])
    assert keeper.fences[SID] == await _db_token(store)


async def test_a_take_back_leaves_alone_a_session_whose_acquisition_is_in_flight(
    store: Store, keeper: PostgresLeases, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The acquisition committed (token 2) but its answer is not back when the take-back runs."""
    gate = Gate()
    monkeypatch.setattr(store_leases, "acquire", gated(store_leases.acquire, gate, after=True))
    load = asyncio.create_task(_load(keeper))
    await gate.reached.wait()
    assert await _db_token(store) == 2
    taken = await keeper.claim_orphans(8, queued=True, mine=True)
    assert taken == []  # a claim would have bumped the token under the load
    gate.opened.set()
    fence = await load
    assert fence == 2
    await _assert_the_load_can_write(store, keeper, fence)


async def test_an_acquisition_waits_for_a_take_back_in_flight(
    store: Store, keeper: PostgresLeases, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The take-back chose what to skip, then waited (a pooled connection) before its statement."""
    gate = Gate()
    monkeypatch.setattr(claims, "claim_orphans", gated(claims.claim_orphans, gate, after=False))
    entered = asyncio.Event()
    done = asyncio.Event()
    real_acquire = store_leases.acquire

    async def acquire(*args: Any) -> Any:
        entered.set()
        try:
            return await real_acquire(*args)
        finally:
            done.set()

    monkeypatch.setattr(store_leases, "acquire", acquire)
    take_back = asyncio.create_task(keeper.claim_orphans(8, queued=True, mine=True))
    await gate.reached.wait()
    load = asyncio.create_task(_load(keeper))
    await asyncio.sleep(0)  # the load runs until it waits: for the take-back, or on the database
    if entered.is_set():
        await done.wait()  # it reached the database: its acquisition commits before the claim
    gate.opened.set()
    assert await take_back == [SID]
    fence = await load
    await _assert_the_load_can_write(store, keeper, fence)
    assert fence == 2 and not entered.is_set()  # the take-back's token, without a second bump


async def test_a_late_claim_answer_never_replaces_a_newer_token(
    store: Store, keeper: PostgresLeases, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep claimed the expired lease (token 2); an acquisition bumped it to 3 before
    the claim's answer came back."""
    async with store.engine.begin() as conn:
        await conn.execute(text("UPDATE session_leases SET expires_at = now()"))
    gate = Gate()
    monkeypatch.setattr(claims, "claim_orphans", gated(claims.claim_orphans, gate, after=True))
    sweep = asyncio.create_task(keeper.claim_orphans(8, queued=True))
    await gate.reached.wait()
    fence = await _load(keeper)
    assert fence == 3 == await _db_token(store)
    gate.opened.set()
    assert await sweep == [SID]
    await _assert_the_load_can_write(store, keeper, fence)
    assert keeper.fences[SID] == 3
