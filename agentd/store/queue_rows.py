"""Queued prompts in the store, one row each (R-S3, R-E6).

A queue change reaches the store as a `QueueWrite`: rows to (re)write whole (a new
prompt, an edited text), rows to delete, and positions to move — so a change costs what
changed, not the size of the whole queue.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from agentd.store.aio import AsyncConnection
from agentd.store.models import QueuedPromptRow


@dataclass
class QueueWrite:
    upserts: list[dict[str, Any]] = field(default_factory=list)  # whole rows (without session_id)
    deletes: list[str] = field(default_factory=list)  # prompt ids
    # (prompt id, columns): a new position, a last editor — never the text
    updates: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.upserts or self.deletes or self.updates)


def apply(conn: Connection, session_id: str, writes: list[QueueWrite], fence: int | None = None) -> None:
    """Apply one session's queue writes in order, inside the caller's transaction (the
    group commit's synchronous code); every row written carries `fence` (R-C1)."""
    for w in writes:
        gone = [*w.deletes, *(r["id"] for r in w.upserts)]
        if gone:
            conn.execute(delete(QueuedPromptRow).where(QueuedPromptRow.id.in_(gone)))
        if w.upserts:
            conn.execute(
                insert(QueuedPromptRow), [{**r, "session_id": session_id, "fence": fence} for r in w.upserts]
            )
        for prompt_id, values in w.updates:
            conn.execute(
                update(QueuedPromptRow).where(QueuedPromptRow.id == prompt_id).values(**values, fence=fence)
            )


async def load(conn: AsyncConnection, session_id: str) -> list[dict[str, Any]]:
    """A session's queue, in order, as the actor restores it."""
    q = (
        select(QueuedPromptRow)
        .where(QueuedPromptRow.session_id == session_id)
        .order_by(QueuedPromptRow.position, QueuedPromptRow.id)
    )
    return [
        {
            "id": r.id,
            "position": r.position,
            "kind": r.kind,
            "version": r.version,
            "owner": r.owner,
            "lastEditor": r.last_editor,
            "sendNow": bool(r.send_now),
            "requestId": r.request_id,
            "blocks": r.blocks,
            "meta": r.meta or {},
        }
        for r in (await conn.execute(q)).all()
    ]


async def sessions_with_rows(conn: AsyncConnection) -> list[str]:
    q = select(QueuedPromptRow.session_id).distinct()
    return [r.session_id for r in (await conn.execute(q)).all()]


async def delete_session(conn: AsyncConnection, session_id: str) -> None:
    await conn.execute(delete(QueuedPromptRow).where(QueuedPromptRow.session_id == session_id))
