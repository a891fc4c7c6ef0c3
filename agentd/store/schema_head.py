"""The newest schema revision, and whether a SQLite file is already there, read without
SQLAlchemy's engine, its ORM or the async driver (issue 32 item 2: `agentd serve` on a
current database answers /healthz before it imports them; the app's start-up then opens
the store and finds nothing to migrate)."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from sqlalchemy.engine import make_url

# The newest migration's revision id: a database already there needs no Alembic at all.
# Add a migration, update this (tests/unit/store compares it with the scripts' head).
SCHEMA_HEAD = "0014"


def sqlite_at_head(url: str) -> bool:
    """Whether `url` is an existing SQLite file whose schema is at `SCHEMA_HEAD`. False for
    anything else — Postgres, a missing or unreadable file, an older schema, not a URL —
    and for any error: the caller then runs the full check, which names the problem."""
    try:
        parsed = make_url(url)
    except Exception:
        return False
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return False
    path = Path(parsed.database)
    if not path.is_file():  # connecting would create it
        return False
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=5)) as conn:
            rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.Error:
        return False
    return rows == [(SCHEMA_HEAD,)]
