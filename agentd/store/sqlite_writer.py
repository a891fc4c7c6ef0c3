"""The group commits on a SQLite file: a plain (pysqlite) connection driven from one
thread of its own, so a whole commit is one thread hop (aiosqlite hands every cursor call
to its thread and back: three hops per statement).

With `inline` (AGENTD_SQLITE_INLINE_COMMIT=true; off by default) a turn's small commit
runs on the event loop's own thread instead, on a connection of its own that never waits
for a lock (`busy_timeout=0`): its ~50 µs of SQLite work cost less CPU than the hop — the
hand-off both ways, the writer thread's wake-ups and its GIL take-backs while the loop runs
Python (issue 32: ~4 % of a turn's CPU on a shared host). The price: the loop no longer
works beside the commit, and tool turns' p50 rose under heavy load (bench/RESULTS.md), so
it is opt-in. Deliver-after-commit is unchanged: the commit returns once SQLite committed.
A commit the loop may not block on goes to the thread as before: one that needs the
general way, one of more than `INLINE_MAX_ROWS` rows (a burst's), and one that finds the
write lock held by a request (rolled back at once, then waited for on the thread).

The writer's connections never checkpoint the WAL themselves (`wal_autocheckpoint=0`): a
checkpoint inside a commit is what made the slowest commits slow. Every
`CHECKPOINT_EVERY` commits a PASSIVE checkpoint runs instead on a connection and thread
of its own, beside the commits (it never waits for them), which keeps the WAL bounded.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy import exc as sa_exc

from agentd.store import sqlite_commit
from agentd.store.batch_write import apply_batches
from agentd.store.models import utcnow
from agentd.store.records import Batch

log = logging.getLogger(__name__)

CHECKPOINT_EVERY = 100  # group commits between two WAL checkpoints
INLINE_MAX_ROWS = 32  # events and messages a commit on the loop's thread may write
# `release_idle` closes the writer's connections when no session is loaded, here and on
# Postgres (`Store.release_idle`). False: kept for the server's life (the behaviour before;
# tests run both).
RELEASE = True

T = TypeVar("T")


class WriterThread:
    """One thread running the calls handed to it, in order; each result goes back to the
    caller's loop with one `call_soon_threadsafe`. `run_in_executor` cost ~40 µs of CPU
    and ~95 µs of latency per call here (its work item, concurrent future, lock and the
    chained asyncio future), this ~15 µs and ~30 µs — twice per trivial turn.

    A call that has started runs to its end even if its caller is cancelled (as in an
    executor); one queued behind it runs too (unlike an executor's, which a cancelled
    caller withdraws) — the event writer never cancels a commit it waits for."""

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.call(fn, *args)

    def call(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """`run` without its coroutine: the call is queued now; the future has its result."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()
        self._calls.put((fn, args, done, loop))
        return done

    @property
    def post(self) -> Callable[[tuple[Any, ...]], None]:
        """Queue `(fn, args, done, loop)` as `call` does (its caller made `done`)."""
        return self._calls.put

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            fn, args, done, loop = call
            try:
                outcome: tuple[Any, BaseException | None] = (fn(*args), None)
            except BaseException as exc:  # handed to the caller, as an executor does
                outcome = (None, exc)
            try:
                loop.call_soon_threadsafe(_settle, done, *outcome)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

    def shutdown(self) -> None:
        """The thread ends after the calls queued so far."""
        self._calls.put(None)


def _settle(done: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if done.done():  # the caller was cancelled
        return
    if exc is not None:
        done.set_exception(exc)
    else:
        done.set_result(result)


class SqliteWriter:
    """`engine`: the writer's synchronous engine, whose pool holds its two connections (the
    thread's, and the loop's when `inline`)."""

    def __init__(self, engine: Engine, path: str, *, inline: bool = False) -> None:
        self.engine = engine
        self._path = path
        self._inline = inline
        self._loop_conn: Connection | None = None  # the loop thread's own (inline commits)
        self._on_thread = 0  # commits handed to the thread and not yet done there
        self._counting = threading.Lock()
        self._thread = WriterThread("store-writer")
        self._post = self._thread.post
        # A thread of its own, handed its checkpoints as the commits are (one queue put and
        # one call back: `run_in_executor` took ~25 calls on the loop each time). Started at
        # the first checkpoint, ended by `release_idle` (a thread started mid-load pins memory).
        self._checkpoint_thread: WriterThread | None = None
        self._checkpoint_conn: sqlite3.Connection | None = None
        self._checkpointing: asyncio.Future[None] | None = None
        self._since_checkpoint = 0
        self.checkpoints = 0  # for tests
        self._conn: Connection | None = None  # the writer thread's own, kept between commits

    def commit(self, batches: list[Batch]) -> Awaitable[None]:
        """The commit, handed to the thread now (its future returned as it is: no coroutine
        of ours per commit); with `inline`, the coroutine that may commit on the loop. The
        commit's time is read where it runs: on the thread, not on the loop (as the floor's
        relay does: per commit, three calls fewer on the loop)."""
        if self._inline:
            return self._commit_here_or_there(batches, utcnow())
        # `WriterThread.call` written out (one call fewer per commit; no count: only inline
        # asks it).
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._post((self._commit, (batches, None), done, loop))
        # Counted as handed over (a checkpoint runs beside the commits anyway).
        self._since_checkpoint += 1
        if self._since_checkpoint >= CHECKPOINT_EVERY:
            self._checkpoint_due()
        return done

    async def _commit_here_or_there(self, batches: list[Batch], now: datetime) -> None:
        # Never past a commit still on the thread (its caller cancelled): commits keep order.
        if not (not self._on_thread and self._commit_inline(batches, now)):
            with self._counting:
                self._on_thread += 1
            await self._thread.run(self._commit_counted, batches, now)
        self._since_checkpoint += 1
        if self._since_checkpoint >= CHECKPOINT_EVERY:
            self._checkpoint_due()

    def _checkpoint_due(self) -> None:
        """A checkpoint now, unless the last one still runs (then at the next commit)."""
        if self._checkpointing is None or self._checkpointing.done():
            self._since_checkpoint = 0
            if self._checkpoint_thread is None:
                self._checkpoint_thread = WriterThread("store-checkpoint")
            self._checkpointing = self._checkpoint_thread.call(self._checkpoint)

    def _commit_inline(self, batches: list[Batch], now: datetime) -> bool:
        """The commit on the loop's thread: True once committed; False, with nothing
        written, when it is the thread's to do."""
        if sum(len(b.events) + len(b.messages) for b in batches) > INLINE_MAX_ROWS:
            return False
        if self._loop_conn is None:
            conn = self.engine.connect()
            # Never wait on the loop for another connection's write lock: the thread will.
            conn.connection.dbapi_connection.execute("PRAGMA busy_timeout = 0")  # type: ignore[union-attr]
            self._loop_conn = conn
        try:
            return sqlite_commit.commit(self._loop_conn, batches, now)
        except sa_exc.OperationalError as exc:
            if _busy(exc):  # rolled back: nothing was written
                return False
            self._drop_loop_connection()
            raise
        except BaseException:
            self._drop_loop_connection()
            raise

    def _commit_counted(self, batches: list[Batch], now: datetime) -> None:
        try:
            self._commit(batches, now)
        finally:
            with self._counting:
                self._on_thread -= 1

    def _commit(self, batches: list[Batch], now: datetime | None) -> None:
        # One connection held by the writer thread (the only one that writes): checking one
        # out of the pool and back in (with its reset) per commit was a good part of a
        # commit's CPU. A failed commit drops it, so the next one starts on a fresh one.
        if self._conn is None:
            self._conn = self.engine.connect()
        if now is None:
            now = utcnow()
        try:
            # The common commit straight through the driver; the rare writes the general way.
            if not sqlite_commit.commit(self._conn, batches, now):
                with self._conn.begin():
                    apply_batches(self._conn, batches, now)
        except BaseException:
            self._drop_connection()
            raise

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        _close(conn)

    def _drop_loop_connection(self) -> None:
        conn, self._loop_conn = self._loop_conn, None
        _close(conn)

    def _checkpoint(self) -> None:
        try:
            if self._checkpoint_conn is None:
                self._checkpoint_conn = sqlite3.connect(self._path, timeout=5, check_same_thread=False)
            self._checkpoint_conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.checkpoints += 1
        except sqlite3.Error as exc:  # only a longer WAL until the next one
            log.warning("WAL checkpoint failed: %s", exc)

    async def release_idle(self) -> None:
        """Close the writer's connections and end the checkpoint thread (no session is
        loaded): a load left each connection's statement cache (a multi-row INSERT per row
        count, allocated mid-load, each pinning a 1 MiB arena of Python's allocator) and its
        page cache (up to 2 MiB), and the checkpoint thread started mid-load (issue 32 item
        3). The next commit opens one again (as after a failed commit); nothing per turn."""
        if not RELEASE:
            return
        if self._checkpointing is None or self._checkpointing.done():
            conn, self._checkpoint_conn = self._checkpoint_conn, None
            old, self._checkpoint_thread = self._checkpoint_thread, None
            if old is not None:
                if conn is not None:
                    await old.run(conn.close)
                old.shutdown()
        # Closed on the writer's thread (the last connection to close checkpoints the WAL).
        loop_conn, self._loop_conn = self._loop_conn, None
        await self._thread.run(self._release_connections, loop_conn)
        sqlite_commit.forget_statements()

    def _release_connections(self, loop_conn: Connection | None) -> None:
        conn, self._conn = self._conn, None
        _release(loop_conn)
        _release(conn)

    async def close(self) -> None:
        if self._checkpointing is not None:
            await self._checkpointing
        if self._checkpoint_conn is not None and self._checkpoint_thread is not None:
            await self._checkpoint_thread.run(self._checkpoint_conn.close)
        self._drop_loop_connection()
        await self._thread.run(self._drop_connection)
        await self._thread.run(self.engine.dispose)
        self._thread.shutdown()
        if self._checkpoint_thread is not None:
            self._checkpoint_thread.shutdown()


def _close(conn: Connection | None) -> None:
    """Close a writer's connection (after a failed commit, or at the end)."""
    if conn is not None:
        try:
            conn.close()
        except Exception as exc:  # already broken: the pool discards it
            log.warning("closing the writer's connection failed: %s", exc)


def _release(conn: Connection | None) -> None:
    """Close a writer's connection for good (not back to the pool: its caches go with it)."""
    if conn is not None:
        try:
            conn.invalidate()
            conn.close()
        except Exception as exc:
            log.warning("closing the writer's idle connection failed: %s", exc)


def _busy(exc: sa_exc.OperationalError) -> bool:
    """SQLite refused for a lock another connection holds (SQLITE_BUSY and its kinds)."""
    code = getattr(exc.orig, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_BUSY
