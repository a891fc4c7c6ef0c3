"""The SQLite writer's thread (agentd/store/sqlite_writer.py `WriterThread`): calls run on
its own thread in the order given, results and exceptions reach the awaiting caller, a
cancelled caller does not stop the thread, and `shutdown` ends it. And which commits the
`SqliteWriter` runs on the loop's own thread with `inline` (a turn's few rows), which on
the writer thread (a burst's, one that finds the write lock held, every one by default)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agentd.core import SqliteSynchronous
from agentd.store import sqlite_commit, sqlite_writer
from agentd.store.db import Batch, Store
from agentd.store.sqlite_writer import INLINE_MAX_ROWS, WriterThread
from tests.support.databases import event_write


async def test_calls_run_in_order_on_the_thread_and_return_their_results() -> None:
    thread = WriterThread("test-writer")
    seen: list[tuple[int, str]] = []

    def record(n: int) -> int:
        seen.append((n, threading.current_thread().name))
        return n * 10

    try:
        results = await asyncio.gather(*(thread.run(record, n) for n in range(20)))
        assert results == [n * 10 for n in range(20)]
        assert seen == [(n, "test-writer") for n in range(20)]
    finally:
        thread.shutdown()


async def test_an_exception_reaches_the_caller_and_the_thread_goes_on() -> None:
    thread = WriterThread("test-writer")

    def fail() -> None:
        raise ValueError("refused")

    try:
        with pytest.raises(ValueError, match="refused"):
            await thread.run(fail)
        assert await thread.run(lambda: "still serving") == "still serving"
    finally:
        thread.shutdown()


async def test_a_cancelled_caller_leaves_the_thread_serving_and_shutdown_ends_it() -> None:
    thread = WriterThread("test-writer")
    started, gate = threading.Event(), threading.Event()

    def hold() -> bool:
        started.set()
        return gate.wait(30)

    slow = asyncio.create_task(thread.run(hold))
    assert await asyncio.to_thread(started.wait, 10)  # running on the thread
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
    gate.set()  # the started call ends; its result finds nobody waiting
    assert await thread.run(lambda: 7) == 7
    thread.shutdown()
    await asyncio.to_thread(thread._thread.join, 10)
    assert not thread._thread.is_alive()


@contextlib.asynccontextmanager
async def _store(
    path: Path, monkeypatch: pytest.MonkeyPatch, **kw: Any
) -> AsyncIterator[tuple[Store, list[str]]]:
    """A SQLite store with a session, and the thread each commit (attempt) ran on."""
    threads: list[str] = []
    real = sqlite_commit.commit

    def traced(conn: Any, batches: list[Batch], now: Any) -> bool:
        threads.append(threading.current_thread().name)
        return real(conn, batches, now)

    monkeypatch.setattr(sqlite_commit, "commit", traced)
    store = await Store.open(f"sqlite+aiosqlite:///{path}", **kw)
    try:
        await store.migrate()
        await store.create_session(id="s0", owner="o", cwd="/w", mode="default", model="m")
        yield store, threads
    finally:
        await store.close()


def _events(first: int, n: int) -> Batch:
    return Batch("s0", events=[event_write(seq, "plan", {"n": seq}) for seq in range(first, first + n)])


async def test_a_turns_commit_runs_on_the_loop_and_a_bursts_on_the_writer_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _store(tmp_path / "a.db", monkeypatch, sqlite_inline_commit=True) as (store, threads):
        loop = threading.current_thread().name
        await store.commit([_events(1, 3)])
        await store.commit([_events(4, INLINE_MAX_ROWS + 1)])
        await store.commit([_events(INLINE_MAX_ROWS + 5, 2)])
        # no hop for a few rows (committed before commit() returned); a burst's on the thread
        assert threads == [loop, "store-writer", loop]
        assert [e.seq for e in await store.read_events("s0")] == list(range(1, INLINE_MAX_ROWS + 7))


async def test_by_default_every_commit_runs_on_the_writer_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _store(tmp_path / "b.db", monkeypatch) as (store, threads):
        for first in (1, 4):
            await store.commit([_events(first, 3)])
        assert threads == ["store-writer", "store-writer"]
        assert [e.seq for e in await store.read_events("s0")] == list(range(1, 7))


async def test_the_commits_time_is_read_on_the_writer_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not on the loop (the floor's relay reads it on its thread too): what the rows say is
    # the time the thread read, once per commit.
    read_on: list[str] = []
    fixed = datetime(2026, 12, 3, 18, 0, 0, 250000, tzinfo=UTC)

    def now() -> datetime:
        read_on.append(threading.current_thread().name)
        return fixed

    async with _store(tmp_path / "t.db", monkeypatch) as (store, threads):
        monkeypatch.setattr(sqlite_writer, "utcnow", now)
        await store.commit([_events(1, 2)])
        assert read_on == ["store-writer"] and threads == ["store-writer"]
    with contextlib.closing(sqlite3.connect(tmp_path / "t.db")) as raw:
        rows = raw.execute("SELECT seq, created_at FROM events ORDER BY seq").fetchall()
        updated = raw.execute("SELECT updated_at FROM sessions WHERE id = 's0'").fetchone()
    assert rows == [(1, "2026-12-03 18:00:00.250000"), (2, "2026-12-03 18:00:00.250000")]
    assert updated == ("2026-12-03 18:00:00.250000",)


@pytest.mark.parametrize("synchronous", [SqliteSynchronous.FULL, SqliteSynchronous.EXTRA])
async def test_commits_that_sync_to_disk_never_run_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, synchronous: SqliteSynchronous
) -> None:
    # With `full`/`extra` every commit waits for an fsync: inline would stall the loop on it.
    path = tmp_path / "f.db"
    async with _store(path, monkeypatch, sqlite_inline_commit=True, sqlite_synchronous=synchronous) as (
        store,
        threads,
    ):
        await store.commit([_events(1, 3)])
        assert threads == ["store-writer"]


async def test_a_commit_finding_the_write_lock_held_waits_for_it_on_the_writer_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The loop never waits for a lock: the commit there is refused at once (SQLITE_BUSY),
    # rolled back, and handed to the writer thread, which waits for the lock.
    path = tmp_path / "c.db"
    async with _store(path, monkeypatch, sqlite_inline_commit=True) as (store, threads):
        await store.commit([_events(1, 1)])  # the loop's connection is open
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")  # a request holding the write lock
        holder.execute("UPDATE sessions SET title = 'by a request' WHERE id = 's0'")
        real_busy = sqlite_writer._busy
        refused: list[bool] = []

        def busy_then_release(exc: Any) -> bool:
            refused.append(real_busy(exc))
            holder.commit()  # the request ends: the thread gets the lock
            return refused[-1]

        monkeypatch.setattr(sqlite_writer, "_busy", busy_then_release)
        await store.commit([_events(2, 2)])
        holder.close()
        loop = threading.current_thread().name
        assert refused == [True]
        assert threads == [loop, loop, "store-writer"]
        assert [e.seq for e in await store.read_events("s0")] == [1, 2, 3]
        got = await store.get_session("s0")
        assert got is not None and got.title == "by a request"


async def test_a_commit_never_overtakes_one_still_on_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A burst's commit runs on the thread; its caller is cancelled meanwhile (the commit runs
    # on to its end). A turn's commit after it queues behind it instead of committing on the
    # loop first: the log keeps its order.
    async with _store(tmp_path / "d.db", monkeypatch, sqlite_inline_commit=True) as (store, threads):
        started, gate = threading.Event(), threading.Event()
        real = sqlite_commit.commit  # _store's tracer, which calls the real one

        def held(conn: Any, batches: list[Batch], now: Any) -> bool:
            if threading.current_thread().name == "store-writer":
                started.set()
                gate.wait(30)
            return real(conn, batches, now)

        monkeypatch.setattr(sqlite_commit, "commit", held)
        burst = asyncio.create_task(store.commit([_events(1, INLINE_MAX_ROWS + 1)]))
        assert await asyncio.to_thread(started.wait, 10)
        burst.cancel()
        with pytest.raises(asyncio.CancelledError):
            await burst
        queued = asyncio.Event()  # the next commit handed to the thread (what must happen)
        real_run = WriterThread.run

        async def run(thread: WriterThread, fn: Any, *args: Any) -> Any:
            queued.set()
            return await real_run(thread, fn, *args)

        monkeypatch.setattr(WriterThread, "run", run)
        after = asyncio.create_task(store.commit([_events(INLINE_MAX_ROWS + 2, 1)]))
        # Open the gate only once `after` has either queued on the thread or (the fault this
        # catches) committed on the loop: opened earlier, the burst could end before `after`
        # even starts, and then committing on the loop would be right.
        waiting = asyncio.create_task(queued.wait())
        await asyncio.wait({after, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        gate.set()
        await after
        assert threads == ["store-writer", "store-writer"]
        assert [e.seq for e in await store.read_events("s0")] == list(range(1, INLINE_MAX_ROWS + 3))
