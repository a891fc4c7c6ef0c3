"""`Store.release_idle()` lets the event writer's connections go (issue 32 item 3): on
SQLite the writer thread's and the loop's (their statement and page caches), the WAL
checkpoint's connection and thread, and the commit's statement texts; on Postgres the held
write connection. The next commit opens what it needs again. With the switch off
(`sqlite_writer.RELEASE`) all are kept, as before."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentd.store import sqlite_commit, sqlite_writer
from agentd.store.db import Batch, Store
from tests.support.databases import event_write


@pytest.fixture(params=[True, False], ids=["release", "keep"])
def release(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(sqlite_writer, "RELEASE", request.param)
    return bool(request.param)


@pytest.fixture
async def sqlite_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Store]:
    monkeypatch.setattr(sqlite_writer, "CHECKPOINT_EVERY", 2)  # a checkpoint after two commits
    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'w.db'}", sqlite_inline_commit=True)
    try:
        await store.migrate()
        await store.create_session(id="s0", owner="o", cwd="/w", mode="default", model="m")
        yield store
    finally:
        await store.close()


def _events(first: int, n: int) -> Batch:
    return Batch("s0", events=[event_write(seq, "plan", {"n": seq}) for seq in range(first, first + n)])


def _closed(dbapi: sqlite3.Connection) -> bool:
    try:
        dbapi.execute("SELECT 1")
    except sqlite3.ProgrammingError:  # "Cannot operate on a closed database."
        return True
    return False


async def test_release_idle_closes_the_sqlite_writers_connections_and_thread(
    sqlite_store: Store, release: bool
) -> None:
    store = sqlite_store
    writer = store.sqlite_writer
    assert writer is not None
    await store.commit([_events(1, 3)])  # on the loop's connection (a turn's few rows)
    await store.commit([_events(4, sqlite_writer.INLINE_MAX_ROWS + 1)])  # on the thread's
    checkpoint = writer._checkpointing
    assert checkpoint is not None
    await checkpoint
    assert writer._checkpoint_thread is not None
    worker = await writer._checkpoint_thread.run(threading.current_thread)
    assert writer._conn is not None and writer._loop_conn is not None and writer._checkpoint_conn is not None
    dbapis = [c.connection.dbapi_connection for c in (writer._conn, writer._loop_conn)]
    dbapis.append(writer._checkpoint_conn)
    assert sqlite_commit._multi_row.cache_info().currsize > 0

    await store.release_idle()

    if release:
        assert writer._conn is None and writer._loop_conn is None and writer._checkpoint_conn is None
        assert all(_closed(d) for d in dbapis)  # closed, not back in the writer's pool
        await asyncio.to_thread(worker.join)
        assert not worker.is_alive()  # the checkpoint thread the load started ended
        assert sqlite_commit._multi_row.cache_info().currsize == 0
    else:
        assert not any(_closed(d) for d in dbapis)
        assert worker.is_alive()
        assert sqlite_commit._multi_row.cache_info().currsize > 0
    # Either way the next commits (both kinds) and checkpoints work.
    await store.commit([_events(sqlite_writer.INLINE_MAX_ROWS + 5, 2)])
    await store.commit([_events(sqlite_writer.INLINE_MAX_ROWS + 7, sqlite_writer.INLINE_MAX_ROWS + 1)])
    assert writer._checkpointing is not None
    await writer._checkpointing
    seqs = [e.seq for e in await store.read_events("s0")]
    assert seqs == list(range(1, 2 * sqlite_writer.INLINE_MAX_ROWS + 8))


async def test_release_idle_drops_the_postgres_write_connection(migrated_pg_url: str, release: bool) -> None:
    store = await Store.open(migrated_pg_url)
    try:
        await store.create_session(id="s0", owner="o", cwd="/w", mode="default", model="m")
        await store.commit([_events(1, 2)])
        held = store._write_conn
        assert held is not None
        await store.release_idle()
        if release:
            assert store._write_conn is None and store._held is None and held.closed
        else:
            assert store._write_conn is held and not held.closed
        await store.commit([_events(3, 2)])  # reconnected when released
        assert store._write_conn is not None
        assert [e.seq for e in await store.read_events("s0")] == [1, 2, 3, 4]
    finally:
        await store.close()
