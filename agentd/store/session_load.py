"""Loading one stored session for its actor in one connection (issue 14, item 7): the row,
its queued prompts, the conversation, the last seq and the recent turn boundaries that
crash repair reads. One pooled connection and prebuilt statements (bound by parameter, so
SQLAlchemy's compiled cache serves them) instead of five checkouts each building its query:
a cold attach among many stored sessions pays for its rows, not for the plumbing."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, func, select

from agentd.store import queue_rows
from agentd.store.aio import AsyncConnection
from agentd.store.models import EventRow, MessageRow, SessionRow
from agentd.store.pg_driver import Driver
from agentd.store.records import SessionRecord, StoredEvent, session_record

SESSION = select(SessionRow).where(SessionRow.id == bindparam("sid"))
MESSAGES = select(MessageRow.data).where(MessageRow.session_id == bindparam("sid")).order_by(MessageRow.idx)
LAST_SEQ = select(func.max(EventRow.seq)).where(EventRow.session_id == bindparam("sid"))
LATEST = (
    select(EventRow.seq, EventRow.kind, EventRow.payload)
    .where(EventRow.session_id == bindparam("sid"), EventRow.kind.in_(bindparam("kinds", expanding=True)))
    .order_by(EventRow.seq.desc())
    .limit(bindparam("limit"))
)

EVENTS = (
    select(EventRow.seq, EventRow.kind, EventRow.payload)
    .where(EventRow.session_id == bindparam("sid"), EventRow.seq > bindparam("after"))
    .order_by(EventRow.seq)
)
EVENTS_PAGE = EVENTS.limit(bindparam("limit"))  # replay reads the log in pages
# The same on asyncpg itself (Postgres; `LIMIT NULL`: all of them).
EVENTS_DIRECT = (
    "SELECT seq, kind, payload FROM events WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
)
# Several sessions' pages in one statement (the log tails of a replica, issue 26 item 5):
# read i is (session $1[i], after $2[i], at most $3[i] events), its rows tagged with i.
EVENTS_MANY_DIRECT = (
    "SELECT r.i, e.seq, e.kind, e.payload "
    "FROM unnest($1::text[], $2::int8[], $3::int4[]) WITH ORDINALITY AS r(sid, after, lim, i) "
    "CROSS JOIN LATERAL (SELECT seq, kind, payload FROM events "
    "WHERE session_id = r.sid AND seq > r.after ORDER BY seq LIMIT r.lim) AS e "
    "ORDER BY r.i, e.seq"
)


@dataclasses.dataclass(frozen=True)
class LoadedSession:
    record: SessionRecord  # with its queue
    messages: list[dict[str, Any]]
    last_seq: int
    recent: list[StoredEvent]  # the newest events of the asked kinds, oldest first


async def record(conn: AsyncConnection, session_id: str) -> SessionRecord | None:
    """The session with its queued prompts (in order; None when there are none)."""
    row = (await conn.execute(SESSION, {"sid": session_id})).first()
    if row is None:
        return None
    queue = await queue_rows.load(conn, session_id)
    return dataclasses.replace(session_record(row), queue=queue or None)


async def messages(conn: AsyncConnection, session_id: str) -> list[dict[str, Any]]:
    return [r.data for r in (await conn.execute(MESSAGES, {"sid": session_id})).all()]


async def last_seq(conn: AsyncConnection, session_id: str) -> int:
    return int((await conn.execute(LAST_SEQ, {"sid": session_id})).scalar() or 0)


async def latest(
    conn: AsyncConnection, session_id: str, kinds: Sequence[str], limit: int
) -> list[StoredEvent]:
    """The newest `limit` events of the given kinds, oldest first."""
    params = {"sid": session_id, "kinds": list(kinds), "limit": limit}
    rows = (await conn.execute(LATEST, params)).all()
    return [StoredEvent(seq=r.seq, kind=r.kind, payload=r.payload) for r in reversed(rows)]


async def events(
    conn: AsyncConnection, session_id: str, after_seq: int, limit: int | None
) -> list[StoredEvent]:
    """Events after `after_seq` in seq order (at most `limit`)."""
    if limit is None:
        rows = (await conn.execute(EVENTS, {"sid": session_id, "after": after_seq})).all()
    else:
        rows = (
            await conn.execute(EVENTS_PAGE, {"sid": session_id, "after": after_seq, "limit": limit})
        ).all()
    return [StoredEvent(seq=r.seq, kind=r.kind, payload=r.payload) for r in rows]


async def events_direct(
    conn: Driver, session_id: str, after_seq: int, limit: int | None
) -> list[StoredEvent]:
    """`events` through a pooled connection's asyncpg connection (Postgres)."""
    rows = await conn.fetch(EVENTS_DIRECT, session_id, after_seq, limit)
    return [StoredEvent(seq=r["seq"], kind=r["kind"], payload=r["payload"]) for r in rows]


async def events_many_direct(conn: Driver, reads: Sequence[tuple[str, int, int]]) -> list[list[StoredEvent]]:
    """`events_direct` for several (session id, after seq, limit) reads in one round trip:
    each read's events, in the reads' order."""
    out: list[list[StoredEvent]] = [[] for _ in reads]
    if not reads:
        return out
    sids, afters, limits = (list(column) for column in zip(*reads, strict=True))
    for r in await conn.fetch(EVENTS_MANY_DIRECT, sids, afters, limits):
        out[r["i"] - 1].append(StoredEvent(seq=r["seq"], kind=r["kind"], payload=r["payload"]))
    return out


async def load(
    conn: AsyncConnection, session_id: str, recent_kinds: Sequence[str], recent_limit: int
) -> LoadedSession | None:
    found = await record(conn, session_id)
    if found is None:
        return None
    return LoadedSession(
        found,
        await messages(conn, session_id),
        await last_seq(conn, session_id),
        await latest(conn, session_id, recent_kinds, recent_limit),
    )
