"""The group commits on a SQLite file: a plain (pysqlite) connection driven from one
thread of its own, so a whole commit is one thread hop (aiosqlite hands every cursor call
to its thread and back: three hops per statement).

The writer's connection never checkpoints the WAL itself (`wal_autocheckpoint=0`): a
checkpoint inside a commit is what made the slowest commits slow. Every
`CHECKPOINT_EVERY` commits a PASSIVE checkpoint runs instead on a connection and thread
of its own, beside the commits (it never waits for them), which keeps the WAL bounded.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from sqlalchemy import Connection, Engine

from server.store import sqlite_commit
from server.store.batch_write import apply_batches
from server.store.records import Batch

log = logging.getLogger(__name__)

CHECKPOINT_EVERY = 100  # group commits between two WAL checkpoints


class SqliteWriter:
    def __init__(self, engine: Engine, path: str) -> None:
        self.engine = engine
        self._path = path
        self._thread = ThreadPoolExecutor(1, "store-writer")
        self._checkpoint_thread = ThreadPoolExecutor(1, "store-checkpoint")
        self._checkpoint_conn: sqlite3.Connection | None = None
        self._checkpointing: asyncio.Future[None] | None = None
        self._since_checkpoint = 0
        self.checkpoints = 0  # for tests
        self._conn: Connection | None = None  # the writer thread's own, kept between commits

    async def commit(self, batches: list[Batch], now: datetime) -> None:
        await asyncio.get_running_loop().run_in_executor(self._thread, self._commit, batches, now)
        self._since_checkpoint += 1
        if self._since_checkpoint >= CHECKPOINT_EVERY and (
            self._checkpointing is None or self._checkpointing.done()
        ):
            self._since_checkpoint = 0
            self._checkpointing = asyncio.get_running_loop().run_in_executor(
                self._checkpoint_thread, self._checkpoint
            )

    def _commit(self, batches: list[Batch], now: datetime) -> None:
        # One connection held by the writer thread (the only one that writes): checking one
        # out of the pool and back in (with its reset) per commit was a good part of a
        # commit's CPU. A failed commit drops it, so the next one starts on a fresh one.
        if self._conn is None:
            self._conn = self.engine.connect()
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
        if conn is not None:
            try:
                conn.close()
            except Exception as exc:  # already broken: the pool discards it
                log.warning("closing the writer's connection failed: %s", exc)

    def _checkpoint(self) -> None:
        try:
            if self._checkpoint_conn is None:
                self._checkpoint_conn = sqlite3.connect(self._path, timeout=5, check_same_thread=False)
            self._checkpoint_conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.checkpoints += 1
        except sqlite3.Error as exc:  # only a longer WAL until the next one
            log.warning("WAL checkpoint failed: %s", exc)

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        if self._checkpointing is not None:
            await self._checkpointing
        if self._checkpoint_conn is not None:
            await loop.run_in_executor(self._checkpoint_thread, self._checkpoint_conn.close)
        await loop.run_in_executor(self._thread, self._drop_connection)
        await loop.run_in_executor(self._thread, self.engine.dispose)
        self._thread.shutdown(wait=False)
        self._checkpoint_thread.shutdown(wait=False)
