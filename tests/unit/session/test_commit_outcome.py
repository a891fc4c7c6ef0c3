"""An acknowledgement means committed (issue 26 item 1): the event writer resolves each
waiter with `Committed` or `NotCommitted(reason)`, on every path a batch can be dropped or
discarded — the database unreachable past the writer's deadline, a refused fencing token,
a session whose data the database refuses, a deadlock on every retry, a lease lost before
the commit — and never answers "committed" for rows that are not in the store. A commit
whose answer was lost with its connection is looked for in the store, not sent twice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import select, text

from agentd.core.events import Event, EventKind
from agentd.session.commit_outcome import (
    COMMITTED,
    CommitFailure,
    NotCommitted,
    classify,
    not_committed,
)
from agentd.session.errors import SessionError, SessionErrorKind
from agentd.session.eventlog.writer import EventWriter
from agentd.session.queue.sync import AfterCommit
from agentd.store import is_stale_fence, leases
from agentd.store.db import Batch, Store
from agentd.store.models import EventRow
from agentd.transport.errors import rpc_error
from tests.support.databases import postgres_database
from tests.support.polling import until


@pytest.fixture
async def store(migrated_db_url: str) -> AsyncIterator[Store]:
    s = await Store.open(migrated_db_url)
    await s.migrate()
    for sid in ("a", "b"):
        await s.create_session(id=sid, owner="local", cwd="/tmp", mode="default", model="m")
    yield s
    await s.close()


def _event(sid: str, seq: int) -> Event:
    return Event.stored(sid, EventKind.AGENT_MESSAGE, {"messageId": "m", "text": f"{sid}{seq}"}, seq=seq)


async def _seqs(store: Store, sid: str) -> list[int]:
    async with store.engine.connect() as conn:
        q = select(EventRow.seq).where(EventRow.session_id == sid).order_by(EventRow.seq)
        return list((await conn.execute(q)).scalars())


class _PgError(Exception):
    def __init__(self, message: str, sqlstate: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


def _connection_lost() -> Exception:
    return sa_exc.DBAPIError(
        "commit", None, _PgError("connection was closed in the middle of operation", "08003")
    )


def _deadlock() -> Exception:
    return sa_exc.DBAPIError("commit", None, _PgError("deadlock detected", "40P01"))


class FaultyStore:
    """The real store behind a switch: `fail` errors raised before a commit reaches it
    (each used once; `forever` keeps raising the last), and `lose_answer` commits and
    then raises a connection error — the answer lost with its connection."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.fail: list[Exception] = []
        self.forever: Exception | None = None
        self.lose_answer = 0
        self.commits = 0

    async def commit(self, batches: list[Batch]) -> None:
        if self.fail:
            raise self.fail.pop(0)
        if self.forever is not None:
            raise self.forever
        await self.inner.commit(batches)
        self.commits += 1
        if self.lose_answer:
            self.lose_answer -= 1
            raise _connection_lost()

    async def landed(self, batches: list[Batch]) -> bool:
        return await self.inner.landed(batches)


async def _writer(store: Any, **kw: Any) -> tuple[EventWriter, list[str]]:
    writer = EventWriter(store, **kw)
    failures: list[str] = []
    writer.on_session_failed = lambda sid, exc: failures.append(sid)
    writer.start()
    return writer, failures


async def test_an_ack_is_committed_only_once_its_rows_are_in_the_store(store: Store) -> None:
    writer, failures = await _writer(store)
    since = writer.mark()
    writer.submit("a", event=_event("a", 1))
    assert await writer.committed("a", since) == COMMITTED
    assert await _seqs(store, "a") == [1]
    assert failures == []
    await writer.stop()


async def test_a_connection_lost_past_the_deadline_fails_every_waiting_ack(store: Store) -> None:
    faulty = FaultyStore(store)
    faulty.forever = _connection_lost()
    writer, failures = await _writer(faulty, give_up_after_s=0.3)
    since = writer.mark()
    writer.submit("a", event=_event("a", 1))
    writer.submit("b", event=_event("b", 1))
    acks = [writer.committed("a", since), writer.committed("b", since)]
    # While it retries, /readyz hears of it; the acks wait.
    await until(lambda: writer.database_health().startswith("event log commits failing"), 10)
    assert not any(ack.done() for ack in acks)
    assert await asyncio.gather(*acks) == [NotCommitted(CommitFailure.CONNECTION_LOST)] * 2
    assert sorted(failures) == ["a", "b"]  # both reload from the store
    assert writer.database_health() == ""  # given up: no commit is failing now
    # The database is back: a reloaded session (its failure cleared) commits again.
    faulty.forever = None
    writer.clear_failure("a")
    since = writer.mark()
    writer.submit("a", event=_event("a", 1))
    assert await writer.committed("a", since) == COMMITTED
    assert await _seqs(store, "a") == [1] and await _seqs(store, "b") == []
    assert writer.database_health() == ""
    await writer.stop()


async def test_a_reset_shorter_than_the_deadline_costs_nothing(store: Store) -> None:
    faulty = FaultyStore(store)
    faulty.fail = [_connection_lost(), _connection_lost()]
    writer, failures = await _writer(faulty, give_up_after_s=10)
    since = writer.mark()
    writer.submit("a", event=_event("a", 1))
    assert await writer.committed("a", since) == COMMITTED
    assert await _seqs(store, "a") == [1] and failures == []
    await writer.stop()


async def test_a_commit_whose_answer_was_lost_is_found_in_the_store_not_sent_twice(store: Store) -> None:
    faulty = FaultyStore(store)
    faulty.lose_answer = 1
    writer, failures = await _writer(faulty, give_up_after_s=10)
    since = writer.mark()
    writer.submit("a", event=_event("a", 1))
    writer.submit("b", event=_event("b", 1))
    assert await writer.committed("a", since) == COMMITTED
    # Sent again it would have hit the unique seq and failed both sessions.
    assert faulty.commits == 1 and failures == []
    assert await _seqs(store, "a") == [1] and await _seqs(store, "b") == [1]
    await writer.stop()


async def test_a_session_the_database_refuses_fails_its_acks_and_no_other(store: Store) -> None:
    writer, failures = await _writer(store)
    writer.submit("a", event=_event("a", 1))
    await writer.barrier()
    since = writer.mark()
    writer.submit("a", event=_event("a", 1))  # the same seq again: refused for good
    writer.submit("b", event=_event("b", 1))
    ack_a, ack_b = writer.committed("a", since), writer.committed("b", since)
    assert await ack_a == NotCommitted(CommitFailure.SESSION_FAILED)
    assert await ack_b == COMMITTED
    assert failures == ["a"]
    # Later writes of the failed session are discarded, and their acks say so.
    since = writer.mark()
    writer.submit("a", event=_event("a", 2))
    assert await writer.committed("a", since) == NotCommitted(CommitFailure.SESSION_FAILED)
    assert await _seqs(store, "a") == [1]
    await writer.stop()


async def test_a_deadlock_is_retried_and_one_on_every_retry_fails_the_ack(store: Store) -> None:
    faulty = FaultyStore(store)
    faulty.fail = [_deadlock(), _deadlock()]
    writer, failures = await _writer(faulty)
    since = writer.mark()
    writer.submit("a", event=_event("a", 1))
    assert await writer.committed("a", since) == COMMITTED  # retried as it was
    assert failures == []
    faulty.forever = _deadlock()
    since = writer.mark()
    writer.submit("a", event=_event("a", 2))
    assert await writer.committed("a", since) == NotCommitted(CommitFailure.DEADLOCK)
    assert failures == ["a"] and await _seqs(store, "a") == [1]
    await writer.stop()


async def test_a_lease_lost_before_the_commit_discards_the_writes_and_fails_the_ack(store: Store) -> None:
    writer, _ = await _writer(store)
    since = writer.mark()
    writer.submit("a", event=_event("a", 1))
    writer.discard("a")  # the renewal learnt another replica holds it, before the writer ran
    assert await writer.committed("a", since) == NotCommitted(CommitFailure.LEASE_LOST)
    assert await _seqs(store, "a") == []
    await writer.stop()


async def test_an_ack_for_writes_committed_before_a_later_drop_stays_committed(store: Store) -> None:
    writer, _ = await _writer(store)
    since = writer.mark()
    writer.submit("a", event=_event("a", 1))
    first = writer.committed("a", since)
    await writer.barrier()
    later = writer.mark()
    writer.submit("a", event=_event("a", 1))  # refused (seq 1 again)
    assert await writer.committed("a", later) == NotCommitted(CommitFailure.SESSION_FAILED)
    assert await first == COMMITTED
    assert writer.outcome_since("a", since) == NotCommitted(CommitFailure.SESSION_FAILED)  # asked now
    await writer.stop()


async def test_a_refused_fencing_token_fails_the_ack() -> None:
    async with postgres_database(migrated=True) as url:
        store = await Store.open(url)
        try:
            await store.create_session(id="a", owner="o", cwd="/w", mode="default", model="m")
            assert await leases.acquire(store.engine, "a", "A", 30.0, 1.0) == 1
            async with store.engine.begin() as conn:  # A's lease runs out; B takes it over
                await conn.execute(text("UPDATE session_leases SET expires_at = now()"))
            assert await leases.acquire(store.engine, "a", "B", 30.0, 1.0) == 2
            writer, failures = await _writer(store)
            writer.fences["a"] = 1  # A still writes under its old token
            since = writer.mark()
            writer.submit("a", event=_event("a", 1))
            assert await writer.committed("a", since) == NotCommitted(CommitFailure.FENCE_REFUSED)
            assert failures == ["a"] and await _seqs(store, "a") == []
            await writer.stop()
        finally:
            await store.close()


class _LeaseAnswer:
    """A store whose every commit a unique index refuses, and whose lease has `token`."""

    def __init__(self, token: int | None) -> None:
        self.token = token

    async def commit(self, batches: list[Batch]) -> None:
        raise sa_exc.IntegrityError("insert", None, _PgError("duplicate key value", "23505"))

    async def lease_token(self, session_id: str) -> int | None:
        return self.token


@pytest.mark.parametrize(
    ("lease", "reason", "stale"),
    [
        (2, CommitFailure.FENCE_REFUSED, True),  # taken over since: the lost lease it is
        (1, CommitFailure.SESSION_FAILED, False),  # still ours: the data was refused
        (None, CommitFailure.SESSION_FAILED, False),
    ],
)
async def test_a_unique_index_refusal_under_a_stale_fence_is_the_lost_lease(
    lease: int | None, reason: CommitFailure, stale: bool
) -> None:
    writer = EventWriter(_LeaseAnswer(lease))  # type: ignore[arg-type]
    seen: list[BaseException] = []
    writer.on_session_failed = lambda sid, exc: seen.append(exc)
    writer.start()
    writer.fences["a"] = 1
    since = writer.mark()
    writer.submit("a", messages=[(0, {"role": "user", "content": "hi"})])
    assert await writer.committed("a", since) == NotCommitted(reason)
    assert len(seen) == 1 and is_stale_fence(seen[0]) is stale
    await writer.stop()


async def test_a_taken_over_session_refused_by_either_check_is_fence_refused() -> None:
    # B took the session over and wrote message 0; A, still under token 1, writes its own
    # message 0: the fence trigger or the unique index refuses it (Postgres does not order
    # them) — either way A's writes are reported refused for the fence.
    async with postgres_database(migrated=True) as url:
        store = await Store.open(url)
        try:
            await store.create_session(id="a", owner="o", cwd="/w", mode="default", model="m")
            assert await leases.acquire(store.engine, "a", "A", 30.0, 1.0) == 1
            async with store.engine.begin() as conn:
                await conn.execute(text("UPDATE session_leases SET expires_at = now()"))
            assert await leases.acquire(store.engine, "a", "B", 30.0, 1.0) == 2
            await store.commit([Batch("a", messages=[(0, {"role": "user", "content": "B"})], fence=2)])
            writer, failures = await _writer(store)
            writer.fences["a"] = 1
            since = writer.mark()
            writer.submit("a", messages=[(0, {"role": "user", "content": "A"})])
            assert await writer.committed("a", since) == NotCommitted(CommitFailure.FENCE_REFUSED)
            assert failures == ["a"]
            await writer.stop()
        finally:
            await store.close()


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (sa_exc.DBAPIError("x", None, _PgError("stale", "AGF01")), CommitFailure.FENCE_REFUSED),
        (_deadlock(), CommitFailure.DEADLOCK),
        (sa_exc.DBAPIError("x", None, _PgError("serialization", "40001")), CommitFailure.DEADLOCK),
        (sa_exc.InterfaceError("x", None, Exception("connection is closed")), CommitFailure.CONNECTION_LOST),
        (ConnectionResetError(), CommitFailure.CONNECTION_LOST),
        (sa_exc.IntegrityError("x", None, _PgError("duplicate key", "23505")), CommitFailure.SESSION_FAILED),
    ],
)
def test_why_a_batch_was_refused(exc: Exception, reason: CommitFailure) -> None:
    assert classify(exc) is reason


def test_a_dropped_ack_is_a_typed_retryable_error_on_the_wire() -> None:
    err = not_committed("s1", CommitFailure.CONNECTION_LOST)
    assert err.kind is SessionErrorKind.NOT_COMMITTED
    wire = rpc_error(err).to_dict()
    assert wire["code"] == -32022
    assert wire["data"]["retryable"] is True and wire["data"]["reason"] == "connection_lost"


async def test_an_answer_waits_for_the_writes_its_step_submits_after_asking() -> None:
    """`AfterCommit.then` is called before the step submits the writes it answers for (a
    removal's queue delta): the wait must be queued after them."""
    log: list[str] = []

    class Tracker:
        def mark(self) -> int:
            return 1

        def committed(self, session_id: str, since: int) -> asyncio.Future[Any]:
            log.append("wait")
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            fut.set_result(NotCommitted(CommitFailure.LEASE_LOST))
            return fut

    after = AfterCommit(Tracker(), "s1")
    waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    after.then(1, lambda: log.append("answered"), [waiter])
    log.append("write")  # the rest of the step
    with pytest.raises(SessionError) as err:
        await waiter
    assert log == ["write", "wait"]  # never "answered": the writes were dropped
    assert err.value.kind is SessionErrorKind.NOT_COMMITTED and err.value.data == {
        "reason": "lease_lost",
        "retryable": True,
        "retryAfter": 0.5,
    }
