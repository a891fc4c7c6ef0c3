"""Databases for tests, made cheaply: a migrated SQLite file copied instead of migrated."""

from __future__ import annotations

import asyncio
import atexit
import shutil
import tempfile
from pathlib import Path

from sqlalchemy.engine import make_url

from agentd.store.db import Store

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
