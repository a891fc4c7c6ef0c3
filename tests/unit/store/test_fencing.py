"""Session leases and fencing tokens on Postgres (R-C1, issue 15): the database itself
refuses a write carrying a token that is not the session's lease's — on the one-statement
group commit, on the general (transactional) one and on queued-prompt rows."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select, text

from agentd.store import leases
from agentd.store.db import Batch, Store
from agentd.store.models import EventRow
from agentd.store.queue_rows import QueueWrite
from tests.support.databases import event_write, postgres_database

TTL = 30.0


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    async with postgres_database(migrated=True) as url:
        s = await Store.open(url)
        await s.migrate()
        await s.create_session(id="s1", owner="o", cwd="/w", mode="default", model="m")
        await s.create_session(id="s2", owner="o", cwd="/w", mode="default", model="m")
        try:
            yield s
        finally:
            await s.close()


def _events(seq: int, fence: int | None, sid: str = "s1") -> Batch:
    return Batch(
        sid,
        events=[event_write(seq, "agent_message", {"text": str(seq)})],
        messages=[(seq, {"role": "assistant", "content": str(seq)})],
        fence=fence,
    )


async def _expire(store: Store, sid: str) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(
            text("UPDATE session_leases SET expires_at = now() WHERE session_id = :s"), {"s": sid}
        )


async def _seqs(store: Store, sid: str = "s1") -> list[tuple[int, int | None]]:
    async with store.engine.connect() as conn:
        q = select(EventRow.seq, EventRow.fence).where(EventRow.session_id == sid).order_by(EventRow.seq)
        return [(r.seq, r.fence) for r in (await conn.execute(q)).all()]


async def test_tokens_grow_on_every_acquisition_and_a_live_lease_is_held(store: Store) -> None:
    assert await leases.acquire(store.engine, "s1", "A", TTL, 1.0) == 1
    held = await leases.acquire(store.engine, "s1", "B", TTL, 1.0)
    assert isinstance(held, leases.Holder) and held.owner == "A" and held.expires_in_s > 0
    assert await leases.acquire(store.engine, "s1", "A", TTL, 1.0) == 2  # its own again: next token
    await leases.release(store.engine, "s1", "A", 2)
    assert await leases.acquire(store.engine, "s1", "B", TTL, 1.0) == 3  # released: B takes it


async def test_an_unknown_session_gets_no_lease_row(store: Store) -> None:
    assert await leases.acquire(store.engine, "nope", "A", TTL, 1.0) is None
    async with store.engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM session_leases"))).scalar() == 0


async def test_a_stale_token_is_refused_by_the_one_statement_commit(store: Store) -> None:
    old = await leases.acquire(store.engine, "s1", "A", TTL, 1.0)
    assert isinstance(old, int)
    await store.commit([_events(1, old)])
    await _expire(store, "s1")
    new = await leases.acquire(store.engine, "s1", "B", TTL, 1.0)
    assert new == old + 1
    with pytest.raises(Exception) as refused:
        await store.commit([_events(2, old)])
    assert leases.is_stale_fence(refused.value)
    with pytest.raises(Exception) as no_token:  # a leased session needs a token
        await store.commit([_events(2, None)])
    assert leases.is_stale_fence(no_token.value)
    await store.commit([_events(2, new)])
    assert await _seqs(store) == [(1, old), (2, new)]
    await leases.release(store.engine, "s1", "B", new)  # nobody owns it now: a tool may write
    await store.commit([_events(3, None)])
    with pytest.raises(Exception) as still_stale:
        await store.commit([_events(4, old)])
    assert leases.is_stale_fence(still_stale.value)


async def test_a_stale_token_cannot_update_the_session_row(store: Store) -> None:
    """Session fields alone (a checkpoint of streaming text, the goal, the mode) are fenced
    too, on both ways of committing."""
    old = await leases.acquire(store.engine, "s1", "A", TTL, 1.0)
    assert isinstance(old, int)
    await store.commit([Batch("s1", session_fields={"title": "mine"}, fence=old)])
    await _expire(store, "s1")
    new = await leases.acquire(store.engine, "s1", "B", TTL, 1.0)
    for stale in (
        Batch("s1", session_fields={"title": "late"}, fence=old),
        Batch("s1", session_fields={"title": "late"}, truncate_from=0, fence=old),  # the general way
    ):
        with pytest.raises(Exception) as refused:
            await store.commit([stale])
        assert leases.is_stale_fence(refused.value)
    assert (await store.get_session("s1")).title == "mine"  # type: ignore[union-attr]
    await store.commit([Batch("s1", session_fields={"title": "theirs"}, fence=new)])
    assert (await store.get_session("s1")).title == "theirs"  # type: ignore[union-attr]


async def test_one_stale_session_refuses_the_whole_statement(store: Store) -> None:
    """All or nothing: the group commit is one statement (the writer then retries each
    session's batch alone, eventlog.py)."""
    a = await leases.acquire(store.engine, "s1", "A", TTL, 1.0)
    await leases.acquire(store.engine, "s2", "B", TTL, 1.0)
    assert await leases.acquire(store.engine, "s2", "B", TTL, 1.0) == a + 1  # s2's token is not a
    assert isinstance(a, int)
    with pytest.raises(Exception) as refused:
        await store.commit([_events(1, a, "s1"), _events(1, a, "s2")])
    assert leases.is_stale_fence(refused.value)
    assert await _seqs(store, "s1") == [] and await _seqs(store, "s2") == []


async def test_the_general_commit_and_queue_rows_are_fenced_too(store: Store) -> None:
    old = await leases.acquire(store.engine, "s1", "A", TTL, 1.0)
    assert isinstance(old, int)
    row = {
        "id": "q1", "position": 1, "kind": "prompt", "version": 1, "owner": "o", "last_editor": "o",
        "send_now": False, "request_id": None, "blocks": [], "meta": {},
    }  # fmt: skip
    await store.commit([Batch("s1", queue=[QueueWrite(upserts=[row])], fence=old)])
    await _expire(store, "s1")
    new = await leases.acquire(store.engine, "s1", "B", TTL, 1.0)
    stale = [
        Batch("s1", queue=[QueueWrite(deletes=["q1"])], fence=old),  # a delete carries no row token
        Batch("s1", truncate_from=0, fence=old),
        Batch("s1", queue=[QueueWrite(updates=[("q1", {"position": 5})])], fence=old),
    ]
    for batch in stale:
        with pytest.raises(Exception) as refused:
            await store.commit([batch])
        assert leases.is_stale_fence(refused.value)
    assert (await store.get_session("s1")).queue  # type: ignore[union-attr]
    await store.commit([Batch("s1", queue=[QueueWrite(deletes=["q1"])], fence=new)])
    assert not (await store.get_session("s1")).queue  # type: ignore[union-attr]


async def test_renewal_keeps_only_leases_still_ours(store: Store) -> None:
    a1 = await leases.acquire(store.engine, "s1", "A", TTL, 1.0)
    a2 = await leases.acquire(store.engine, "s2", "A", TTL, 1.0)
    assert isinstance(a1, int) and isinstance(a2, int)
    await _expire(store, "s2")
    assert await leases.acquire(store.engine, "s2", "B", TTL, 1.0) == a2 + 1
    assert await leases.renew(store.engine, "A", {"s1": a1, "s2": a2}, TTL) == {"s1"}


async def test_a_takeover_waits_for_a_write_in_flight(store: Store) -> None:
    """The fence check locks the lease row (FOR KEY SHARE) until the write commits, so an
    acquisition cannot slip between a write's check and its commit."""
    old = await leases.acquire(store.engine, "s1", "A", TTL, 1.0)
    await _expire(store, "s1")
    async with store.engine.connect() as writer:
        await writer.execute(
            text(
                "INSERT INTO events (session_id, seq, kind, payload, created_at, fence) "
                "VALUES ('s1', 1, 'agent_message', '{}', now(), :f)"
            ),
            {"f": old},
        )  # the transaction stays open: the check's lock is held
        held = await leases.acquire(store.engine, "s1", "B", TTL, 0.2)  # lock_timeout: counts as held
        assert isinstance(held, leases.Holder)
        await writer.commit()
    assert await leases.acquire(store.engine, "s1", "B", TTL, 1.0) == 2
    assert await _seqs(store) == [(1, 1)]


async def test_a_live_lease_held_elsewhere_is_read_without_the_locking_transaction(store: Store) -> None:
    """A replica routing to the owner learns the holder from one unlocked read (issue 26
    item 5): a write in flight holding the lease row does not make it wait, and it is told
    who holds the lease — not "a write in flight" after its lock wait."""
    assert await leases.acquire(store.engine, "s1", "A", TTL, 1.0) == 1
    async with store.engine.connect() as writer:
        await writer.execute(text("SELECT 1 FROM session_leases WHERE session_id = 's1' FOR UPDATE"))
        held = await leases.acquire(store.engine, "s1", "B", TTL, 0.2)
        assert isinstance(held, leases.Holder) and held.owner == "A" and 0 < held.expires_in_s <= TTL
        await writer.rollback()
    assert await leases.acquire(store.engine, "s1", "A", TTL, 1.0) == 2  # its own: still taken


def test_is_stale_fence_does_not_match_other_errors() -> None:
    assert not leases.is_stale_fence(RuntimeError("boom"))
