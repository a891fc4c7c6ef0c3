"""A request waits for a pooled connection until its own deadline (issue 32, item 4): with
the pool's one connection held past the pool's own timeout, a request with a later deadline
still gets it when it is given back, while work that is no request (no deadline, or a task
the request started) gives up after the pool's timeout — the retryable "overloaded"."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from agentd.core import SqliteSynchronous
from agentd.store.aio import AsyncEngine, create_async_engine
from agentd.store.deadline import DeadlinePool, pool_wait, until
from agentd.store.engine import PoolLimits, open_engines

POOL_TIMEOUT_S = 0.05


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"
    kw = PoolLimits(size=1, overflow=0, timeout_s=POOL_TIMEOUT_S).engine_kw(url)
    assert kw["poolclass"] is DeadlinePool  # what the server's request engine is made with
    eng = create_async_engine(url, **kw)
    yield eng
    await eng.dispose()


async def waiting_for_a_connection(eng: AsyncEngine, waiter: asyncio.Task[int]) -> None:
    """Returns once `waiter`'s checkout is queued on the pool (its asyncio queue has a
    getter; the pool offers no event for it), or `waiter` has ended (then it fails below)."""
    queue = eng.sync_engine.pool._pool._queue  # type: ignore[attr-defined]
    while not queue._getters and not waiter.done():  # noqa: ASYNC110
        await asyncio.sleep(0)


async def one_query(eng: AsyncEngine) -> int:
    async with eng.connect() as conn:
        return int((await conn.execute(text("select 1"))).scalar_one())


async def held_past_the_pool_timeout(eng: AsyncEngine, waiter: asyncio.Task[int]) -> None:
    """Hold the only connection until `waiter` queues for it and the pool's own timeout has
    passed (time must pass: that is what is tested), then give it back."""
    async with eng.connect():
        await waiting_for_a_connection(eng, waiter)
        await asyncio.sleep(POOL_TIMEOUT_S * 4)


async def test_a_request_waits_until_its_deadline(engine: AsyncEngine) -> None:
    async def request() -> int:
        with until(time.monotonic() + 30):
            return await one_query(engine)

    waiter = asyncio.create_task(request())
    await held_past_the_pool_timeout(engine, waiter)
    assert await waiter == 1


async def test_work_without_a_deadline_gives_up_after_the_pool_timeout(engine: AsyncEngine) -> None:
    waiter = asyncio.create_task(one_query(engine))
    await held_past_the_pool_timeout(engine, waiter)
    with pytest.raises(sa_exc.TimeoutError):
        await waiter


async def test_a_task_started_by_a_request_is_not_that_request(engine: AsyncEngine) -> None:
    """A session's actor spawned by `session/new` inherits the context, not the deadline."""
    with until(time.monotonic() + 30):
        waiter = asyncio.create_task(one_query(engine))
    await held_past_the_pool_timeout(engine, waiter)
    with pytest.raises(sa_exc.TimeoutError):
        await waiter


async def test_the_wait_is_what_is_left_of_the_deadline() -> None:
    assert pool_wait(5.0) == 5.0
    with until(time.monotonic() + 100):
        assert 90 < pool_wait(5.0) <= 100
    with until(time.monotonic() - 1):  # passed: one try for a free connection, no wait
        assert 0 < pool_wait(5.0) < 0.01
    assert pool_wait(5.0) == 5.0


async def test_a_recreated_pool_keeps_the_pools_own_timeout(engine: AsyncEngine) -> None:
    with until(time.monotonic() + 100):
        fresh = engine.sync_engine.pool.recreate()
    assert isinstance(fresh, DeadlinePool) and fresh._timeout == POOL_TIMEOUT_S


def test_the_pool_logs_as_sqlalchemys_own(engine: AsyncEngine) -> None:
    """Not under the `agentd` logger, whose INFO lines a user sees (a refused start-up is one line)."""
    logger = engine.sync_engine.pool.logger
    assert isinstance(logger, logging.Logger) and logger.name.startswith("sqlalchemy.pool.")


async def test_a_sqlite_request_waits_for_the_write_lock_as_long_as_a_statement_may_take(
    tmp_path: Path,
) -> None:
    """Issue 32 item 4: under a 1,000-session burst a `session/new` on SQLite waited for the
    event writer's lock for a fixed 5 s and was refused "database is locked"; the request
    pool's connections wait the statement timeout (Postgres's `command_timeout`) instead."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'b.db'}"
    engine, _, writer = await open_engines(
        url, PoolLimits(statement_timeout_s=42.5), SqliteSynchronous("normal")
    )
    try:
        async with engine.connect() as conn:
            assert (await conn.execute(text("PRAGMA busy_timeout"))).scalar_one() == 42_500
    finally:
        await engine.dispose()
        if writer is not None:
            await writer.close()


async def _connects_over_three_bursts(url: str) -> tuple[int, int, AsyncEngine]:
    """Three bursts of three concurrent checkouts on a pool of size 1 + overflow 2: how many
    connections were opened, and how many stay pooled after."""
    from sqlalchemy import event

    eng = create_async_engine(url, **PoolLimits(size=1, overflow=2, timeout_s=POOL_TIMEOUT_S).engine_kw(url))
    connects: list[object] = []
    event.listen(eng.sync_engine, "connect", lambda conn, _rec: connects.append(conn))
    for _ in range(3):
        held = [await eng.connect() for _ in range(3)]
        for conn in held:
            await conn.close()
    return len(connects), eng.sync_engine.pool.checkedin(), eng  # type: ignore[attr-defined]


async def test_a_burst_keeps_the_connections_it_opened_on_postgres(pg_url: str) -> None:
    """Connections beyond `size` stay pooled once given back: the next burst reuses them
    instead of connecting again (a connect per statement under load, issue 26 item 5)."""
    opened, pooled, eng = await _connects_over_three_bursts(pg_url)
    try:
        assert opened == 3  # opened by the first burst, reused by the others
        assert pooled == 3
        held = [await eng.connect() for _ in range(3)]
        with pytest.raises(sa_exc.TimeoutError):  # and never more than size + overflow
            await eng.connect()
        for conn in held:
            await conn.close()
    finally:
        await eng.dispose()


async def test_sqlite_gives_its_overflow_connections_back(tmp_path: Path) -> None:
    """On SQLite a connection is a file opened (cheap) but a kept one holds its page cache
    and a thread: after a burst only `size` stay (RSS after a flood,
    tests/e2e/reliability/test_memory.py), and the cap still holds."""
    opened, pooled, eng = await _connects_over_three_bursts(f"sqlite+aiosqlite:///{tmp_path / 'b.db'}")
    try:
        assert pooled == 1
        assert opened > 3  # overflow connections were closed and opened again
        held = [await eng.connect() for _ in range(3)]
        with pytest.raises(sa_exc.TimeoutError):
            await eng.connect()
        for conn in held:
            await conn.close()
    finally:
        await eng.dispose()
