"""`sqlite_at_head` (agentd/store/schema_head.py): `agentd serve` skips its start-up database
check — and SQLAlchemy's engine and ORM before /healthz — only for a SQLite file already at
the newest schema; anything else gets the full check, which migrates or names the problem."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentd.preflight import open_store
from agentd.store import sqlite_at_head
from agentd.store.engine import SCHEMA_HEAD


def url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


async def test_a_migrated_file_is_at_head(tmp_path: Path) -> None:
    db = tmp_path / "agentd.db"
    async with open_store(url(db)):
        pass
    assert sqlite_at_head(url(db))


async def test_an_older_schema_is_not(tmp_path: Path) -> None:
    db = tmp_path / "agentd.db"
    async with open_store(url(db)):
        pass
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0001'")
    assert not sqlite_at_head(url(db))
    assert SCHEMA_HEAD != "0001"


def test_a_missing_file_is_not_and_is_not_created(tmp_path: Path) -> None:
    db = tmp_path / "agentd.db"
    assert not sqlite_at_head(url(db))
    assert not db.exists()


def test_a_file_that_is_no_database_is_not(tmp_path: Path) -> None:
    db = tmp_path / "agentd.db"
    db.write_text("not a database")
    assert not sqlite_at_head(url(db))
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()  # a database without agentd's schema
    assert not sqlite_at_head(url(empty))


@pytest.mark.parametrize(
    "other", ["postgresql+asyncpg://postgres@127.0.0.1/agentd", "sqlite+aiosqlite://", "not a url at all"]
)
def test_other_databases_are_left_to_the_full_check(other: str) -> None:
    assert not sqlite_at_head(other)
