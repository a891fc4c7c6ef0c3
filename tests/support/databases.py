"""Databases for tests, made cheaply: a migrated SQLite file copied instead of migrated, and
fresh Postgres databases copied from a migrated template (`postgres_database`)."""

from __future__ import annotations

import asyncio
import atexit
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest
from sqlalchemy.engine import make_url

from agentd.store import EventWrite
from agentd.store.db import Store

PG_ADMIN_DSN = os.environ.get("AGENTD_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
# Every database the suite makes is named `<prefix><random>` and dropped by the test (or, for
# the migrated templates, the test process) that made it: on a shared Postgres, give each
# run a prefix of its own; nothing else is ever dropped.
PG_PREFIX = os.environ.get("AGENTD_TEST_PG_PREFIX", "agentd_t_")


def database_name(kind: str = "") -> str:
    """A fresh test database name under the prefix (`kind`: e.g. `tpl_` for a template)."""
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,39}", PG_PREFIX):
        pytest.fail(
            f"AGENTD_TEST_PG_PREFIX={PG_PREFIX!r}: use 1-40 of a-z, 0-9 and _ (not starting with a digit)"
        )
    return f"{PG_PREFIX}{kind}{uuid.uuid4().hex[:12]}"


_migrated_sqlite: Path | None = None


async def migrated_sqlite_template() -> Path:
    """A SQLite database at the newest schema, made once per test process (each xdist
    worker): a server started on a SQLite file that does not exist yet gets a copy of it,
    so its own migration costs one query instead of an Alembic upgrade per test. Tests
    of the migrations themselves open their databases with `Store`, not through here."""
    global _migrated_sqlite
    if _migrated_sqlite is None:
        folder = Path(tempfile.mkdtemp(prefix="agentd-migrated-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        path = folder / "agentd.db"
        store = await Store.open(f"sqlite+aiosqlite:///{path}")
        try:
            await store.migrate()
        finally:
            await store.close()
        # Closed cleanly, the WAL was checkpointed into the file: the file alone is the copy.
        assert not path.with_name("agentd.db-wal").exists(), "the template's WAL was not checkpointed"
        _migrated_sqlite = path
    return _migrated_sqlite


async def premigrate_sqlite(url: str) -> None:
    """Copy the migrated template to `url`'s SQLite file if that file does not exist yet."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return
    await asyncio.to_thread(_copy_if_missing, await migrated_sqlite_template(), Path(parsed.database))


def _copy_if_missing(template: Path, target: Path) -> None:
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template, target)


async def _pg_available() -> bool:
    try:
        conn = await asyncpg.connect(PG_ADMIN_DSN, timeout=3)
    except Exception:
        return False
    await conn.close()
    return True


_pg_base = PG_ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
_pg_template: str | None = None  # this process's migrated template database


async def _migrated_template(admin: asyncpg.Connection) -> str:
    """A database at the newest schema, made once per test process (each xdist worker has
    its own: a template must have no other connection while it is copied); dropped at the
    end of the session (`drop_postgres_template`, from conftest's `pytest_sessionfinish`)."""
    global _pg_template
    if _pg_template is None:
        name = database_name("tpl_")
        await admin.execute(f'CREATE DATABASE "{name}"')
        store = await Store.open(f"{_pg_base}/{name}")
        try:
            await store.migrate()
        finally:
            await store.close()  # no connection left: it can serve as a template
        _pg_template = name
    return _pg_template


def drop_postgres_template() -> None:
    if _pg_template is not None:
        asyncio.run(_drop_database(_pg_template))


async def _drop_database(name: str) -> None:
    admin = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@asynccontextmanager
async def postgres_database(*, migrated: bool = False) -> AsyncIterator[str]:
    """A fresh Postgres database, empty or (`migrated`) a copy of one at the newest schema
    (`CREATE DATABASE … TEMPLATE`: no Alembic upgrade per test); yields its SQLAlchemy
    URL; dropped afterwards."""
    if not await _pg_available():
        if os.environ.get("CI"):
            pytest.fail(f"Postgres not reachable at {PG_ADMIN_DSN} (required in CI)")
        pytest.skip("Postgres not reachable")
    name = database_name()
    admin = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        template = f' TEMPLATE "{await _migrated_template(admin)}"' if migrated else ""
        await admin.execute(f'CREATE DATABASE "{name}"{template}')
    finally:
        await admin.close()
    try:
        yield f"{_pg_base}/{name}"
    finally:
        await _drop_database(name)


def event_write(seq: int, kind: str, payload: dict[str, Any]) -> EventWrite:
    """An event for a `Batch`, its payload encoded as the writer encodes one (orjson)."""
    return EventWrite(seq, kind, orjson.dumps(payload))


async def stored_partial(db_url: str, session_id: str) -> dict[str, Any] | None:
    """The session's partial-text checkpoint (R-E1, `sessions.partial`) as the store holds it
    now — read from outside, while a server may be writing it."""
    store = await Store.open(db_url)
    try:
        record = await store.get_session(session_id)
        return record.partial if record else None
    finally:
        await store.close()
