"""File snapshots and turn marks (R-T12): what `_agentd/session/rewind` restores.

Seed 003: "快照（snapshot_before_mutating_tools，变更类工具执行前留底）" — before a mutating
tool runs, the file's prior state is kept. Each row is written (and committed) before the
change it guards, so a crash after the change still finds it. Turn marks are the
`turn_started` events (`messageIndex`: the conversation's length before the prompt), which
the group commit writes anyway: a turn that changes no file writes nothing here. Only a
rewind and `/clear` add a `turn_cuts` row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import delete, func, insert, select

from agentd.store.aio import AsyncConnection, AsyncEngine
from agentd.store.models import EventRow, FileSnapshotRow, TurnCutRow, utcnow


@dataclass(frozen=True)
class TurnMark:
    turn_id: str
    seq: int
    message_idx: int


@dataclass(frozen=True)
class TurnCut:
    """Turns started in [from_seq, to_seq]: undone (`message_idx` None) or their conversation
    cut to at most `message_idx` messages (`/clear`: 0)."""

    from_seq: int
    to_seq: int
    message_idx: int | None


@dataclass(frozen=True)
class FileSnapshot:
    turn_id: str
    path: str
    state: str  # present | absent | too_large
    content: bytes | None


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


async def marks(
    engine: AsyncEngine, session_id: str, started_kind: str, after_seq: int = 0
) -> list[TurnMark]:
    """The session's rewindable turns after `after_seq`, oldest first: its `turn_started`
    events that carry `messageIndex` (turns a rewind can undo), less the turns the cuts
    undid, with the conversation cuts applied. Only events of that kind are read."""
    q = (
        select(EventRow.seq, EventRow.payload)
        .where(EventRow.session_id == session_id, EventRow.kind == started_kind, EventRow.seq > after_seq)
        .order_by(EventRow.seq)
    )
    c = select(TurnCutRow).where(TurnCutRow.session_id == session_id, TurnCutRow.to_seq > after_seq)
    async with engine.connect() as conn:
        started = (await conn.execute(q)).all()
        cuts = [TurnCut(r.from_seq, r.to_seq, r.message_idx) for r in (await conn.execute(c)).all()]
    found: list[TurnMark] = []
    for r in started:
        idx = r.payload.get("messageIndex")
        if not isinstance(idx, int):
            continue  # a local /command or a compaction job: nothing to undo
        undone = False
        for cut in cuts:
            if cut.from_seq <= r.seq <= cut.to_seq:
                if cut.message_idx is None:
                    undone = True
                    break
                idx = min(idx, cut.message_idx)
        if not undone:
            found.append(TurnMark(str(r.payload["turnId"]), r.seq, idx))
    return found


async def add_cut(engine: AsyncEngine, session_id: str, cut: TurnCut) -> None:
    async with engine.begin() as conn:
        await _insert_cut(conn, session_id, cut)


async def _insert_cut(conn: AsyncConnection, session_id: str, cut: TurnCut) -> None:
    await conn.execute(
        insert(TurnCutRow).values(
            session_id=session_id, from_seq=cut.from_seq, to_seq=cut.to_seq, message_idx=cut.message_idx
        )
    )


async def snapshots(engine: AsyncEngine, session_id: str, turn_ids: Sequence[str]) -> list[FileSnapshot]:
    q = select(FileSnapshotRow).where(
        FileSnapshotRow.session_id == session_id, FileSnapshotRow.turn_id.in_(list(turn_ids))
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(q)).all()
    return [FileSnapshot(r.turn_id, r.path, r.state, r.content) for r in rows]


async def session_snapshots(engine: AsyncEngine, session_id: str) -> list[FileSnapshot]:
    """Every snapshot the session keeps (its turns not rewound), oldest first."""
    q = (
        select(FileSnapshotRow)
        .where(FileSnapshotRow.session_id == session_id)
        .order_by(FileSnapshotRow.created_at, FileSnapshotRow.path)
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


async def drop_turns(
    engine: AsyncEngine, session_id: str, turn_ids: Sequence[str], from_seq: int, to_seq: int
) -> None:
    """Forget rewound turns (those started in [from_seq, to_seq]): their snapshots go, a cut
    marks them undone (a later rewind starts from here). One transaction."""
    async with engine.begin() as conn:
        await conn.execute(
            delete(FileSnapshotRow).where(
                FileSnapshotRow.session_id == session_id, FileSnapshotRow.turn_id.in_(list(turn_ids))
            )
        )
        await _insert_cut(conn, session_id, TurnCut(from_seq, to_seq, None))


async def fork_cut(conn: AsyncConnection, session_id: str, up_to_seq: int) -> None:
    """A fork copies the events, not the snapshots: its copied turns cannot be rewound."""
    await _insert_cut(conn, session_id, TurnCut(0, up_to_seq, None))


async def delete_session(conn: AsyncConnection, session_id: str) -> None:
    await conn.execute(delete(FileSnapshotRow).where(FileSnapshotRow.session_id == session_id))
    await conn.execute(delete(TurnCutRow).where(TurnCutRow.session_id == session_id))
