"""A SQLite group commit through the driver itself (the SQLite counterpart of pg_commit).

The common group commit (events, messages, session fields, every touched session's
`updated_at`) is a few `executemany` calls of fixed statements on the writer thread's
pysqlite connection, in one transaction: BEGIN, the statements, COMMIT — the same rows,
values and transaction as `batch_write.apply_batches` through SQLAlchemy Core, without
its per-statement machinery (compiled-cache lookup, parameter processing, result set-up),
which was ~80 % of the writer thread's CPU per commit (issue 14, items 1 and 2: two
commits per trivial turn). Values are bound with the columns' own SQLAlchemy bind
processors (JSON through the engine's serializer, datetimes as SQLAlchemy stores them),
and driver errors come out as SQLAlchemy's exceptions, so the event writer tells a busy
database (retried) from bad data (the session fails) as before.

The rare writes (a truncation, queued prompts) or a batch naming one session twice go the
general way.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Dialect
from sqlalchemy import exc as sa_exc

from agentd.store.models import EventRow, MessageRow, SessionRow
from agentd.store.records import Batch

_EVENTS = "INSERT INTO events (session_id, seq, kind, payload, created_at) VALUES (?, ?, ?, ?, ?)"
_MESSAGES = "INSERT INTO messages (session_id, idx, data) VALUES (?, ?, ?)"
_TOUCH = "UPDATE sessions SET updated_at = ? WHERE id = ?"

Processor = Callable[[Any], Any]


def _execute(cursor: sqlite3.Cursor, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """One driver call (tests count and break them here)."""
    cursor.executemany(sql, rows)


def commit(conn: Connection, batches: list[Batch], now: datetime) -> bool:
    """Apply and commit `batches` on the writer's connection; False, with nothing done,
    when they need the general way (`apply_batches` in a SQLAlchemy transaction)."""
    if len({b.session_id for b in batches}) != len(batches):
        return False
    if any(b.truncate_from is not None or b.queue for b in batches):
        return False
    dialect = conn.dialect
    data = _processor(dialect, MessageRow, "data")
    at = _processor(dialect, EventRow, "created_at")(now)
    # The codec's bytes, as text: what the column's serialiser wrote for the same payload.
    events = [(b.session_id, e.seq, e.kind, e.data.decode(), at) for b in batches for e in b.events]
    messages = [(b.session_id, i, data(m)) for b in batches for i, m in b.messages]
    touched: list[tuple[Any, str]] = []
    groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
    for b in batches:
        # `updated_at` is the commit's time whatever the fields say (as the general way).
        columns = tuple(sorted(c for c in b.session_fields if c != "updated_at"))
        if columns:
            row = [_processor(dialect, SessionRow, c)(b.session_fields[c]) for c in columns]
            groups.setdefault(columns, []).append((*row, at, b.session_id))
        elif b.events:
            touched.append((at, b.session_id))
    dbapi: Any = conn.connection.dbapi_connection
    sql = "BEGIN"
    try:
        cursor = dbapi.cursor()
        if not dbapi.in_transaction:
            cursor.execute(sql)
        statements: list[tuple[str, Sequence[Sequence[Any]]]] = [(_EVENTS, events), (_MESSAGES, messages)]
        statements += [(_session_update(c), g) for c, g in groups.items()]
        statements.append((_TOUCH, touched))
        for sql, rows in statements:
            if rows:
                _execute(cursor, sql, rows)
        sql = "COMMIT"
        dbapi.commit()
    except BaseException as exc:
        try:
            dbapi.rollback()
        except sqlite3.Error:
            pass  # a broken connection: the writer drops it
        if isinstance(exc, sqlite3.Error):
            raise sa_exc.DBAPIError.instance(sql, None, exc, sqlite3.Error) from exc
        raise
    return True


@functools.lru_cache(maxsize=128)
def _processor(dialect: Dialect, table: Any, column: str) -> Processor:
    """The column's bind processor for this dialect (the identity when it has none)."""
    col_type = table.__table__.c[column].type
    proc = col_type.dialect_impl(dialect).bind_processor(dialect)
    return proc if proc is not None else _same


def _same(value: Any) -> Any:
    return value


@functools.lru_cache(maxsize=64)
def _session_update(columns: tuple[str, ...]) -> str:
    """The UPDATE for one set of session columns (known ones: `_processor` looked each up)."""
    sets = ", ".join(f'"{c}" = ?' for c in columns)
    return f"UPDATE sessions SET {sets}, updated_at = ? WHERE id = ?"
