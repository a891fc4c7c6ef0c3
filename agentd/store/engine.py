"""Opening the database: the engines (SQLite in WAL mode, or Postgres), their pool bounds,
and the Alembic configuration that migrates them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import Connection, create_engine, event, inspect, text
from sqlalchemy.engine import make_url

from agentd.core import SqliteSynchronous
from agentd.store.aio import AsyncEngine, create_async_engine
from agentd.store.deadline import DeadlinePool
from agentd.store.disconnects import guard
from agentd.store.schema_head import SCHEMA_HEAD as SCHEMA_HEAD  # its home: no engine imported there
from agentd.store.sqlite_writer import SqliteWriter

if TYPE_CHECKING:  # Alembic is imported only when the schema is behind (start-up time)
    from alembic.config import Config


def _migrations_dir() -> Path:
    """The Alembic scripts. An installed wheel carries the top-level `migrations/` as
    `agentd/store/migrations` (mapped in setup.py); a checkout has only the source."""
    packaged = Path(__file__).resolve().parent / "migrations"
    if (packaged / "env.py").is_file():
        return packaged
    return Path(__file__).resolve().parents[2] / "migrations"


MIGRATIONS_DIR = _migrations_dir()


def _json_dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def alembic_config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def current_revision(connection: Connection) -> str | None:
    """The database's schema revision with plain SQL (None: not migrated yet, or a
    branched history that only Alembic can judge)."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    rows = connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    return str(rows[0]) if len(rows) == 1 else None


@dataclass(frozen=True)
class PoolLimits:
    """Bounds on waiting for the database: a flood of requests gets a quick, retryable
    `sqlalchemy.exc.TimeoutError` from the pool instead of stalling every session."""

    size: int = 5
    overflow: int = 10
    timeout_s: float = 5.0  # wait for a free pooled connection
    statement_timeout_s: float = 30.0  # Postgres (asyncpg command_timeout); SQLite: busy_timeout

    @staticmethod
    def in_memory(url: str) -> bool:
        parsed = make_url(url)
        return parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")

    def engine_kw(self, url: str, *, writer: bool = False) -> dict[str, Any]:
        """`writer`: the event writer's own single connection (it commits one at a time)."""
        parsed = make_url(url)
        if self.in_memory(url):
            return {}  # one shared in-memory connection (StaticPool): nothing to bound
        sqlite = parsed.get_backend_name() == "sqlite"
        kw: dict[str, Any] = {
            # Every connection opened stays pooled: an overflow connection would be closed
            # as it is given back while the pool holds `size` idle ones, and opened again by
            # the next checkout — under a burst that is a connect (a backend forked, a TLS
            # attempt, authentication, the prepared statements lost) per statement, the
            # largest CPU cost of 200 concurrent routed prompts (issue 26 item 5). The most
            # connections a replica opens is unchanged: `size` + `overflow`.
            # SQLite keeps its overflow short-lived: opening a file is cheap, and each kept
            # connection holds its page cache and aiosqlite's thread (memory after a flood).
            "pool_size": 1 if writer else self.size + (0 if sqlite else self.overflow),
            "max_overflow": self.overflow if sqlite and not writer else 0,
            "pool_timeout": self.timeout_s,
        }
        if not writer:  # requests wait for a connection until their own deadline
            kw["poolclass"] = DeadlinePool
        if writer:
            # The writer only uses `engine.begin()`, which commits (or rolls back on an
            # error) before the connection goes back: the pool's reset-on-return rollback
            # would be one more round trip per group commit, for nothing.
            kw["pool_reset_on_return"] = None
        if parsed.get_backend_name() == "postgresql":
            kw["connect_args"] = {"command_timeout": self.statement_timeout_s}
        return kw


# The event writer's own wait for a request's write lock: it retries a failed commit itself,
# and its thread blocked for long would hold up every session's events.
WRITER_BUSY_TIMEOUT_S = 5.0


def _sqlite_pragmas(synchronous: str, busy_timeout_s: float, *, writer: bool = False) -> Any:
    """`busy_timeout_s`: how long a statement waits for another connection's write lock
    (the statement timeout, as Postgres's `command_timeout`): a burst's writes queue behind
    the event writer instead of failing "database is locked" after a fixed 5 s."""
    busy_ms = max(1, int(busy_timeout_s * 1000))

    def pragmas(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA synchronous={synchronous}")
        cur.execute(f"PRAGMA busy_timeout={busy_ms}")
        if writer:
            cur.execute("PRAGMA wal_autocheckpoint=0")  # SqliteWriter checkpoints beside it
        cur.close()

    return pragmas


async def open_engines(
    url: str,
    limits: PoolLimits,
    sqlite_synchronous: SqliteSynchronous,
    *,
    sqlite_inline_commit: bool = False,
) -> tuple[AsyncEngine, AsyncEngine, SqliteWriter | None]:
    """(the engine for requests, the event writer's own engine, and for a SQLite file the
    writer's synchronous one); one shared engine for an in-memory SQLite database.
    SQLite connections get WAL, `synchronous` and a busy timeout. `sqlite_inline_commit`:
    a turn's small commits run on the event loop's thread (agentd/store/sqlite_writer.py),
    unless every commit syncs to disk (`full`, `extra`): an fsync must not stall the loop."""
    synchronous = SqliteSynchronous(sqlite_synchronous).value.upper()  # an enum value, never raw SQL
    sqlite_inline_commit = sqlite_inline_commit and synchronous in ("OFF", "NORMAL")
    parsed = make_url(url)
    is_sqlite = parsed.get_backend_name() == "sqlite"
    if is_sqlite and parsed.database and parsed.database != ":memory:":
        await asyncio.to_thread(Path(parsed.database).parent.mkdir, parents=True, exist_ok=True)
    json_kw: dict[str, Any] = {"json_serializer": _json_dumps, "json_deserializer": orjson.loads}
    # A broken connection is discarded, never handed to the next request (issue 26).
    engine = guard(create_async_engine(url, **json_kw, **limits.engine_kw(url)))
    write_engine, sqlite_writer = engine, None
    if is_sqlite and not limits.in_memory(url):
        assert parsed.database is not None
        writer_kw = limits.engine_kw(url, writer=True)
        if sqlite_inline_commit:
            writer_kw["pool_size"] = 2  # the writer thread's connection and the loop's
        sync_writer = create_engine(
            parsed.set(drivername="sqlite+pysqlite"),
            **json_kw,
            **writer_kw,
            connect_args={"check_same_thread": False},  # the writer thread, not the opener
        )
        writer_pragmas = _sqlite_pragmas(synchronous, WRITER_BUSY_TIMEOUT_S, writer=True)
        event.listen(sync_writer, "connect", writer_pragmas)
        sqlite_writer = SqliteWriter(sync_writer, parsed.database, inline=sqlite_inline_commit)
    elif not is_sqlite:
        write_engine = guard(create_async_engine(url, **json_kw, **limits.engine_kw(url, writer=True)))
    if is_sqlite:
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas(synchronous, limits.statement_timeout_s))
    return engine, write_engine, sqlite_writer
