"""A pooled connection that failed is discarded, never reused (issue 26 item 1): after
`pg_terminate_backend` of every backend of the store — idle in the pool, held by the
group commit, or killed mid-statement — the next operation works on a fresh connection,
and asyncpg's "another operation is in progress" never shows."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text
from sqlalchemy.engine import make_url

from agentd.store.db import Batch, Store
from agentd.store.disconnects import is_disconnect
from tests.support.databases import PG_ADMIN_DSN, event_write, postgres_database
from tests.support.polling import until


@pytest.fixture
async def pg() -> AsyncIterator[tuple[Store, str]]:
    async with postgres_database(migrated=True) as url:
        store = await Store.open(url)
        await store.create_session(id="s", owner="o", cwd="/w", mode="default", model="m")
        try:
            yield store, str(make_url(url).database)
        finally:
            await store.close()


async def _terminate(db: str, *, query: str | None = None) -> int:
    """pg_terminate_backend of this test database's backends only (optionally only those
    running `query`); returns how many."""
    admin = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        sql = (
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = $1 AND pid <> pg_backend_pid()"
        )
        if query is not None:
            sql += " AND query LIKE $2"
            return int(await admin.fetchval(sql, db, f"%{query}%"))
        return int(await admin.fetchval(sql, db))
    finally:
        await admin.close()


async def _backends_gone(db: str) -> bool:
    admin = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()"
        return int(await admin.fetchval(sql, db)) == 0
    finally:
        await admin.close()


def _batch(seq: int) -> Batch:
    return Batch("s", events=[event_write(seq, "agent_message", {"text": str(seq)})])


async def test_after_every_backend_is_terminated_the_next_operations_just_work(
    pg: tuple[Store, str], caplog: pytest.LogCaptureFixture
) -> None:
    store, db = pg
    caplog.set_level(logging.WARNING)
    # Fill the pool with several idle connections, and the group commit's own.
    await asyncio.gather(*(store.get_session("s") for _ in range(4)))
    await store.commit([_batch(1)])
    assert await _terminate(db) >= 2
    await until(lambda: _backends_gone(db), 10, what="the terminated backends gone")
    # Every one of these is the first use of a connection the server closed.
    for _ in range(6):
        assert (await store.get_session("s")) is not None
    await store.commit([_batch(2)])
    assert [e.seq for e in await store.read_events("s")] == [1, 2]
    assert "another operation is in progress" not in caplog.text


async def test_a_connection_killed_mid_statement_is_never_handed_out_again(pg: tuple[Store, str]) -> None:
    store, db = pg

    async def sleeper() -> None:
        async with store.engine.connect() as conn:
            await conn.execute(text("SELECT pg_sleep(30)"))

    task = asyncio.create_task(sleeper())
    await until(lambda: _terminate(db, query="pg_sleep"), 10, what="the sleeping backend terminated")
    with pytest.raises(sa_exc.DBAPIError) as failed:
        await task
    assert is_disconnect(failed.value)
    # More operations than the pool holds: none meets the broken connection.
    results = await asyncio.gather(*(store.get_session("s") for _ in range(12)))
    assert all(r is not None for r in results)
    pool = store.engine.sync_engine.pool
    assert pool.checkedout() == 0  # type: ignore[attr-defined]


BUSY = "another operation is in progress"


def _pg(sqlstate: str, message: str) -> Exception:
    err = Exception(message)
    err.sqlstate = sqlstate  # type: ignore[attr-defined]
    return err


@pytest.mark.parametrize(
    ("exc", "broken"),
    [
        (ConnectionResetError(), True),
        (sa_exc.InterfaceError("x", None, Exception(f"cannot switch to state 15; {BUSY}")), True),
        (sa_exc.DBAPIError("x", None, _pg("57P01", "terminating connection")), True),
        (sa_exc.DBAPIError("x", None, _pg("08003", "connection was closed")), True),
        (sa_exc.IntegrityError("x", None, _pg("23505", "duplicate key")), False),
        (sa_exc.DBAPIError("x", None, _pg("AGF01", "stale fence")), False),
        (ValueError("bad data"), False),
    ],
)
def test_which_errors_break_the_connection(exc: BaseException, broken: bool) -> None:
    assert is_disconnect(exc) is broken
