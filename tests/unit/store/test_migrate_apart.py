"""Migrations in a child process (agentd/store/migrate_apart.py, issue 32 item 3): a store
whose schema is behind is migrated by a child, so Alembic and the SQLAlchemy ORM its scripts
import never load in the server's process; the child's failure comes back as its reason;
an in-memory database is migrated in process (a child could not see it)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agentd.store import Store
from agentd.store.engine import SCHEMA_HEAD
from agentd.store.migrate_apart import MigrationFailed
from tests.support.paths import REPO_ROOT

# A fresh interpreter (this test process may have imported Alembic already): a store on a
# new file, migrated, used; then which of these were imported here.
MIGRATE_HERE = """
import asyncio, json, sys
from agentd.store import Store

async def main() -> None:
    store = await Store.open({url!r})
    await store.migrate()
    status = await store.migration_status()
    await store.create_session(id="s1", owner="local", cwd="/tmp", mode="default", model="m")
    await store.close()
    print(json.dumps([status[0] == status[1], sorted(
        m for m in ("alembic", "sqlalchemy.orm", "sqlalchemy.ext.asyncio", "mako") if m in sys.modules
    )]))

asyncio.run(main())
"""


def url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def test_a_new_database_is_migrated_by_a_child_and_alembic_never_loads_here(tmp_path: Path) -> None:
    code = MIGRATE_HERE.format(url=url(tmp_path / "agentd.db"))
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(out.stdout) == [True, []]
    with sqlite3.connect(tmp_path / "agentd.db") as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(SCHEMA_HEAD,)]
        assert conn.execute("SELECT id FROM sessions").fetchall() == [("s1",)]


async def test_the_childs_failure_is_its_reason(tmp_path: Path) -> None:
    db = tmp_path / "agentd.db"
    store = await Store.open(url(db))
    try:
        await store.migrate()
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE alembic_version SET version_num = 'nosuchrevision'")
        with pytest.raises(MigrationFailed, match="nosuchrevision"):
            await store.migrate()
    finally:
        await store.close()


async def test_an_in_memory_database_is_migrated_in_process() -> None:
    store = await Store.open("sqlite+aiosqlite://")
    try:
        await store.migrate()
        assert (await store.migration_status())[0] == SCHEMA_HEAD
        record = await store.create_session(id="s1", owner="local", cwd="/tmp", mode="default", model="m")
        assert record.id == "s1"
        assert "alembic" in sys.modules  # it ran here
    finally:
        await store.close()
