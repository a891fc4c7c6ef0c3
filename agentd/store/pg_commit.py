"""A Postgres group commit in one round trip.

The common group commit (events, messages, session fields, every touched session's
`updated_at`) is one statement: data-modifying CTEs over the rows of json parameters, run on the
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

# The rows go as json parameters (arrays of rows, read back with `json_array_elements`),
# not as one array parameter per column: asyncpg checks every array and every element of
# one against three `collections.abc` classes (~88 Python calls per commit on the loop,
# ~9 % of a Postgres turn's), a text parameter not at all (issue 32). The json values
# (payloads, messages, JSON columns) go in flat arrays of their own, zipped with their rows
# by `ROWS FROM`: any `->` into a json value de-escapes every string in it, and a `\u0000`
# (valid in a json column) cannot be de-escaped; an element of a flat array is never
# looked into. A payload goes as the codec's own bytes, and a json array's element is the
# very text it was given: the rows are byte for byte what `p::json` of the text stored.
# WITH ORDINALITY … ORDER BY: rows get their ids in the batch's order, as executemany gave.
# `e` is read twice (the INSERT, the NOTIFY): Postgres materialises it, one parse.
_HEAD = """\
WITH e AS (
  SELECT r->>0 AS s, (r->>1)::int8 AS q, r->>2 AS k, p, (r->>3)::int8 AS f, n
  FROM ROWS FROM (json_array_elements($2::json), json_array_elements($3::json)) WITH ORDINALITY AS t(r, p, n)
), ev AS (
  INSERT INTO events (session_id, seq, kind, payload, created_at, fence)
  SELECT s, q, k, p, $1, f FROM e ORDER BY n
), msg AS (
  INSERT INTO messages (session_id, idx, data, fence)
  SELECT r->>0, (r->>1)::int4, d, (r->>2)::int8
  FROM ROWS FROM (json_array_elements($4::json), json_array_elements($5::json)) WITH ORDINALITY AS t(r, d, n)
  ORDER BY n
)"""
_TOUCH = (
    ", touch AS (\n  UPDATE sessions SET updated_at = $1, fence = (u->>1)::int8 "
    "FROM json_array_elements($6::json) AS u WHERE sessions.id = u->>0\n)"
)
# The main query wakes the other replicas (R-C1): one NOTIFY per session, "seq session_id"
# with the highest seq committed (`notify.events_payload`). NOTIFY is transactional: it is
# delivered when this statement commits, never for a write the database refused.
_NOTIFY = f"SELECT pg_notify('{EVENTS_CHANNEL}', max(q)::text || ' ' || s) FROM e GROUP BY s"
# The general way (several statements in one transaction) ends with this one.
NOTIFY_AFTER = (
    f"SELECT pg_notify('{EVENTS_CHANNEL}', max(q)::text || ' ' || s) "
    "FROM unnest($1::varchar[], $2::int8[]) AS n(s, q) GROUP BY s"
)
# Each row carries its session's lease token (R-C1, the last element), which the fence
# triggers check. $7 on: per set of session columns, its rows `[id, plain value…, token]`,
# then one flat array per JSON column.
_FIRST_FIELD_PARAM = 7


@functools.lru_cache(maxsize=32)
def _column_sql_type(column: str) -> tuple[str, bool]:
    """(the Postgres type a column's values are cast to from json text, whether it is JSON)."""
    from sqlalchemy.dialects import postgresql

    col_type = SessionRow.__table__.c[column].type
    if isinstance(col_type, JSON):
        return "json", True
    return col_type.compile(dialect=postgresql.dialect()), False  # type: ignore[no-untyped-call]


@functools.lru_cache(maxsize=64)
def _statement(field_sets: tuple[tuple[str, ...], ...]) -> str | None:
    """The statement for these sets of session columns (each set: one UPDATE … FROM the
    rows `[id, value…, token]` of one json parameter, for all the sessions that change
    exactly those); None for a time column: as text it would be read in the server's time
    zone (the general way binds it as a time)."""
    ctes = [_HEAD]
    param = _FIRST_FIELD_PARAM
    for g, columns in enumerate(field_sets):
        sets, arrays = [], [f"json_array_elements(${param}::json)"]
        plain = 0
        for c in columns:
            sql_type, is_json = _column_sql_type(c)
            if sql_type.startswith("TIMESTAMP"):
                return None
            if is_json:  # its value itself (a JSON null stays one, as `'null'::json`)
                arrays.append(f"json_array_elements(${param + len(arrays)}::json)")
                sets.append(f'"{c}" = u.j{len(arrays) - 1}')
            else:
                plain += 1
                sets.append(f'"{c}" = (u.r->>{plain})::{sql_type}')
        names = ", ".join(["r", *(f"j{i}" for i in range(1, len(arrays)))])
        ctes.append(
            f", f{g} AS (\n  UPDATE sessions SET {', '.join(sets)}, updated_at = $1, "
            f"fence = (u.r->>{plain + 1})::int8 "
            f"FROM ROWS FROM ({', '.join(arrays)}) AS u({names}) WHERE sessions.id = u.r->>0\n)"
        )
        param += len(arrays)
    return "".join(ctes) + _TOUCH + "\n" + _NOTIFY


def notify_params(batches: list[Batch]) -> tuple[list[str], list[int]] | None:
    """The (session ids, seqs) of `NOTIFY_AFTER` for batches with events (None: none)."""
    sids = [b.session_id for b in batches for _ in b.events]
    if not sids:
        return None
    return sids, [e.seq for b in batches for e in b.events]


_dumps_bytes = orjson.dumps


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
    # The event's bytes are the codec's: not serialised again, only joined.
    events = [[b.session_id, e.seq, e.kind, b.fence] for b in batches for e in b.events]
    payloads = b"[" + b",".join([e.data for b in batches for e in b.events]) + b"]"
    messages = [[b.session_id, i, b.fence] for b in batches for i, _ in b.messages]
    data = [m for b in batches for _, m in b.messages]
    touched: list[list[Any]] = []
    groups: dict[tuple[str, ...], list[Batch]] = {}
    for b in batches:
        fields = b.session_fields
        # `updated_at` is the commit's time whatever the fields say (as the general way).
        columns = tuple(sorted(fields)) if fields else ()
        if "updated_at" in columns:
            columns = tuple(c for c in columns if c != "updated_at")
        if columns:
            groups.setdefault(columns, []).append(b)
        elif b.events or fields:
            touched.append([b.session_id, b.fence])
    field_sets = tuple(sorted(groups))
    sql = _statement(field_sets)
    if sql is None:
        return None
    params: list[Any] = [
        now,
        _dumps_bytes(events).decode(),
        payloads.decode(),
        _dumps_bytes(messages).decode(),
        _dumps_bytes(data).decode(),
        _dumps_bytes(touched).decode(),
    ]
    for columns in field_sets:
        members = groups[columns]
        plain = [c for c in columns if not _column_sql_type(c)[1]]
        params.append(
            _dumps_bytes(
                [[b.session_id, *[b.session_fields[c] for c in plain], b.fence] for b in members]
            ).decode()
        )
        for c in columns:
            if _column_sql_type(c)[1]:
                params.append(_dumps_bytes([b.session_fields[c] for b in members]).decode())
    return sql, tuple(params)


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
