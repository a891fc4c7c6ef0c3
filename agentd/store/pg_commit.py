"""A Postgres group commit in one round trip.

The common group commit (events, messages, session fields, every touched session's
`updated_at`) is one statement: data-modifying CTEs over arrays (`unnest`), run on the
writer's connection in autocommit. One statement is one implicit transaction, committed
as an explicit COMMIT would be (same `synchronous_commit`), all or nothing — so BEGIN and
COMMIT, two of the five round trips a commit paid, go, and the three statements become
one. The statement's text depends only on which sets of session columns change (one CTE
each), so asyncpg keeps it prepared: a commit is a single Bind/Execute/Sync.

`run` sends it on the driver's (asyncpg's) connection itself, not through SQLAlchemy's
`exec_driver_sql` (a greenlet, a cursor and a result per commit, a third of the commit's
CPU): the same statement and parameters, on the same autocommit connection, so every
guarantee above holds; its errors reach the caller as SQLAlchemy's would
(`sqlalchemy.exc.DBAPIError` over the driver's, SQLSTATE and disconnects included).

The rare writes (a truncation, queued prompts) or a batch naming one session twice go the
general way (`batch_write.apply_batches` in a transaction): a truncation and the inserts
after it would touch the same rows in one statement, which Postgres does not order.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import JSON, Dialect

from agentd.store.models import SessionRow
from agentd.store.notify import EVENTS_CHANNEL
from agentd.store.pg_driver import translated
from agentd.store.records import Batch

# WITH ORDINALITY … ORDER BY: rows get their ids in the batch's order, as executemany gave.
_HEAD = """\
WITH ev AS (
  INSERT INTO events (session_id, seq, kind, payload, created_at, fence)
  SELECT s, q, k, p::json, $1, f
  FROM unnest($2::varchar[], $3::int8[], $4::varchar[], $5::text[], $10::int8[])
    WITH ORDINALITY AS t(s, q, k, p, f, n) ORDER BY n
), msg AS (
  INSERT INTO messages (session_id, idx, data, fence)
  SELECT s, i, d::json, f FROM unnest($6::varchar[], $7::int4[], $8::text[], $11::int8[])
    WITH ORDINALITY AS t(s, i, d, f, n) ORDER BY n
)"""
_TOUCH = (
    ", touch AS (\n  UPDATE sessions SET updated_at = $1, fence = u.f "
    "FROM unnest($9::varchar[], $12::int8[]) AS u(id, f) WHERE sessions.id = u.id\n)"
)
# The main query wakes the other replicas (R-C1): one NOTIFY per session, "seq session_id"
# with the highest seq committed (`notify.events_payload`). NOTIFY is transactional: it is
# delivered when this statement commits, never for a write the database refused.
_NOTIFY = (
    f"SELECT pg_notify('{EVENTS_CHANNEL}', max(q)::text || ' ' || s) "
    "FROM unnest($2::varchar[], $3::int8[]) AS n(s, q) GROUP BY s"
)
# The general way (several statements in one transaction) ends with this one.
NOTIFY_AFTER = (
    f"SELECT pg_notify('{EVENTS_CHANNEL}', max(q)::text || ' ' || s) "
    "FROM unnest($1::varchar[], $2::int8[]) AS n(s, q) GROUP BY s"
)
# $10, $11, $12: the lease token (R-C1) of each event, message and touched session row;
# every row written carries its session's token, which the fence triggers check.
_FIRST_FIELD_PARAM = 13


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


@functools.lru_cache(maxsize=32)
def _column_sql_type(column: str) -> tuple[str, bool]:
    """(the Postgres array element type a column's values are sent as, whether it is JSON)."""
    from sqlalchemy.dialects import postgresql

    col_type = SessionRow.__table__.c[column].type
    if isinstance(col_type, JSON):
        return "text", True
    return col_type.compile(dialect=postgresql.dialect()), False  # type: ignore[no-untyped-call]


@functools.lru_cache(maxsize=64)
def _statement(field_sets: tuple[tuple[str, ...], ...]) -> str:
    """The statement for these sets of session columns (each set: one UPDATE … FROM
    unnest of one array per column, for all the sessions that change exactly those)."""
    ctes = [_HEAD]
    param = _FIRST_FIELD_PARAM
    for g, columns in enumerate(field_sets):
        arrays = [f"${param}::varchar[]"]
        sets = []
        for i, c in enumerate(columns):
            sql_type, is_json = _column_sql_type(c)
            arrays.append(f"${param + 1 + i}::{sql_type}[]")
            sets.append(f'"{c}" = u.c{i}' + ("::json" if is_json else ""))
        arrays.append(f"${param + 1 + len(columns)}::int8[]")
        param += 2 + len(columns)
        names = ", ".join(["id", *(f"c{i}" for i in range(len(columns))), "f"])
        ctes.append(
            f", f{g} AS (\n  UPDATE sessions SET {', '.join(sets)}, updated_at = $1, fence = u.f "
            f"FROM unnest({', '.join(arrays)}) AS u({names}) WHERE sessions.id = u.id\n)"
        )
    return "".join(ctes) + _TOUCH + "\n" + _NOTIFY


def notify_params(batches: list[Batch]) -> tuple[list[str], list[int]] | None:
    """The (session ids, seqs) of `NOTIFY_AFTER` for batches with events (None: none)."""
    sids = [b.session_id for b in batches for _ in b.events]
    if not sids:
        return None
    return sids, [e.seq for b in batches for e in b.events]


def _columns(rows: list[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """`rows` as one list per column (`width` empty lists for no rows)."""
    if not rows:
        return [[] for _ in range(width)]
    return [list(column) for column in zip(*rows, strict=True)]


# No rows: an empty array per column, without a call (tuples: shared, never changed).
_NO_EVENTS: tuple[tuple[()], ...] = ((), (), (), (), ())
_NO_MESSAGES: tuple[tuple[()], ...] = ((), (), (), ())


def one_statement(batches: list[Batch], now: datetime) -> tuple[str, tuple[Any, ...]] | None:
    """The statement and its parameters, or None when these batches need the general way."""
    if len(batches) == 1:  # (the common commit, one session's: no set of ids to build)
        only = batches[0]
        if only.truncate_from is not None or only.queue:
            return None
    elif len({b.session_id for b in batches}) != len(batches) or any(
        b.truncate_from is not None or b.queue for b in batches
    ):
        return None
    # Rows first, then one list per column (a transposition: no append per value). The
    # event's bytes are the codec's: not serialised again.
    events = [(b.session_id, e.seq, e.kind, e.data.decode(), b.fence) for b in batches for e in b.events]
    ev_sid, ev_seq, ev_kind, ev_payload, ev_fence = _columns(events, 5) if events else _NO_EVENTS
    messages = [(b.session_id, i, _dumps(m), b.fence) for b in batches for i, m in b.messages]
    msg_sid, msg_idx, msg_data, msg_fence = _columns(messages, 4) if messages else _NO_MESSAGES
    touched: list[str] = []
    touched_fence: list[int | None] = []
    groups: dict[tuple[str, ...], list[Batch]] = {}
    for b in batches:
        # `updated_at` is the commit's time whatever the fields say (as the general way).
        columns = tuple(sorted(c for c in b.session_fields if c != "updated_at"))
        if columns:
            groups.setdefault(columns, []).append(b)
        elif b.events or b.session_fields:
            touched.append(b.session_id)
            touched_fence.append(b.fence)
    params: list[Any] = [
        *(now, ev_sid, ev_seq, ev_kind, ev_payload, msg_sid, msg_idx, msg_data, touched),
        *(ev_fence, msg_fence, touched_fence),
    ]
    field_sets = tuple(sorted(groups))
    for columns in field_sets:
        members = groups[columns]
        params.append([b.session_id for b in members])
        for c in columns:
            is_json = _column_sql_type(c)[1]
            params.append([_dumps(b.session_fields[c]) if is_json else b.session_fields[c] for b in members])
        params.append([b.fence for b in members])
    return _statement(field_sets), tuple(params)


class Held:
    """The writer's autocommit connection as its common commit uses it: `adapted`
    (SQLAlchemy's DBAPI adapter of it), its dialect, the asyncpg connection and its
    `is_closed` — read once per connection, not per commit (each was a property or a
    `getattr` chain)."""

    __slots__ = ("adapted", "closed", "dialect", "driver")

    def __init__(self, adapted: Any, dialect: Dialect) -> None:
        self.adapted, self.dialect = adapted, dialect
        self.driver = adapted.driver_connection
        self.closed: Callable[[], bool] = self.driver.is_closed


def execute(driver: Any, sql: str, params: tuple[Any, ...]) -> Awaitable[Any]:
    """The statement on an asyncpg connection (prepared once per text: asyncpg's cache):
    its own awaitable, handed back as it is (no coroutine of ours per commit)."""
    done: Awaitable[Any] = driver.execute(sql, *params)
    return done


def failure(held: Held, sql: str, params: tuple[Any, ...], exc: BaseException) -> BaseException:
    """What a failed `execute` raises: SQLAlchemy's error over the driver's (as
    `exec_driver_sql` would), `exc` itself when there is none (a cancellation)."""
    return translated(held.adapted, held.dialect, sql, params, exc) if isinstance(exc, Exception) else exc


async def run(held: Held, sql: str, params: tuple[Any, ...]) -> None:
    """`one_statement`'s result on the writer's connection, its error translated."""
    try:
        await execute(held.driver, sql, params)
    except Exception as exc:
        error = failure(held, sql, params, exc)
        if error is exc:
            raise
        raise error from exc
