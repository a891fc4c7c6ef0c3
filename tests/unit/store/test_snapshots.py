"""File snapshots, turn marks and cuts (agentd/store/snapshots.py, R-T12) on SQLite and Postgres.

Seed 003: "快照（snapshot_before_mutating_tools，变更类工具执行前留底）"."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import insert

from agentd.store import snapshots as rows
from agentd.store.db import Store
from agentd.store.models import EventRow, utcnow
from agentd.store.snapshots import FileSnapshot, TurnCut, TurnMark


@pytest.fixture
async def store(migrated_db_url: str) -> AsyncIterator[Store]:
    s = await Store.open(migrated_db_url)
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


async def _started(store: Store, session_id: str, seq: int, turn_id: str, idx: int | None) -> None:
    payload: dict[str, object] = {"turnId": turn_id, "promptId": "p", "kind": "prompt"}
    if idx is not None:
        payload["messageIndex"] = idx
    async with store.engine.begin() as conn:
        await conn.execute(
            insert(EventRow).values(
                session_id=session_id, seq=seq, kind="turn_started", payload=payload, created_at=utcnow()
            )
        )


async def test_marks_come_from_turn_started_events_and_cuts_apply(store: Store) -> None:
    await store.create_session(id="s1", owner="alice", cwd="/w", mode="default", model="m")
    engine = store.engine
    await _started(store, "s1", 3, "t1", 0)
    await _started(store, "s1", 5, "local", None)  # a /command: not rewindable
    await _started(store, "s1", 9, "t2", 4)
    await rows.add_snapshot(engine, "s1", FileSnapshot("t1", "a.txt", "present", b"\x00one\n"), 5)
    await rows.add_snapshot(engine, "s1", FileSnapshot("t2", "b.txt", "absent", None), 0)
    await rows.add_snapshot(engine, "s1", FileSnapshot("t2", "big.bin", "too_large", None), 0)

    assert await rows.marks(engine, "s1", "turn_started") == [TurnMark("t1", 3, 0), TurnMark("t2", 9, 4)]
    assert await rows.marks(engine, "s1", "turn_started", after_seq=3) == [TurnMark("t2", 9, 4)]
    got = sorted(await rows.snapshots(engine, "s1", ["t1", "t2"]), key=lambda s: s.path)
    assert [(s.path, s.state, s.content) for s in got] == [
        ("a.txt", "present", b"\x00one\n"),
        ("b.txt", "absent", None),
        ("big.bin", "too_large", None),
    ]
    assert await rows.stored_bytes(engine, "s1") == 5

    await rows.add_cut(engine, "s1", TurnCut(0, 10, 0))  # /clear at seq 10
    await _started(store, "s1", 12, "t3", 1)  # after the clear: its own index stands
    marks = await rows.marks(engine, "s1", "turn_started")
    assert [(m.turn_id, m.message_idx) for m in marks] == [("t1", 0), ("t2", 0), ("t3", 1)]
    await rows.drop_turns(engine, "s1", ["t2", "t3"], 9, 13)
    assert [m.turn_id for m in await rows.marks(engine, "s1", "turn_started")] == ["t1"]
    assert [s.path for s in await rows.snapshots(engine, "s1", ["t1", "t2"])] == ["a.txt"]
    await _started(store, "s1", 14, "t4", 1)  # a turn after the rewind is rewindable again
    assert [m.turn_id for m in await rows.marks(engine, "s1", "turn_started")] == ["t1", "t4"]

    fork = await store.get_session("s1")
    assert fork is not None
    await store.fork_session(fork, "s2", 14)  # copied events, no snapshots: nothing to rewind
    assert await rows.marks(engine, "s2", "turn_started") == []

    assert await store.delete_session("s1")
    assert await rows.marks(engine, "s1", "turn_started") == []
    assert await rows.stored_bytes(engine, "s1") == 0
