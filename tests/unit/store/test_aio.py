"""The store's asyncio engine (agentd/store/aio.py, issue 32 item 3) behaves as
`sqlalchemy.ext.asyncio` does for what the store uses: `begin()` commits, or rolls back on an
error; an awaited connection and an explicit transaction; `run_sync`; the raw DBAPI
connection; a connection closed (given back to the pool) even when its task is cancelled
while closing. Each test runs on both engines: agentd's and SQLAlchemy's own (the library
path, `AGENTD_STORE_ASYNC_ENGINE=sqlalchemy`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, text

from agentd.store import aio
from agentd.store.aio import AsyncEngine, create_async_engine, use_sqlalchemy_engine


@pytest.fixture(params=["agentd", "sqlalchemy"])
def choice(request: pytest.FixtureRequest) -> Iterator[str]:
    use_sqlalchemy_engine(request.param == "sqlalchemy")
    yield str(request.param)
    use_sqlalchemy_engine(False)


@pytest.fixture
async def engine(tmp_path: Path, choice: str) -> AsyncIterator[AsyncEngine]:
    eng = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}", pool_size=1, max_overflow=0)
    async with eng.begin() as conn:
        await conn.execute(text("CREATE TABLE t (x INTEGER)"))
    yield eng
    await eng.dispose()


async def rows(engine: AsyncEngine) -> list[int]:
    async with engine.connect() as conn:
        return [int(x) for x in (await conn.execute(text("SELECT x FROM t ORDER BY x"))).scalars()]


def test_the_switch_picks_the_engine(engine: AsyncEngine, choice: str) -> None:
    expected = "sqlalchemy.ext.asyncio.engine" if choice == "sqlalchemy" else aio.__name__
    assert type(engine).__module__ == expected


async def test_begin_commits_or_rolls_back_on_an_error(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(text("INSERT INTO t VALUES (:x)"), [{"x": 1}, {"x": 2}])
    with pytest.raises(RuntimeError):
        async with engine.begin() as conn:
            await conn.execute(text("INSERT INTO t VALUES (3)"))
            raise RuntimeError("boom")
    assert await rows(engine) == [1, 2]


async def test_an_awaited_connection_and_its_transaction(engine: AsyncEngine) -> None:
    conn = await engine.connect()
    try:
        tx = await conn.begin()
        await conn.execute(text("INSERT INTO t VALUES (4)"))
        assert conn.in_transaction()
        await tx.rollback()
        await conn.execute(text("INSERT INTO t VALUES (5)"))
        await conn.commit()
    finally:
        await conn.close()
    assert await rows(engine) == [5]


async def test_run_sync_and_the_raw_connection(engine: AsyncEngine) -> None:
    def count(sync: Connection, plus: int) -> int:
        return int(sync.execute(text("SELECT count(*) FROM t")).scalar_one()) + plus

    async with engine.connect() as conn:
        assert await conn.run_sync(count, 10) == 10
        raw = await conn.get_raw_connection()
        assert raw.dbapi_connection is not None
        assert conn.dialect.name == "sqlite"


async def test_a_connection_cancelled_while_closing_still_goes_back_to_the_pool(engine: AsyncEngine) -> None:
    started = asyncio.Event()

    async def hold() -> None:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
            started.set()
            await asyncio.Event().wait()  # cancelled here: the exit closes the connection

    task = asyncio.create_task(hold())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    assert await asyncio.wait_for(rows(engine), 5) == []  # the pool's one connection is free
