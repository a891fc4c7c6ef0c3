"""File snapshots and turn marks (R-T12): what `_agentd/session/rewind` restores.

Seed 003: "快照（snapshot_before_mutating_tools，变更类工具执行前留底）" — before a mutating
tool runs, the file's prior state is kept. Each row is written (and committed) before the
change it guards, so a crash after the change still finds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from server.store.models import FileSnapshotRow, TurnMarkRow, utcnow


@dataclass(frozen=True)
class TurnMark:
    turn_id: str
    seq: int
    message_idx: int


@dataclass(frozen=True)
class FileSnapshot:
    turn_id: str
    path: str
    state: str  # present | absent | too_large
    content: bytes | None


async def add_mark(engine: AsyncEngine, session_id: str, mark: TurnMark) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            insert(TurnMarkRow).values(
                session_id=session_id, turn_id=mark.turn_id, seq=mark.seq, message_idx=mark.message_idx
            )
        )


async def add_snapshot(engine: AsyncEngine, session_id: str, snap: FileSnapshot, size: int) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            insert(FileSnapshotRow).values(
                session_id=session_id,
                turn_id=snap.turn_id,
                path=snap.path,
                state=snap.state,
                size=size,
                content=snap.content,
                created_at=utcnow(),
            )
        )


async def marks(engine: AsyncEngine, session_id: str) -> list[TurnMark]:
    """The session's turn marks, oldest first."""
    q = select(TurnMarkRow).where(TurnMarkRow.session_id == session_id).order_by(TurnMarkRow.seq)
    async with engine.connect() as conn:
        rows = (await conn.execute(q)).all()
    return [TurnMark(r.turn_id, r.seq, r.message_idx) for r in rows]


async def snapshots(engine: AsyncEngine, session_id: str, turn_ids: Sequence[str]) -> list[FileSnapshot]:
    q = select(FileSnapshotRow).where(
        FileSnapshotRow.session_id == session_id, FileSnapshotRow.turn_id.in_(list(turn_ids))
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(q)).all()
    return [FileSnapshot(r.turn_id, r.path, r.state, r.content) for r in rows]


async def stored_bytes(engine: AsyncEngine, session_id: str) -> int:
    q = select(func.coalesce(func.sum(FileSnapshotRow.size), 0)).where(
        FileSnapshotRow.session_id == session_id
    )
    async with engine.connect() as conn:
        return int((await conn.execute(q)).scalar_one())


async def drop_turns(engine: AsyncEngine, session_id: str, turn_ids: Sequence[str]) -> None:
    """Forget rewound turns: their marks and snapshots (a later rewind starts from here)."""
    ids = list(turn_ids)
    async with engine.begin() as conn:
        await conn.execute(
            delete(FileSnapshotRow).where(
                FileSnapshotRow.session_id == session_id, FileSnapshotRow.turn_id.in_(ids)
            )
        )
        await conn.execute(
            delete(TurnMarkRow).where(TurnMarkRow.session_id == session_id, TurnMarkRow.turn_id.in_(ids))
        )


async def clear_marks(engine: AsyncEngine, session_id: str) -> None:
    """The conversation was emptied: every earlier turn now starts at message 0."""
    async with engine.begin() as conn:
        await conn.execute(
            update(TurnMarkRow).where(TurnMarkRow.session_id == session_id).values(message_idx=0)
        )


async def delete_session(conn: AsyncConnection, session_id: str) -> None:
    await conn.execute(delete(FileSnapshotRow).where(FileSnapshotRow.session_id == session_id))
    await conn.execute(delete(TurnMarkRow).where(TurnMarkRow.session_id == session_id))
