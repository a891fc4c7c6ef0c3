"""A SQLite group commit through the driver itself (the SQLite counterpart of pg_commit).

The common group commit (events, messages, session fields, every touched session's
`updated_at`) is a few driver calls of fixed statements on the writer thread's pysqlite
connection, in one transaction: BEGIN, the statements, COMMIT — the same rows, values and
transaction as `batch_write.apply_batches` through SQLAlchemy Core, without its
per-statement machinery (compiled-cache lookup, parameter processing, result set-up),
which was ~80 % of the writer thread's CPU per commit (issue 14, items 1 and 2: two
commits per trivial turn). Values are bound with the columns' own SQLAlchemy bind
processors (JSON through the engine's serializer, datetimes as SQLAlchemy stores them),
and driver errors come out as SQLAlchemy's exceptions, so the event writer tells a busy
database (retried) from bad data (the session fails) as before.

Every driver call lets go of the GIL around each SQLite step and reset, and takes it back
after: while the event loop runs Python meanwhile, each take-back is a wait on the GIL (a
futex, two context switches). So a commit makes as few of them as it can (issue 32): a
table's few rows go in one multi-row INSERT (one step, not a step and a reset per row), and
the transaction begins implicitly with the first INSERT (the driver's own BEGIN, one
call) instead of a statement of its own.

The rare writes (a truncation, queued prompts) or a batch naming one session twice go the
general way.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Dialect
from sqlalchemy import exc as sa_exc

from agentd.store.models import EventRow, MessageRow, SessionRow
from agentd.store.records import Batch

_EVENTS = "INSERT INTO events (session_id, seq, kind, payload, created_at) VALUES (?, ?, ?, ?, ?)"
_MESSAGES = "INSERT INTO messages (session_id, idx, data) VALUES (?, ?, ?)"
_TOUCH = "UPDATE sessions SET updated_at = ? WHERE id = ?"
# Up to this many rows go in one multi-row INSERT (a statement per row count, prepared once
# and kept in the driver's statement cache); more go through executemany, one statement.
MULTI_ROW_MAX = 16
# The commit's time as text by `datetime.isoformat` where that is the column's own text
# (`_datetime_text`). Module switch: False binds it with the column's processor (tests run both).
FAST_TIME = True

Processor = Callable[[Any], Any]


def _execute(cursor: sqlite3.Cursor, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """One driver call of `sql` (a one-row statement) for `rows` (tests count and break
    them here): an INSERT of a few rows as one multi-row INSERT."""
    n = len(rows)
    if n == 1:
        cursor.execute(sql, rows[0])
    elif n <= MULTI_ROW_MAX and sql[0] == "I":
        cursor.execute(_multi_row(sql, n), [v for row in rows for v in row])
    else:
        cursor.executemany(sql, rows)


@functools.lru_cache(maxsize=2 * MULTI_ROW_MAX)
def _multi_row(sql: str, n: int) -> str:
    """`sql` (INSERT … VALUES (?, …)) inserting `n` rows, in their order."""
    head, marks = sql.split(" VALUES ")
    return f"{head} VALUES {', '.join([marks] * n)}"


def forget_statements() -> None:
    """Drop the statement texts made during a load (the writer's idle release)."""
    _multi_row.cache_clear()
    _session_update.cache_clear()


def commit(conn: Connection, batches: list[Batch], now: datetime) -> bool:
    """Apply and commit `batches` on the writer's connection; False, with nothing done,
    when they need the general way (`apply_batches` in a SQLAlchemy transaction)."""
    sessions = set()
    for b in batches:
        if b.truncate_from is not None or b.queue or b.session_id in sessions:
            return False
        sessions.add(b.session_id)
    binds = _binds(conn.dialect)
    at = binds.created_at(now)
    data = binds.data
    # The codec's bytes, as text: what the column's serialiser wrote for the same payload.
    events = [(b.session_id, e.seq, e.kind, e.data.decode(), at) for b in batches for e in b.events]
    messages = [(b.session_id, i, data(m)) for b in batches for i, m in b.messages]
    touched: list[tuple[Any, str]] = []
    groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
    for b in batches:
        fields = b.session_fields
        if fields:
            # `updated_at` is the commit's time whatever the fields say (as the general way).
            columns = tuple(sorted(fields))
            if "updated_at" in fields:
                columns = tuple(c for c in columns if c != "updated_at")
            if columns:
                row = [binds.session(c)(fields[c]) for c in columns]
                groups.setdefault(columns, []).append((*row, at, b.session_id))
                continue
        if b.events:
            touched.append((at, b.session_id))
    dbapi: Any = conn.connection.dbapi_connection
    sql = "BEGIN"
    try:
        cursor = dbapi.cursor()
        if dbapi.isolation_level is None and not dbapi.in_transaction:
            cursor.execute(sql)  # an autocommit connection: the driver begins nothing itself
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


class _Binds:
    """A dialect's bind processors for the columns a commit writes, each looked up once
    (then a plain attribute or dict read per value, not a cache call)."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.created_at = _datetime_text(_processor(dialect, EventRow, "created_at"))
        self.data = _processor(dialect, MessageRow, "data")
        self._session: dict[str, Processor] = {}

    def session(self, column: str) -> Processor:
        proc = self._session.get(column)
        if proc is None:
            proc = self._session[column] = _processor(self.dialect, SessionRow, column)
        return proc


@functools.lru_cache(maxsize=8)
def _binds(dialect: Dialect) -> _Binds:
    return _Binds(dialect)


def _processor(dialect: Dialect, table: Any, column: str) -> Processor:
    """The column's bind processor for this dialect (the identity when it has none)."""
    col_type = table.__table__.c[column].type
    proc = col_type.dialect_impl(dialect).bind_processor(dialect)
    return proc if proc is not None else _same


def _same(value: Any) -> Any:
    return value


# Times the fast text is checked against the column's processor with (naive and aware, with
# and without microseconds, the smallest year).
_PROBES = (
    datetime(2026, 12, 5, 21, 35, 7, 720610, tzinfo=UTC),
    datetime(2026, 1, 2, 3, 4, 5),
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999),
)


def _iso(value: datetime) -> str:
    return value.replace(tzinfo=None).isoformat(" ", "microseconds")


def _datetime_text(proc: Processor) -> Processor:
    """A commit's time as the column's processor writes it, from datetime's own C formatting
    when that is the same text for every probe (SQLite's default storage format); else the
    processor. Its %-format of a dict of the fields cost ~5 µs per commit on the writer
    thread, which the floor's relay spends ~1 on (`isoformat`; issue 32 item 1)."""
    try:
        same = all(_iso(t) == proc(t) for t in _PROBES)
    except Exception:  # a processor that takes other values: its own way
        same = False
    return _iso if same and FAST_TIME else proc


@functools.lru_cache(maxsize=64)
def _session_update(columns: tuple[str, ...]) -> str:
    """The UPDATE for one set of session columns (known ones: `_Binds.session` looked each up)."""
    sets = ", ".join(f'"{c}" = ?' for c in columns)
    return f"UPDATE sessions SET {sets}, updated_at = ? WHERE id = ?"
