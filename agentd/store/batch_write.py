"""One group commit's SQL: the statements scale with the tables touched, not the sessions.

All sessions' events go in one multi-row INSERT, all their messages in another, and the
`updated_at` of every session that only logged events in one UPDATE; only the rare writes
(a truncation, session fields, queued prompts) cost a statement per session. Each statement
is a round trip (three thread hops through aiosqlite), which is what a batch of many
sessions paid for before. Synchronous code: it runs in the SQLite writer's thread, or
through `AsyncConnection.run_sync` on Postgres.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Connection, bindparam, delete, insert, update

from agentd.store import queue_rows
from agentd.store.models import EventRow, MessageRow, SessionRow
from agentd.store.records import Batch

# Built once: a statement made per commit pays its construction and its cache-key walk
# (to find the compiled form) on every group commit; these carry their key memoised.
_INSERT_EVENTS = insert(EventRow)
_INSERT_MESSAGES = insert(MessageRow)
_TOUCH_SESSIONS = (
    update(SessionRow)
    .where(SessionRow.id.in_(bindparam("touched_ids", expanding=True)))
    .values(updated_at=bindparam("touched_at"), fence=bindparam("touched_fence"))
)


def apply_batches(conn: Connection, batches: list[Batch], now: datetime) -> None:
    """Apply the batches inside the caller's transaction. A session's truncation runs
    before its messages are inserted (the batch already dropped the writes it overrides)."""
    events = [
        {
            "session_id": b.session_id,
            "seq": e.seq,
            "kind": e.kind,
            "payload": orjson.Fragment(e.data),  # the column's serialiser writes these bytes as they are
            "created_at": now,
            "fence": b.fence,
        }
        for b in batches
        for e in b.events
    ]
    messages = [
        {"session_id": b.session_id, "idx": i, "data": m, "fence": b.fence}
        for b in batches
        for i, m in b.messages
    ]
    for b in batches:
        if b.truncate_from is not None:
            tail = (MessageRow.session_id == b.session_id) & (MessageRow.idx >= b.truncate_from)
            conn.execute(delete(MessageRow).where(tail))
    # executemany of one cached statement: one driver call each (sqlite3's executemany,
    # asyncpg's pipelined executemany), nothing recompiled per batch size.
    if events:
        conn.execute(_INSERT_EVENTS, events)
    if messages:
        conn.execute(_INSERT_MESSAGES, messages)
    touched: dict[int | None, list[str]] = {}  # by lease token: one statement without leases
    for b in batches:
        if b.queue:
            queue_rows.apply(conn, b.session_id, b.queue, b.fence)
        if b.session_fields:
            _update_session(conn, b.session_id, {**b.session_fields, "updated_at": now, "fence": b.fence})
        elif b.events:
            touched.setdefault(b.fence, []).append(b.session_id)
    for fence, ids in touched.items():
        conn.execute(_TOUCH_SESSIONS, {"touched_ids": ids, "touched_at": now, "touched_fence": fence})


def _update_session(conn: Connection, session_id: str, values: dict[str, Any]) -> None:
    # Bound as `.values(**values)` bound them (each column's type; a None on a JSON column
    # is JSON null either way), through one statement per set of columns.
    params = {f"v_{k}": v for k, v in values.items()}
    conn.execute(_session_update(tuple(sorted(values))), {"sid": session_id, **params})


@functools.lru_cache(maxsize=64)
def _session_update(columns: tuple[str, ...]) -> Any:
    """One statement per set of columns a turn updates (a handful): built and keyed once."""
    return (
        update(SessionRow)
        .where(SessionRow.id == bindparam("sid"))
        .values({c: bindparam(f"v_{c}") for c in columns})
    )
