"""Database faults are weathered by the lease renewal (issue 26 item 7), on a real
Postgres: `pg_terminate_backend` of the renewer's backend — idle, or mid-statement —
costs no lease (the round retries at once on a fresh connection: same token, nothing
reported lost), and whether a lease is still ours is the database's answer (its token)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from agentd.session.replicas.leases import PostgresLeases
from agentd.store import leases as store_leases
from agentd.store.db import Store
from tests.support.databases import PG_ADMIN_DSN, postgres_database
from tests.support.polling import until

TTL = 6.0


@pytest.fixture
async def keeper() -> AsyncIterator[tuple[PostgresLeases, Store, str, list[str]]]:
    async with postgres_database(migrated=True) as url:
        store = await Store.open(url)
        await store.create_session(id="s1", owner="o", cwd="/w", mode="default", model="m")
        keeper = PostgresLeases(store.engine, "A", ttl_s=TTL)
        lost: list[str] = []
        keeper._on_lost = lost.append
        await keeper.acquire("s1")
        try:
            yield keeper, store, str(make_url(url).database), lost
        finally:
            await keeper.stop()
            await store.close()


async def _admin(sql: str, *args: Any) -> Any:
    conn = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


async def _terminate_renewer(db: str, *, waiting: bool = False) -> bool:
    """pg_terminate_backend of the renewal's backend of this test database (only when it
    waits for a lock, with `waiting`)."""
    sql = (
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE datname = $1 AND application_name = $2"
    )
    if waiting:
        sql += " AND wait_event_type = 'Lock'"
    return int(await _admin(sql, db, store_leases.RENEWAL_APPLICATION)) == 1


async def _lease(store: Store) -> tuple[int, bool]:
    async with store.engine.connect() as conn:
        row = (
            await conn.execute(
                text("SELECT token, expires_at > now() AS live FROM session_leases WHERE session_id = 's1'")
            )
        ).one()
        return int(row.token), bool(row.live)


async def test_terminating_the_idle_renewal_connection_costs_no_lease(
    keeper: tuple[PostgresLeases, Store, str, list[str]],
) -> None:
    leases, store, db, lost = keeper
    await leases.renew_round()  # the renewal's own connection is open now
    assert await _terminate_renewer(db)
    await leases.renew_round()
    assert leases.renewals == 2 and lost == [] and leases.fences == {"s1": 1}
    assert await _lease(store) == (1, True)
    assert leases.health().healthy


async def test_a_renewal_cut_off_mid_statement_is_retried_at_once_and_keeps_the_lease(
    keeper: tuple[PostgresLeases, Store, str, list[str]],
) -> None:
    leases, store, db, lost = keeper
    # Hold the lease row so the renewal's UPDATE waits on it, then cut its connection.
    dsn = make_url(store.engine.url).set(drivername="postgresql").render_as_string(False)
    holder = await asyncpg.connect(dsn)
    tx = holder.transaction()
    await tx.start()
    await holder.execute("SELECT 1 FROM session_leases WHERE session_id = 's1' FOR NO KEY UPDATE")
    round_ = asyncio.create_task(leases.renew_round())
    await until(lambda: _terminate_renewer(db, waiting=True), 10, what="the renewal waiting, terminated")
    await tx.rollback()
    await holder.close()
    await asyncio.wait_for(round_, 10)
    assert leases.renewal_failures >= 1 and leases.consecutive_failures == 0  # failed, retried, renewed
    assert lost == [] and leases.fences == {"s1": 1}
    assert await _lease(store) == (1, True)


async def test_a_database_down_for_a_few_attempts_costs_no_lease(
    keeper: tuple[PostgresLeases, Store, str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    leases, store, _db, lost = keeper
    real = store_leases.renew
    failures = [ConnectionResetError("reset"), OSError("unreachable"), ConnectionResetError("reset")]

    async def flaky(*args: Any) -> set[str]:
        if failures:
            raise failures.pop(0)
        return await real(*args)

    monkeypatch.setattr(store_leases, "renew", flaky)
    await leases.renew_round()
    assert leases.renewal_failures == 3 and leases.renewals == 1 and lost == []
    assert await _lease(store) == (1, True) and leases.health().healthy


async def test_the_database_judges_a_late_renewal_by_the_token(
    keeper: tuple[PostgresLeases, Store, str, list[str]],
) -> None:
    leases, store, _db, lost = keeper
    async with store.engine.begin() as conn:  # run out by now(), but nobody took it over
        await conn.execute(text("UPDATE session_leases SET expires_at = now() - interval '1 second'"))
    await leases.renew_round()
    assert lost == [] and await _lease(store) == (1, True)  # a late renewal under load keeps it
    async with store.engine.begin() as conn:  # now another replica takes it over
        await conn.execute(text("UPDATE session_leases SET owner = 'B', token = token + 1"))
    await leases.renew_round()
    assert lost == ["s1"] and leases.fences == {}
    assert leases.health().healthy  # a loss is not a failing renewer
