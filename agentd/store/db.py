"""The store: one async SQLAlchemy engine over SQLite (WAL, default) or Postgres.

Only this package speaks SQL. Writes of the session actors arrive as `Batch`es (events,
conversation messages and session-field updates of one group commit) and are applied
in one transaction, so a crash never leaves an event without its message or vice versa.
The records it hands out are in `records.py`; opening the engines and migrations config in
`engine.py` (their names are re-exported here: many callers import them from this module);
the API token queries, which `Store` inherits, in `tokens.py`; the `session/list` query in
`session_list.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Collection, Sequence
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Engine, delete, func, insert, select, text

from agentd.core import SqliteSynchronous
from agentd.store import leases, pg_commit, queue_rows, session_load, sqlite_writer
from agentd.store.aio import AsyncConnection, AsyncEngine
from agentd.store.batch_write import apply_batches
from agentd.store.disconnects import driver_closed
from agentd.store.engine import (
    MIGRATIONS_DIR,
    SCHEMA_HEAD,
    PoolLimits,
    alembic_config,
    current_revision,
    open_engines,
)
from agentd.store.models import EventRow, MessageRow, SessionLeaseRow, SessionRow, utcnow
from agentd.store.notify import SHARES_CHANNEL
from agentd.store.pg_driver import driver
from agentd.store.records import (
    Batch,
    SessionRecord,
    SessionSummary,
    StoredEvent,
    TokenRecord,
    session_record,
    utc,
)
from agentd.store.session_load import LoadedSession
from agentd.store.sqlite_writer import SqliteWriter
from agentd.store.tokens import ApiTokens

__all__ = [
    "MIGRATIONS_DIR",
    "Batch",
    "LoadedSession",
    "PoolLimits",
    "SessionRecord",
    "SessionSummary",
    "Store",
    "StoredEvent",
    "TokenRecord",
    "alembic_config",
]


# R-C1: refuses (SQLSTATE AGF01) a commit whose token is not the session's lease's.
_FENCE_GUARD = text("SELECT agentd_fence_guard(CAST(:sids AS varchar[]), CAST(:fences AS int8[]))")


def _fence_params(batches: list[Batch]) -> dict[str, Any]:
    return {"sids": [b.session_id for b in batches], "fences": [b.fence for b in batches]}


class Store(ApiTokens):
    def __init__(
        self,
        engine: AsyncEngine,
        write_engine: AsyncEngine | None = None,
        sqlite_writer: SqliteWriter | None = None,
    ) -> None:
        self.engine = engine
        # The group commits get their own connection: a flood of requests holding every
        # pooled connection cannot hold up the events of all sessions. On a SQLite file it
        # is a synchronous one used from a thread of its own (`sqlite_writer`).
        self.write_engine = write_engine or engine
        self.sqlite_writer = sqlite_writer
        # The write engine's one connection, held between group commits (Postgres): a pool
        # checkout and check-in per commit was a good part of its CPU. Dropped on any
        # failure, so the retry starts on a fresh connection.
        self._write_conn: AsyncConnection | None = None
        self._write_dbapi: Any = None  # its DBAPI connection (Postgres: `pg_commit.run`)
        self._write_lock = asyncio.Lock()
        self._held: pg_commit.Held | None = None  # (Postgres) the common commit's, once connected

    @classmethod
    async def open(
        cls,
        url: str,
        pool: PoolLimits | None = None,
        *,
        sqlite_synchronous: SqliteSynchronous = SqliteSynchronous.NORMAL,
        sqlite_inline_commit: bool = False,
    ) -> Store:
        limits = pool or PoolLimits()
        inline = sqlite_inline_commit
        return cls(*await open_engines(url, limits, sqlite_synchronous, sqlite_inline_commit=inline))

    @property
    def commit_engine(self) -> Engine:
        """The engine the group commits run on (for its events, e.g. in tests)."""
        if self.sqlite_writer is not None:
            return self.sqlite_writer.engine
        return self.write_engine.sync_engine

    async def close(self) -> None:
        await self._drop_write_conn()
        await self.engine.dispose()
        if self.write_engine is not self.engine:
            await self.write_engine.dispose()
        if self.sqlite_writer is not None:
            await self.sqlite_writer.close()

    async def release_idle(self) -> None:
        """Close the request pool's idle connections (the server has no session loaded):
        after a load each kept its page cache or statement cache, buffers and, on SQLite, a
        thread, for the server's life (issue 32 item 3). The next request opens one again;
        connections in use are closed when given back. An in-memory database is its one
        connection: kept."""
        if not PoolLimits.in_memory(self.engine.url.render_as_string()):
            await self.engine.dispose()
        # The event writer's too: its statement and page caches filled during the load.
        if self.sqlite_writer is not None:
            await self.sqlite_writer.release_idle()
        elif self.write_engine is not self.engine and sqlite_writer.RELEASE:
            async with self._write_lock:  # (Postgres) reconnected by the next commit
                await self._drop_write_conn()

    # -------------------------------------------------------------- migrations / health

    async def migrate(self, lock_timeout_s: float = 120.0, *, apart: bool = True) -> None:
        """Upgrade the schema to the newest migration. A database already there costs one
        query: Alembic (a few hundred ms of imports) loads only when the schema is behind,
        and then in a child process (`apart`, agentd/store/migrate_apart.py: what it imports
        would stay resident here), unless the database is in memory.
        On Postgres, waits at most `lock_timeout_s` for another replica migrating it."""
        if (await self.migration_status())[0] == SCHEMA_HEAD:
            return
        from agentd.store.migrate_apart import migrate_in_child, upgrade  # only when behind

        url = self.engine.url.render_as_string(hide_password=False)
        if apart and not PoolLimits.in_memory(url):
            await migrate_in_child(url, lock_timeout_s)
            # A pooled connection keeps the schema it read before the child changed it (SQLite
            # refreshes it at the next statement that reads a table, not for a PRAGMA).
            await self.engine.dispose()
            if self.write_engine is not self.engine:
                await self.write_engine.dispose()
        else:
            await upgrade(self.engine, lock_timeout_s)

    async def migration_status(self) -> tuple[str | None, str | None]:
        """(current revision in the database, head revision of the scripts)."""
        async with self.engine.connect() as conn:
            current = await conn.run_sync(current_revision)
        return current, SCHEMA_HEAD

    async def ping(self) -> None:
        async with self.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))

    # -------------------------------------------------------------- sessions

    async def create_session(
        self,
        *,
        id: str,
        owner: str,
        cwd: str,
        mode: str,
        model: str,
        agent: str = "default",
        plan: bool = False,
    ) -> SessionRecord:
        now = utcnow()
        fields: dict[str, Any] = {
            "id": id,
            "owner": owner,
            "cwd": cwd,
            "title": None,
            "mode": mode,
            "plan": plan,
            "model": model,
            "agent": agent,
            "permission_memory": {},
            "created_at": now,
            "updated_at": now,
        }
        async with self.engine.begin() as conn:
            await conn.execute(insert(SessionRow).values(**fields))
        unset = dict.fromkeys(("goal", "retry_state", "usage", "partial", "running_turn"))  # NULL
        return session_record(SimpleNamespace(**fields, **unset))

    async def count_sessions(self, owner: str) -> int:
        async with self.engine.connect() as conn:
            q = select(func.count()).select_from(SessionRow).where(SessionRow.owner == owner)
            return int((await conn.execute(q)).scalar() or 0)

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session with its queued prompts (in order; None when there are none)."""
        async with self.engine.connect() as conn:
            return await session_load.record(conn, session_id)

    async def session_owners(self, session_ids: Collection[str]) -> dict[str, str]:
        """The owner of each of the sessions that exists, in one read."""
        if not session_ids:
            return {}
        q = select(SessionRow.id, SessionRow.owner).where(SessionRow.id.in_(list(session_ids)))
        async with self.engine.connect() as conn:
            return {r.id: r.owner for r in (await conn.execute(q)).all()}

    async def load_session(
        self, session_id: str, *, recent_kinds: Sequence[str], recent_limit: int
    ) -> LoadedSession | None:
        """Everything an actor is made from, read in one connection (session_load.py)."""
        async with self.engine.connect() as conn:
            return await session_load.load(conn, session_id, recent_kinds, recent_limit)

    async def list_sessions(
        self,
        *,
        owner: str,
        cwd: str | None = None,
        before: tuple[datetime, str] | None = None,
        limit: int = 50,
        teams: Collection[str] = (),
        query: str | None = None,
    ) -> list[SessionSummary]:
        """Newest first; `before` is the (updated_at, id) of the last row of the previous page.
        With `teams`, sessions shared with any of them are listed too (R-X2); with `query`,
        only those whose title or cwd contains it (case-insensitive)."""
        from agentd.store.session_list import session_list_query  # as in `session_shares`

        q = session_list_query(owner=owner, cwd=cwd, before=before, limit=limit, teams=teams, query=query)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(q)).all()
        return [SessionSummary(r.id, r.cwd, r.title, utc(r.updated_at), r.owner) for r in rows]

    # ------------------------------------------------------------ team shares (R-X2)

    async def session_shares(self, session_ids: Collection[str]) -> dict[str, dict[str, str]]:
        """team -> access for each of the sessions that is shared with any team."""
        # Sharing and file snapshots load on their first use (rare paths), not in an idle
        # server (issue 32 item 3).
        from agentd.store import shares

        async with self.engine.connect() as conn:
            return await shares.of_sessions(conn, session_ids)

    async def set_session_share(self, session_id: str, team: str, access: str | None) -> bool:
        """`team`'s access to the session (None: not shared); False when there is no session."""
        from agentd.store import shares  # as above

        async with self.engine.begin() as conn:
            found = await conn.execute(select(SessionRow.id).where(SessionRow.id == session_id))
            if found.scalar() is None:
                return False
            await shares.set_access(conn, session_id, team, access)
            if conn.dialect.name == "postgresql":  # sent at commit: other replicas re-check
                await self._notify_shares(conn, session_id)
        return True

    @staticmethod
    async def _notify_shares(conn: AsyncConnection, session_id: str) -> None:
        """Who may see the session changed (its shares, or it is gone): sent at the commit
        of `conn`'s transaction, so no replica re-checks before the change is visible."""
        notify = text("SELECT pg_notify(:channel, :sid)")
        await conn.execute(notify, {"channel": SHARES_CHANNEL, "sid": session_id})

    # -------------------------------------------------------------- events and messages

    def commit(self, batches: list[Batch]) -> Awaitable[None]:
        """Apply several sessions' batches in one transaction (the group commit). Not a
        coroutine: on a SQLite file the writer thread's future is handed back as it is
        (two coroutine frames fewer, each resumed twice, per commit), and the commit's time
        is read on its thread."""
        writer = self.sqlite_writer
        if writer is not None:
            return writer.commit(batches)
        return self._commit(batches, utcnow())

    async def _commit(self, batches: list[Batch], now: datetime) -> None:
        if self.write_engine is self.engine:  # one shared engine (in-memory SQLite)
            async with self.write_engine.begin() as conn:
                await conn.run_sync(apply_batches, batches, now)
            return
        lock = self._write_lock
        await lock.acquire()  # (not `async with`: two coroutine calls fewer per commit)
        try:
            held = self._held
            if held is None or held.closed() or (one := pg_commit.one_statement(batches, now)) is None:
                await self._commit_there(batches, now)
                return
            # Postgres' common commit: one statement on the held autocommit connection.
            try:
                await pg_commit.execute(held.driver, *one)
            except BaseException as exc:
                # Translated first: on a closed connection the dialect would call it a disconnect.
                error = pg_commit.failure(held, *one, exc)
                await self._drop_write_conn()
                if error is exc:
                    raise
                raise error from exc
        finally:
            lock.release()

    async def _commit_there(self, batches: list[Batch], now: datetime) -> None:
        """A commit on the writer's connection (connecting it first) the general way, or
        Postgres' first commit on a connection (then `_held`), under `_write_lock`."""
        if self._write_dbapi is not None and driver_closed(self._write_dbapi):
            await self._drop_write_conn()  # the server closed it since: a fresh one, first time
        if self._write_conn is None:
            self._write_conn = await self.write_engine.connect()
        conn = self._write_conn
        try:
            dialect = conn.dialect  # (a property of a property: read once)
            autocommit = dialect.name == "postgresql"
            if autocommit and self._write_dbapi is None:
                # One autocommitted statement a commit.
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                self._write_dbapi = (await conn.get_raw_connection()).dbapi_connection
                self._held = pg_commit.Held(self._write_dbapi, dialect)
            one = pg_commit.one_statement(batches, now) if autocommit else None
            if one is not None:
                assert self._held is not None  # (set with `_write_dbapi`)
                await pg_commit.run(self._held, *one)
                return
            if autocommit:  # the rare writes: several statements, one transaction
                await conn.execution_options(isolation_level=conn.default_isolation_level)
            async with conn.begin():
                if autocommit:  # its deletes carry no token: the lease check comes first
                    await conn.execute(_FENCE_GUARD, _fence_params(batches))
                await conn.run_sync(apply_batches, batches, now)
                woken = pg_commit.notify_params(batches) if autocommit else None
                if woken is not None:  # delivered at the commit (R-C1)
                    await conn.exec_driver_sql(pg_commit.NOTIFY_AFTER, woken)
            if autocommit:
                await conn.execution_options(isolation_level="AUTOCOMMIT")
        except BaseException:
            await self._drop_write_conn()
            raise

    async def lease_token(self, session_id: str) -> int | None:
        """The session's current fencing token (None: no lease), read after a refused write."""
        return await leases.lease_token(self.engine, session_id)

    async def landed(self, batches: list[Batch]) -> bool:
        """After a commit whose answer was lost with its connection: did it commit? One
        commit is all or nothing, so its first event under its own fencing token tells
        (another owner's event at that seq carries another token). Without an event it
        cannot tell: False, and the commit is sent again (queued rows and session fields
        are rewritten alike; a message written twice is refused, which fails the session
        — never a false "committed")."""
        probe = next((b for b in batches if b.events), None)
        if probe is None:
            return False
        fence = EventRow.fence.is_(None) if probe.fence is None else EventRow.fence == probe.fence
        query = select(EventRow.seq).where(
            EventRow.session_id == probe.session_id, EventRow.seq == probe.events[0].seq, fence
        )
        async with self.engine.connect() as conn:
            return (await conn.execute(query)).first() is not None

    async def _drop_write_conn(self) -> None:
        conn, self._write_conn, self._write_dbapi, self._held = self._write_conn, None, None, None
        if conn is not None:
            with contextlib.suppress(Exception):  # maybe broken: never back to the pool
                await conn.invalidate()
            with contextlib.suppress(Exception):
                await conn.close()

    async def sessions_with_queued_prompts(self) -> list[str]:
        """Sessions whose queue is not empty (to resume them at start-up)."""
        async with self.engine.connect() as conn:
            return await queue_rows.sessions_with_rows(conn)

    async def delete_session(self, session_id: str) -> bool:
        """Remove a session with its events and messages; False when there was none."""
        from agentd.store import shares, snapshots  # as above

        async with self.engine.begin() as conn:
            await conn.execute(delete(EventRow).where(EventRow.session_id == session_id))
            await conn.execute(delete(MessageRow).where(MessageRow.session_id == session_id))
            await queue_rows.delete_session(conn, session_id)
            await snapshots.delete_session(conn, session_id)
            await shares.delete_session(conn, session_id)
            await conn.execute(delete(SessionLeaseRow).where(SessionLeaseRow.session_id == session_id))
            result = await conn.execute(delete(SessionRow).where(SessionRow.id == session_id))
            if result.rowcount and conn.dialect.name == "postgresql":
                await self._notify_shares(conn, session_id)  # at commit: other replicas' watchers end
        return bool(result.rowcount)

    async def fork_session(self, source: SessionRecord, new_id: str, up_to_seq: int) -> SessionRecord | None:
        """A new session with the source's settings, its events up to `up_to_seq`, and the
        conversation as it stood then (messages record the seq they were written at).
        None, with nothing created, when the source was deleted meanwhile."""
        from agentd.store import snapshots  # as in `session_shares`

        now = utcnow()
        async with self.engine.begin() as conn:
            await conn.execute(
                insert(SessionRow).values(
                    id=new_id,
                    owner=source.owner,
                    cwd=source.cwd,
                    title=f"fork of {source.title or source.id}",
                    mode=source.mode,
                    plan=source.plan,
                    model=source.model,
                    agent=source.agent,
                    permission_memory=source.permission_memory,
                    created_at=now,
                    updated_at=now,
                )
            )
            # A concurrent delete either waits for this copy (the row lock on Postgres; the
            # write lock SQLite took with the insert above) or has already removed the source.
            source_row = select(SessionRow.id).where(SessionRow.id == source.id).with_for_update()
            if (await conn.execute(source_row)).first() is None:
                await conn.rollback()  # the fork's row goes too
                return None
            events = (
                await conn.execute(
                    select(EventRow.seq, EventRow.kind, EventRow.payload)
                    .where(EventRow.session_id == source.id, EventRow.seq <= up_to_seq)
                    .order_by(EventRow.seq)
                )
            ).all()
            if events:
                await conn.execute(
                    insert(EventRow),
                    [
                        {
                            "session_id": new_id,
                            "seq": e.seq,
                            "kind": e.kind,
                            "payload": e.payload,
                            "created_at": now,
                        }
                        for e in events
                    ],
                )
            await snapshots.fork_cut(conn, new_id, up_to_seq)
            messages = (
                await conn.execute(
                    select(MessageRow.idx, MessageRow.data)
                    .where(MessageRow.session_id == source.id)
                    .order_by(MessageRow.idx)
                )
            ).all()
            kept = [m.data for m in messages if int(m.data.get("_seq", 0)) <= up_to_seq]
            if kept:
                await conn.execute(
                    insert(MessageRow),
                    [{"session_id": new_id, "idx": i, "data": d} for i, d in enumerate(kept)],
                )
        record = await self.get_session(new_id)
        assert record is not None
        return record

    async def read_events(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        if self.engine.dialect.name == "postgresql":
            # One autocommitted statement on asyncpg itself (pg_driver): log tails read on
            # every notification, and a routed prompt's answer waits for its tail (issue 26).
            async with driver(self.engine) as conn:
                return await session_load.events_direct(conn, session_id, after_seq, limit)
        async with self.engine.connect() as conn:
            return await session_load.events(conn, session_id, after_seq, limit)

    async def read_events_many(self, reads: Sequence[tuple[str, int, int]]) -> list[list[StoredEvent]]:
        """`read_events` for several (session id, after seq, limit) at once, in their order:
        one statement on Postgres (a replica's log tails read together, issue 26 item 5)."""
        if self.engine.dialect.name == "postgresql" and len(reads) > 1:
            async with driver(self.engine) as conn:
                return await session_load.events_many_direct(conn, reads)
        return [await self.read_events(sid, after_seq=after, limit=limit) for sid, after, limit in reads]

    async def latest_events(self, session_id: str, kinds: list[str], *, limit: int) -> list[StoredEvent]:
        """The newest `limit` events of the given kinds, oldest first."""
        async with self.engine.connect() as conn:
            return await session_load.latest(conn, session_id, kinds, limit)

    async def last_seq(self, session_id: str) -> int:
        async with self.engine.connect() as conn:
            return await session_load.last_seq(conn, session_id)

    async def load_messages(self, session_id: str) -> list[dict[str, Any]]:
        async with self.engine.connect() as conn:
            return await session_load.messages(conn, session_id)
