"""A session's rows out of the store and into one (issue 33 item 1): what `export_codec.py`
encodes. Reading is one connection; importing is one transaction — a failure leaves
nothing of the session behind.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from agentd.store import queue_rows, session_load
from agentd.store.aio import AsyncConnection, AsyncEngine
from agentd.store.export_codec import SessionBundle, Snapshot
from agentd.store.models import (
    EventRow,
    FileSnapshotRow,
    MessageRow,
    QueuedPromptRow,
    SessionRow,
    TurnCutRow,
    utcnow,
)
from agentd.store.records import utc


class ImportConflict(ValueError):
    """The import cannot go in as asked (e.g. the session id is taken)."""


async def read_bundle(engine: AsyncEngine, session_id: str) -> SessionBundle | None:
    """The session's exportable rows, or None when there is no such session. Only the
    owner's queued prompts go (a teammate's prompt is its own)."""
    async with engine.connect() as conn:
        row = (await conn.execute(select(SessionRow).where(SessionRow.id == session_id))).first()
        if row is None:
            return None
        session = {
            "id": row.id,
            "title": row.title,
            "cwd": row.cwd,
            "mode": row.mode,
            "plan": bool(row.plan),
            "model": row.model,
            "agent": row.agent,
            "permissionMemory": row.permission_memory or {},
            "goal": row.goal,
            "usage": row.usage,
            "createdAt": utc(row.created_at).isoformat(),
            "updatedAt": utc(row.updated_at).isoformat(),
        }
        bundle = SessionBundle(session)
        events = await session_load.events(conn, session_id, 0, None)
        bundle.events = [(e.seq, e.kind, e.payload) for e in events]
        bundle.messages = await session_load.messages(conn, session_id)
        bundle.queue = [q for q in await queue_rows.load(conn, session_id) if q["owner"] == row.owner]
        snaps = select(FileSnapshotRow).where(FileSnapshotRow.session_id == session_id)
        for s in (await conn.execute(snaps.order_by(FileSnapshotRow.created_at, FileSnapshotRow.path))).all():
            bundle.snapshots.append(Snapshot(s.turn_id, s.path, s.state, s.size, s.content))
        cuts = select(TurnCutRow).where(TurnCutRow.session_id == session_id).order_by(TurnCutRow.id)
        bundle.cuts = [(c.from_seq, c.to_seq, c.message_idx) for c in (await conn.execute(cuts)).all()]
    return bundle


def _when(value: Any) -> datetime:
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    return utcnow()


async def _id_taken(conn: AsyncConnection, session_id: str) -> bool:
    return (await conn.execute(select(SessionRow.id).where(SessionRow.id == session_id))).first() is not None


async def write_bundle(
    engine: AsyncEngine, bundle: SessionBundle, *, owner: str, cwd: str, new_id: str | None = None
) -> str:
    """Insert the session in one transaction; its id is the exported one unless that is
    taken here (or `new_id` is given): then a fresh one. Returns the id it got."""
    try:
        return await _write(engine, bundle, owner, cwd, new_id)
    except IntegrityError as exc:  # the transaction rolled back: nothing of it stays
        first = str(exc.orig).splitlines()[0] if exc.orig is not None else type(exc).__name__
        raise ImportConflict(f"a row conflicts with one stored here ({first})") from None


async def _write(engine: AsyncEngine, bundle: SessionBundle, owner: str, cwd: str, new_id: str | None) -> str:
    s = bundle.session
    async with engine.begin() as conn:
        sid = new_id or str(s.get("id") or "")
        renamed = not sid or await _id_taken(conn, sid)
        if renamed:
            if new_id:
                raise ImportConflict(f"session id {new_id} is already taken")
            sid = f"sess_{uuid.uuid4().hex}"
        await conn.execute(
            insert(SessionRow).values(
                id=sid,
                owner=owner,
                cwd=cwd,
                title=s.get("title"),
                mode=s["mode"],
                plan=bool(s.get("plan")),
                model=s["model"],
                agent=s["agent"],
                permission_memory=s.get("permissionMemory") or {},
                goal=s.get("goal"),
                usage=s.get("usage"),
                created_at=_when(s.get("createdAt")),
                updated_at=_when(s.get("updatedAt")),
            )
        )
        if bundle.events:
            rows = [{"session_id": sid, "seq": q, "kind": k, "payload": p} for q, k, p in bundle.events]
            await conn.execute(insert(EventRow), rows)
        if bundle.messages:
            rows = [{"session_id": sid, "idx": i, "data": d} for i, d in enumerate(bundle.messages)]
            await conn.execute(insert(MessageRow), rows)
        if bundle.queue:
            rows = [_queued(sid, q, owner, renamed) for q in bundle.queue]
            await conn.execute(insert(QueuedPromptRow), rows)
        if bundle.snapshots:
            rows = [
                {
                    "session_id": sid,
                    "turn_id": n.turn_id,
                    "path": n.path,
                    "state": n.state,
                    "size": n.size,
                    "content": n.content,
                    "created_at": utcnow(),
                }
                for n in bundle.snapshots
            ]
            await conn.execute(insert(FileSnapshotRow), rows)
        if bundle.cuts:
            rows = [
                {"session_id": sid, "from_seq": f, "to_seq": t, "message_idx": m} for f, t, m in bundle.cuts
            ]
            await conn.execute(insert(TurnCutRow), rows)
    return sid


def _queued(session_id: str, q: dict[str, Any], owner: str, renamed: bool) -> dict[str, Any]:
    # Prompt ids are unique across the store: a session imported beside its original gets new ones.
    return {
        "id": f"q_{uuid.uuid4().hex[:16]}" if renamed else q["id"],
        "session_id": session_id,
        "position": int(q.get("position") or 0),
        "kind": q["kind"],
        "version": int(q.get("version") or 1),
        "owner": owner,
        "last_editor": owner,
        "send_now": bool(q.get("sendNow")),
        "request_id": q.get("requestId"),
        "blocks": q["blocks"],
        "meta": q.get("meta") or {},
    }
