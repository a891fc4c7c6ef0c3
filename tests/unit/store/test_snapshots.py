"""File snapshots and turn marks (server/store/snapshots.py, R-T12) on SQLite and Postgres.

Seed 003: "快照（snapshot_before_mutating_tools，变更类工具执行前留底）"."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from server.store import snapshots as rows
from server.store.db import Store
from server.store.snapshots import FileSnapshot, TurnMark


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    s = await Store.open(db_url)
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


async def test_marks_and_snapshots_round_trip_and_rewound_turns_are_forgotten(store: Store) -> None:
    await store.create_session(id="s1", owner="alice", cwd="/w", mode="default", model="m")
    engine = store.engine
    await rows.add_mark(engine, "s1", TurnMark("t2", 9, 4))
    await rows.add_mark(engine, "s1", TurnMark("t1", 3, 0))
    await rows.add_snapshot(engine, "s1", FileSnapshot("t1", "a.txt", "present", b"\x00one\n"), 5)
    await rows.add_snapshot(engine, "s1", FileSnapshot("t2", "b.txt", "absent", None), 0)
    await rows.add_snapshot(engine, "s1", FileSnapshot("t2", "big.bin", "too_large", None), 0)

    assert await rows.marks(engine, "s1") == [TurnMark("t1", 3, 0), TurnMark("t2", 9, 4)]
    got = sorted(await rows.snapshots(engine, "s1", ["t1", "t2"]), key=lambda s: s.path)
    assert [(s.path, s.state, s.content) for s in got] == [
        ("a.txt", "present", b"\x00one\n"),
        ("b.txt", "absent", None),
        ("big.bin", "too_large", None),
    ]
    assert await rows.stored_bytes(engine, "s1") == 5

    await rows.clear_marks(engine, "s1")
    assert [m.message_idx for m in await rows.marks(engine, "s1")] == [0, 0]
    await rows.drop_turns(engine, "s1", ["t2"])
    assert [m.turn_id for m in await rows.marks(engine, "s1")] == ["t1"]
    assert [s.path for s in await rows.snapshots(engine, "s1", ["t1", "t2"])] == ["a.txt"]

    assert await store.delete_session("s1")
    assert await rows.marks(engine, "s1") == []
    assert await rows.stored_bytes(engine, "s1") == 0
