"""Statements on a pooled connection's asyncpg connection (agentd/store/pg_driver.py, issue 26
item 5): each commits by itself, its errors read as SQLAlchemy's, and a connection the server
killed under one is invalidated — the pool never hands it out again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from agentd.store.db import Store
from agentd.store.disconnects import is_disconnect
from agentd.store.pg_driver import driver
from tests.support.databases import PG_ADMIN_DSN, postgres_database
from tests.support.polling import until

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def pg() -> AsyncIterator[tuple[Store, str]]:
    async with postgres_database(migrated=True) as url:
        store = await Store.open(url)
        try:
            yield store, str(make_url(url).database)
        finally:
            await store.close()


async def _admin_val(sql: str, *args: object) -> object:
    admin = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        return await admin.fetchval(sql, *args)
    finally:
        await admin.close()


async def _rows_elsewhere(db: str) -> int:
    """routed_commands rows as another connection sees them (committed ones only)."""
    dsn = PG_ADMIN_DSN.rsplit("/", 1)[0] + "/" + db
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM routed_commands"))
    finally:
        await conn.close()


INSERT = (
    "INSERT INTO routed_commands (session_id, target, caller, method, principal, teams, params, "
    "state, created_at) VALUES ('s', 't', 'c', 'm', 'p', $1::json, $2::json, 'pending', now()) RETURNING id"
)


async def test_each_statement_commits_and_errors_read_as_sqlalchemys(pg: tuple[Store, str]) -> None:
    store, db = pg
    async with driver(store.engine) as conn:
        command_id = await conn.fetchval(INSERT, '["core"]', '{"a": 1}')
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        # Committed at once: another connection sees it while this one is still held.
        assert await _rows_elsewhere(db) == 1
        row = await conn.fetchrow("SELECT teams, params FROM routed_commands WHERE id = $1", command_id)
        assert (row["teams"], row["params"]) == (["core"], {"a": 1})  # the engine's JSON codec
        with pytest.raises(sa_exc.IntegrityError) as refused:  # what SQLAlchemy's cursor raises
            await conn.execute(
                INSERT.replace("(session_id", "(id, session_id").replace("('s'", "($3, 's'"),
                "[]",
                "{}",
                command_id,
            )
        assert getattr(refused.value.orig, "sqlstate", None) == "23505"
        assert not is_disconnect(refused.value)
    # A refused statement leaves its connection fine: pooled again, and it is reused.
    async with driver(store.engine) as conn:
        assert await conn.fetchval("SELECT pg_backend_pid()") == pid
        assert await conn.fetchval("SELECT count(*) FROM routed_commands") == 1
    assert store.engine.sync_engine.pool.checkedout() == 0  # type: ignore[attr-defined]


async def test_a_connection_killed_under_a_statement_is_never_handed_out_again(pg: tuple[Store, str]) -> None:
    store, db = pg
    killed: list[int] = []
    invalidated: list[object] = []
    event.listen(store.engine.sync_engine.pool, "invalidate", lambda *args: invalidated.append(args))

    async def sleeper() -> None:
        async with driver(store.engine) as conn:
            killed.append(int(await conn.fetchval("SELECT pg_backend_pid()")))
            await conn.execute("SELECT pg_sleep(30)")

    task = asyncio.create_task(sleeper())

    async def terminated() -> bool:
        sql = (
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = $1 AND query LIKE '%pg_sleep(30)%' AND pid <> pg_backend_pid()"
        )
        return bool(await _admin_val(sql, db))

    await until(terminated, 10, what="the sleeping backend terminated")
    with pytest.raises(sa_exc.DBAPIError) as failed:
        await task
    assert is_disconnect(failed.value)
    assert len(invalidated) == 1  # at once, as it left the statement (not at a later checkout)

    # More statements than the pool holds at once: none meets the killed connection.
    async def pid() -> int:
        async with driver(store.engine) as conn:
            return int(await conn.fetchval("SELECT pg_backend_pid()"))

    pids = await asyncio.gather(*(pid() for _ in range(12)))
    assert killed[0] not in pids
    assert store.engine.sync_engine.pool.checkedout() == 0  # type: ignore[attr-defined]
