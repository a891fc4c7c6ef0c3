"""The store (agentd/store/db.py) against a real database: every test runs once on SQLite
and once on Postgres (the `db_url` fixture gives a fresh, empty database each time)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, update
from sqlalchemy.exc import IntegrityError

from agentd.store import EventWrite
from agentd.store.db import Batch, SessionRecord, Store, StoredEvent, alembic_config
from agentd.store.models import SessionRow
from tests.support.databases import event_write

HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()


@pytest.fixture
async def store(migrated_db_url: str) -> AsyncIterator[Store]:
    s = await Store.open(migrated_db_url)
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


async def add_session(store: Store, sid: str, *, owner: str = "alice", cwd: str = "/w") -> SessionRecord:
    return await store.create_session(id=sid, owner=owner, cwd=cwd, mode="default", model="m")


def ev(seq: int, kind: str = "agent_message", **payload: Any) -> EventWrite:
    return event_write(seq, kind, payload or {"n": seq})


async def set_updated_at(store: Store, sid: str, at: datetime) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(update(SessionRow).where(SessionRow.id == sid).values(updated_at=at))


def _schema(sync_conn: Any) -> dict[str, Any]:
    insp = inspect(sync_conn)
    return {
        "tables": set(insp.get_table_names()),
        "columns": {t: {c["name"] for c in insp.get_columns(t)} for t in ("sessions", "events", "messages")},
        "uniques": {
            t: {tuple(u["column_names"]) for u in insp.get_unique_constraints(t)}
            for t in ("events", "messages")
        },
        "indexes": {tuple(i["column_names"]) for i in insp.get_indexes("sessions")},
    }


# -------------------------------------------------------------------------- migrations


async def test_migrate_creates_the_schema_and_reports_head(db_url: str) -> None:
    store = await Store.open(db_url)
    try:
        # A fresh database has no revision yet; the scripts' head is known regardless.
        assert await store.migration_status() == (None, HEAD)
        await store.migrate()
        assert await store.migration_status() == (HEAD, HEAD)
        async with store.engine.connect() as conn:
            schema = await conn.run_sync(_schema)
        assert {"sessions", "events", "messages", "alembic_version"} <= schema["tables"]
        assert schema["columns"]["sessions"] >= {
            "id", "owner", "cwd", "title", "mode", "model", "agent",
            "permission_memory", "created_at", "updated_at",
        }  # fmt: skip
        assert schema["columns"]["events"] >= {"id", "session_id", "seq", "kind", "payload", "created_at"}
        assert schema["columns"]["messages"] >= {"id", "session_id", "idx", "data"}
        assert ("session_id", "seq") in schema["uniques"]["events"]
        assert ("session_id", "idx") in schema["uniques"]["messages"]
        assert ("owner", "updated_at", "id") in schema["indexes"]
        await store.ping()
    finally:
        await store.close()


async def test_migrate_twice_is_a_noop_and_keeps_data(db_url: str) -> None:
    store = await Store.open(db_url)
    try:
        await store.migrate()
        await add_session(store, "s1")
        await store.commit([Batch("s1", events=[ev(1)], messages=[(0, {"role": "user", "content": "hi"})])])
        await store.migrate()  # same engine
        assert await store.migration_status() == (HEAD, HEAD)
    finally:
        await store.close()
    again = await Store.open(db_url)  # a new engine, as after a restart
    try:
        await again.migrate()
        assert await again.migration_status() == (HEAD, HEAD)
        assert (await again.get_session("s1")) is not None
        assert [e.seq for e in await again.read_events("s1")] == [1]
        assert await again.load_messages("s1") == [{"role": "user", "content": "hi"}]
    finally:
        await again.close()


# -------------------------------------------------------------------------- sessions


async def test_create_and_get_session(store: Store) -> None:
    created = await store.create_session(
        id="sess_1", owner="alice", cwd="/work/project", mode="plan", model="gpt-x", agent="coder"
    )
    assert created.id == "sess_1" and created.owner == "alice"
    got = await store.get_session("sess_1")
    assert got is not None
    assert (got.id, got.owner, got.cwd, got.mode, got.model, got.agent) == (
        "sess_1", "alice", "/work/project", "plan", "gpt-x", "coder",
    )  # fmt: skip
    assert got.title is None
    assert got.permission_memory == {}
    assert isinstance(got.created_at, datetime) and isinstance(got.updated_at, datetime)
    assert await store.get_session("sess_missing") is None
    # The id is the primary key.
    with pytest.raises(IntegrityError):
        await add_session(store, "sess_1")


async def test_session_fields_update_title_mode_and_permission_memory(store: Store) -> None:
    await add_session(store, "s1")
    await store.commit(
        [
            Batch(
                "s1",
                session_fields={
                    "title": "Fix the bug",
                    "mode": "bypass",
                    "permission_memory": {"bash": "allow_always"},
                },
            )
        ]
    )
    got = await store.get_session("s1")
    assert got is not None
    assert (got.title, got.mode, got.permission_memory) == ("Fix the bug", "bypass", {"bash": "allow_always"})


# -------------------------------------------------------------------------- events and messages


async def test_commit_batches_of_two_sessions_in_one_call(store: Store) -> None:
    await add_session(store, "a")
    await add_session(store, "b")
    payload = {"messageId": "m1", "text": "héllo ✓", "nested": {"list": [1, 2, {"x": None}]}}
    await store.commit(
        [
            Batch(
                "a",
                events=[ev(1, "user_message", text="q"), event_write(2, "agent_message", payload)],
                messages=[(0, {"role": "user", "content": "q"}), (1, {"role": "assistant", "content": "a"})],
            ),
            Batch("b", events=[ev(1, "turn_started"), ev(2, "turn_ended")], messages=[(0, {"role": "user"})]),
        ]
    )
    a_events = await store.read_events("a")
    assert [(e.seq, e.kind) for e in a_events] == [(1, "user_message"), (2, "agent_message")]
    assert a_events[1].payload == payload  # JSON round trip, unicode and nesting included
    assert [(e.seq, e.kind) for e in await store.read_events("b")] == [(1, "turn_started"), (2, "turn_ended")]
    assert await store.load_messages("a") == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"},
    ]
    assert await store.load_messages("b") == [{"role": "user"}]
    assert await store.last_seq("a") == 2 and await store.last_seq("b") == 2


async def test_duplicate_seq_is_rejected_and_the_whole_group_commit_rolls_back(store: Store) -> None:
    await add_session(store, "a")
    await add_session(store, "b")
    await store.commit([Batch("a", events=[ev(1), ev(2)]), Batch("b", events=[ev(1)])])
    # The same seq in another session is fine (the constraint is per session)...
    await store.commit([Batch("b", events=[ev(2)])])
    # ...but a duplicate (session_id, seq) is refused, and nothing of that commit lands:
    # not the other session's batch, not the messages of the offending batch.
    with pytest.raises(IntegrityError):
        await store.commit(
            [
                Batch("b", events=[ev(3)], messages=[(0, {"role": "user", "content": "lost"})]),
                Batch("a", events=[ev(2, "duplicate")], messages=[(0, {"role": "user", "content": "lost"})]),
            ]
        )
    assert [(e.seq, e.payload) for e in await store.read_events("a")] == [(1, {"n": 1}), (2, {"n": 2})]
    assert [e.seq for e in await store.read_events("b")] == [1, 2]
    assert await store.load_messages("a") == [] and await store.load_messages("b") == []
    # A duplicate inside a single batch is refused too.
    with pytest.raises(IntegrityError):
        await store.commit([Batch("a", events=[ev(3), ev(3)])])
    assert await store.last_seq("a") == 2


async def test_read_events_after_seq_and_limit(store: Store) -> None:
    await add_session(store, "a")
    await add_session(store, "other")
    # Committed out of order and interleaved with another session: reads are by seq.
    await store.commit([Batch("a", events=[ev(s) for s in (3, 1, 2)]), Batch("other", events=[ev(1)])])
    await store.commit([Batch("a", events=[ev(s) for s in range(4, 11)])])
    assert [e.seq for e in await store.read_events("a")] == list(range(1, 11))
    assert [e.seq for e in await store.read_events("a", after_seq=7)] == [8, 9, 10]
    assert [e.seq for e in await store.read_events("a", limit=3)] == [1, 2, 3]
    assert [e.seq for e in await store.read_events("a", after_seq=4, limit=2)] == [5, 6]
    assert await store.read_events("a", after_seq=10) == []
    assert await store.read_events("nobody") == []
    first = (await store.read_events("a", after_seq=2, limit=1))[0]
    assert first == StoredEvent(3, "agent_message", {"n": 3})


async def test_last_seq(store: Store) -> None:
    await add_session(store, "a")
    assert await store.last_seq("a") == 0
    assert await store.last_seq("missing") == 0
    await store.commit([Batch("a", events=[ev(1), ev(2)])])
    assert await store.last_seq("a") == 2
    await store.commit([Batch("a", events=[ev(7)])])  # gaps are allowed; the max counts
    assert await store.last_seq("a") == 7


async def test_load_messages_in_idx_order(store: Store) -> None:
    await add_session(store, "a")
    await add_session(store, "b")
    await store.commit(
        [
            Batch("a", messages=[(2, {"i": 2}), (0, {"i": 0})]),
            Batch("b", messages=[(0, {"b": 0})]),
        ]
    )
    await store.commit([Batch("a", messages=[(1, {"i": 1}), (3, {"i": 3})])])
    assert await store.load_messages("a") == [{"i": 0}, {"i": 1}, {"i": 2}, {"i": 3}]
    assert await store.load_messages("b") == [{"b": 0}]
    assert await store.load_messages("missing") == []
    # The per-session idx is unique: rewriting a slot needs truncate_from.
    with pytest.raises(IntegrityError):
        await store.commit([Batch("a", messages=[(1, {"i": "again"})])])
    assert await store.load_messages("a") == [{"i": 0}, {"i": 1}, {"i": 2}, {"i": 3}]


async def test_truncate_from_drops_the_tail_then_writes(store: Store) -> None:
    await add_session(store, "a")
    await add_session(store, "b")
    await store.commit(
        [
            Batch("a", messages=[(i, {"i": i}) for i in range(5)]),
            Batch("b", messages=[(i, {"b": i}) for i in range(5)]),
        ]
    )
    # Drop idx >= 2 and write new messages in their place, in one batch.
    await store.commit([Batch("a", truncate_from=2, messages=[(2, {"i": "2b"}), (3, {"i": "3b"})])])
    assert await store.load_messages("a") == [{"i": 0}, {"i": 1}, {"i": "2b"}, {"i": "3b"}]
    # A pure truncation (an otherwise empty batch is not empty).
    only_truncate = Batch("a", truncate_from=1)
    assert not only_truncate.empty() and Batch("a").empty()
    await store.commit([only_truncate])
    assert await store.load_messages("a") == [{"i": 0}]
    # Other sessions are untouched.
    assert await store.load_messages("b") == [{"b": i} for i in range(5)]


# -------------------------------------------------------------------------- listing


async def test_list_sessions_filters_by_owner_and_cwd_newest_first(store: Store) -> None:
    base = datetime(2024, 1, 1, tzinfo=UTC)
    for i, (sid, owner, cwd) in enumerate(
        [("s1", "alice", "/p"), ("s2", "bob", "/p"), ("s3", "alice", "/q"), ("s4", "alice", "/p")]
    ):
        await add_session(store, sid, owner=owner, cwd=cwd)
        await set_updated_at(store, sid, base + timedelta(minutes=i))
    assert [r.id for r in await store.list_sessions(owner="alice")] == ["s4", "s3", "s1"]
    assert [r.id for r in await store.list_sessions(owner="bob")] == ["s2"]
    assert await store.list_sessions(owner="carol") == []
    assert [r.id for r in await store.list_sessions(owner="alice", cwd="/p")] == ["s4", "s1"]
    assert [r.id for r in await store.list_sessions(owner="alice", limit=2)] == ["s4", "s3"]
    # Activity (an event commit) bumps updated_at: s1 becomes the newest.
    await store.commit([Batch("s1", events=[ev(1)])])
    assert [r.id for r in await store.list_sessions(owner="alice")] == ["s1", "s4", "s3"]
    # So does a session-field update (a title), but a message-only write does not.
    await store.commit([Batch("s3", session_fields={"title": "t"})])
    assert (await store.list_sessions(owner="alice"))[0].id == "s3"
    before = {r.id: r.updated_at for r in await store.list_sessions(owner="alice")}
    await store.commit([Batch("s4", messages=[(0, {"role": "user"})])])
    assert {r.id: r.updated_at for r in await store.list_sessions(owner="alice")} == before


async def test_list_sessions_before_cursor_pages_without_gaps_or_duplicates(store: Store) -> None:
    base = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    # Five sessions; s_b and s_c share one updated_at so the id breaks the tie.
    stamps = {
        "s_a": base + timedelta(seconds=4),
        "s_b": base + timedelta(seconds=3),
        "s_c": base + timedelta(seconds=3),
        "s_d": base + timedelta(seconds=2),
        "s_e": base + timedelta(seconds=1),
    }
    for sid, at in stamps.items():
        await add_session(store, sid)
        await set_updated_at(store, sid, at)
    await add_session(store, "s_bob", owner="bob")
    expected = ["s_a", "s_c", "s_b", "s_d", "s_e"]  # newest first, then id descending
    assert [r.id for r in await store.list_sessions(owner="alice")] == expected

    seen: list[str] = []
    cursor: tuple[datetime, str] | None = None
    while True:
        page = await store.list_sessions(owner="alice", before=cursor, limit=2)
        if not page:
            break
        seen += [r.id for r in page]
        cursor = (page[-1].updated_at, page[-1].id)  # exactly what the server's cursor holds
    assert seen == expected
    # The cursor of one row returns strictly older rows (its tie partner with a lower id included).
    rest = await store.list_sessions(owner="alice", before=(stamps["s_c"], "s_c"))
    assert [r.id for r in rest] == ["s_b", "s_d", "s_e"]
    # An aware UTC cursor and the stored value compare the same on both databases.
    rest = await store.list_sessions(owner="alice", before=(base + timedelta(seconds=2), "zzz"))
    assert [r.id for r in rest] == ["s_d", "s_e"]


async def test_updated_at_round_trips_as_the_same_instant(store: Store) -> None:
    at = datetime(2024, 2, 3, 4, 5, 6, 789000, tzinfo=UTC)
    await add_session(store, "s1")
    await set_updated_at(store, "s1", at)
    got = await store.get_session("s1")
    assert got is not None
    assert got.updated_at == at


async def test_session_timestamps_read_back_timezone_aware(store: Store) -> None:
    # Regression: SQLite hands back naive datetimes; records must be aware UTC on every backend.
    created = await add_session(store, "s1")
    assert created.updated_at.tzinfo is not None  # what create_session returns is aware...
    got = await store.get_session("s1")
    assert got is not None
    listed = (await store.list_sessions(owner="alice"))[0]
    # ...and so must be what is read back, on every backend.
    for value in (got.created_at, got.updated_at, listed.updated_at):
        assert value.utcoffset() == timedelta(0), value


async def test_migration_0008_turns_a_plan_mode_row_into_the_plan_gate(tmp_path: Path) -> None:
    """Issue 16 item 8: a row stored with mode `plan` (one mode for two things) becomes the
    plan gate over the `default` permission mode; other rows get the gate off."""
    path = tmp_path / "old.db"
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0006")
    with sqlite3.connect(path) as db:
        for sid, mode in (("s_plan", "plan"), ("s_bypass", "bypass")):
            db.execute(
                "INSERT INTO sessions (id, owner, cwd, mode, model, agent, permission_memory, created_at,"
                " updated_at) VALUES (?, 'o', '/w', ?, 'm', 'default', '{}', '2026-01-01', '2026-01-01')",
                (sid, mode),
            )
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0008")
    engine.dispose()
    with sqlite3.connect(path) as db:
        rows = dict((r[0], (r[1], r[2])) for r in db.execute("SELECT id, mode, plan FROM sessions"))
    assert rows == {"s_plan": ("default", 1), "s_bypass": ("bypass", 0)}


async def test_release_idle_closes_the_pooled_connections_and_the_next_request_reopens(store: Store) -> None:
    """Once the last session is unloaded the trimmer lets the request pool go (issue 32
    item 3: each kept connection held its caches, on SQLite a thread, after a load)."""
    await add_session(store, "s1")
    async with store.engine.connect() as a, store.engine.connect() as b:  # two kept after this
        assert a is not b
    assert store.engine.pool.checkedin() >= 2
    await store.release_idle()
    assert store.engine.pool.checkedin() == 0
    assert (await store.get_session("s1")) is not None  # reopened on demand


async def test_release_idle_keeps_an_in_memory_database() -> None:
    s = await Store.open("sqlite+aiosqlite:///:memory:")
    await s.migrate()
    try:
        await add_session(s, "s1")
        await s.release_idle()
        assert (await s.get_session("s1")) is not None  # (disposing would have dropped it)
    finally:
        await s.close()
