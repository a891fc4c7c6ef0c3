"""Opening the database: the engines (SQLite in WAL mode, or Postgres), their pool bounds,
and the Alembic configuration that migrates them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from alembic.config import Config
from sqlalchemy import Connection, event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from server.core.modes import SqliteSynchronous


def _migrations_dir() -> Path:
    """The Alembic scripts. An installed wheel carries the top-level `migrations/` as
    `server/store/migrations` (mapped in setup.py); a checkout has only the source."""
    packaged = Path(__file__).resolve().parent / "migrations"
    if (packaged / "env.py").is_file():
        return packaged
    return Path(__file__).resolve().parents[2] / "migrations"


MIGRATIONS_DIR = _migrations_dir()


def _json_dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def alembic_config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


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
        kw: dict[str, Any] = {
            "pool_size": 1 if writer else self.size,
            "max_overflow": 0 if writer else self.overflow,
            "pool_timeout": self.timeout_s,
        }
        if parsed.get_backend_name() == "postgresql":
            kw["connect_args"] = {"command_timeout": self.statement_timeout_s}
        return kw


async def open_engines(
    url: str, limits: PoolLimits, sqlite_synchronous: SqliteSynchronous
) -> tuple[AsyncEngine, AsyncEngine]:
    """(the engine for requests, the event writer's own engine); one shared engine for an
    in-memory SQLite database. SQLite connections get WAL, `synchronous` and a busy timeout."""
    synchronous = SqliteSynchronous(sqlite_synchronous).value.upper()  # an enum value, never raw SQL
    parsed = make_url(url)
    is_sqlite = parsed.get_backend_name() == "sqlite"
    if is_sqlite and parsed.database and parsed.database != ":memory:":
        await asyncio.to_thread(Path(parsed.database).parent.mkdir, parents=True, exist_ok=True)
    engine, write_engine = (
        create_async_engine(
            url,
            json_serializer=_json_dumps,
            json_deserializer=orjson.loads,
            **limits.engine_kw(url, writer=writer),
        )
        for writer in (False, True)
    )
    if limits.in_memory(url):
        await write_engine.dispose()  # another in-memory database: share the one
        write_engine = engine
    if is_sqlite:

        @event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA synchronous={synchronous}")
            cur.execute("PRAGMA busy_timeout=5000")
            cur.close()

        if write_engine is not engine:
            event.listen(write_engine.sync_engine, "connect", _pragmas)
    return engine, write_engine
