"""The group commit's cost scales with the tables it touches, not with the sessions in it
(issue 14), and a schema already at head needs no Alembic. Real SQLite and Postgres."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import event, select, update
from sqlalchemy.exc import IntegrityError

from agentd.store import pg_commit, sqlite_commit, sqlite_writer
from agentd.store.db import Batch, Store, alembic_config
from agentd.store.engine import SCHEMA_HEAD
from agentd.store.models import EventRow, SessionRow
from agentd.store.queue_rows import QueueWrite
from agentd.store.records import EventWrite
from agentd.store.sqlite_writer import CHECKPOINT_EVERY
from tests.support.databases import event_write
from tests.support.polling import until

SESSIONS = 40
OLD = datetime(2020, 1, 1, tzinfo=UTC)


@pytest.fixture
async def store(migrated_db_url: str) -> AsyncIterator[Store]:
    s = await Store.open(migrated_db_url)
    await s.migrate()
    for i in range(SESSIONS):
        await s.create_session(id=f"s{i}", owner="o", cwd="/w", mode="default", model="m")
    try:
        yield s
    finally:
        await s.close()


def _batch(i: int, seq: int) -> Batch:
    return Batch(
        f"s{i}",
        events=[event_write(seq, "agent_message", {"text": f"{i}-{seq}"}), event_write(seq + 1, "plan", {})],
        messages=[(seq, {"role": "assistant", "content": f"{i}-{seq}"})],
    )


def test_the_schema_head_known_at_build_time_is_the_scripts_head() -> None:
    assert SCHEMA_HEAD == ScriptDirectory.from_config(alembic_config()).get_current_head()


async def test_a_batch_of_many_sessions_costs_one_statement_per_table(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements: list[str] = []
    rollbacks: list[Any] = []

    def on_execute(_conn: Any, _cursor: Any, sql: str, *_args: Any) -> None:
        statements.append(sql.split()[0].upper())

    await store.commit([Batch("s0", session_fields={"title": "warm"})])  # the first connect
    event.listen(store.commit_engine, "before_cursor_execute", on_execute)
    real_execute = sqlite_commit._execute  # SQLite's common commit goes to the driver directly
    monkeypatch.setattr(
        sqlite_commit,
        "_execute",
        lambda cur, sql, rows: (on_execute(None, cur, sql), real_execute(cur, sql, rows)),
    )
    real_pg = pg_commit.execute  # and so does Postgres's

    async def pg_execute(driver: Any, sql: str, params: tuple[Any, ...]) -> None:
        on_execute(None, None, sql)
        await real_pg(driver, sql, params)

    monkeypatch.setattr(pg_commit, "execute", pg_execute)
    dialect = store.commit_engine.dialect
    real_rollback = dialect.do_rollback
    monkeypatch.setattr(dialect, "do_rollback", lambda c: (rollbacks.append(c), real_rollback(c)))
    await store.commit([_batch(i, 1) for i in range(SESSIONS)])
    await store.commit([_batch(i, 3) for i in range(SESSIONS // 2)])
    if store.commit_engine.dialect.name == "postgresql":
        # Events, messages and the updated_at of every session in one statement (CTEs over
        # arrays), autocommitted: no BEGIN / COMMIT either.
        assert statements == ["WITH", "WITH"]
    else:
        # Events, messages and every session's updated_at: three driver calls per batch
        # (each of 40 and of 20 sessions).
        assert sorted(statements) == ["INSERT"] * 4 + ["UPDATE"] * 2
    assert rollbacks == []  # nor a rollback when the connection goes back to the pool
    for i in (0, SESSIONS - 1):
        assert [(e.seq, e.payload) for e in await store.read_events(f"s{i}")] == [
            (1, {"text": f"{i}-1"}),
            (2, {}),
        ] + ([(3, {"text": f"{i}-3"}), (4, {})] if i == 0 else [])
        assert len(await store.load_messages(f"s{i}")) == (2 if i == 0 else 1)


async def test_rare_writes_in_a_shared_batch_land_on_their_own_session_only(store: Store) -> None:
    await store.commit([_batch(i, 1) for i in range(3)])
    async with store.engine.begin() as conn:
        await conn.execute(update(SessionRow).values(updated_at=OLD))
    await store.commit(
        [
            Batch("s0", truncate_from=0, messages=[(0, {"v": "summary"})]),
            Batch("s1", events=[event_write(3, "plan", {})], session_fields={"title": "named"}),
            _batch(2, 3),
        ]
    )
    assert await store.load_messages("s0") == [{"v": "summary"}]
    assert await store.load_messages("s1") == [{"role": "assistant", "content": "1-1"}]
    assert len(await store.load_messages("s2")) == 2
    s1 = await store.get_session("s1")
    assert s1 is not None and s1.title == "named"
    assert (await store.get_session("s2")).title is None  # type: ignore[union-attr]
    # Sessions that logged events or changed fields are touched; the others are not.
    touched = {sid for sid in ("s0", "s1", "s2", "s3") if (await store.get_session(sid)).updated_at > OLD}  # type: ignore[union-attr]
    assert touched == {"s1", "s2"}


async def test_migrate_at_head_leaves_the_database_alone(db_url: str) -> None:
    store = await Store.open(db_url)
    try:
        await store.migrate()
        statements: list[str] = []
        sync_engine = store.engine.sync_engine
        event.listen(sync_engine, "before_cursor_execute", lambda _c, _cur, sql, *_a: statements.append(sql))
        await store.migrate()
        assert await store.migration_status() == (SCHEMA_HEAD, SCHEMA_HEAD)
        # Only reads of the revision: no DDL, no Alembic bookkeeping writes.
        assert statements and all(s.lstrip().upper().startswith(("SELECT", "PRAGMA")) for s in statements)
    finally:
        await store.close()


async def test_sqlite_checkpoints_the_wal_beside_the_commits_not_inside_them(tmp_path: Path) -> None:
    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'agentd.db'}")
    try:
        await store.migrate()
        await store.create_session(id="s0", owner="o", cwd="/w", mode="default", model="m")
        writer = store.sqlite_writer
        assert writer is not None
        with store.commit_engine.connect() as conn:  # the writer's own connection never does
            assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 0
        for seq in range(1, 2 * CHECKPOINT_EVERY + 1):
            await store.commit([Batch("s0", events=[event_write(seq, "plan", {"n": seq})])])
        await until(lambda: writer.checkpoints >= 1)  # a PASSIVE one, on a connection of its own
        assert await store.last_seq("s0") == 2 * CHECKPOINT_EVERY
    finally:
        await store.close()


async def test_the_writer_keeps_one_connection_and_replaces_it_after_a_failed_commit(
    migrated_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite: the writer thread's connection; Postgres: the write engine's. Checking one
    # out per commit was a good part of a commit's CPU (issue 14).
    store = await Store.open(migrated_db_url)
    try:
        await store.migrate()
        await store.create_session(id="s0", owner="o", cwd="/w", mode="default", model="m")
        checkouts: list[Any] = []
        event.listen(store.commit_engine, "checkout", lambda *a: checkouts.append(a))
        for seq in (1, 2, 3):
            await store.commit([Batch("s0", events=[event_write(seq, "plan", {"n": seq})])])
        assert len(checkouts) <= 1  # held between commits, not checked out per commit
        dialect = store.commit_engine.dialect
        real = dialect.do_execute
        failures: list[int] = []

        def fail_once(*args: Any) -> None:
            if not failures:
                failures.append(1)
                raise RuntimeError("the connection broke")
            real(*args)

        monkeypatch.setattr(dialect, "do_execute", fail_once)
        real_sqlite = sqlite_commit._execute

        def sqlite_fail_once(*args: Any) -> None:
            if not failures:
                failures.append(1)
                raise RuntimeError("the connection broke")
            real_sqlite(*args)

        monkeypatch.setattr(sqlite_commit, "_execute", sqlite_fail_once)
        real_pg = pg_commit.execute

        async def pg_fail_once(*args: Any) -> None:
            if not failures:
                failures.append(1)
                raise RuntimeError("the connection broke")
            await real_pg(*args)

        monkeypatch.setattr(pg_commit, "execute", pg_fail_once)
        with pytest.raises(RuntimeError):
            await store.commit([Batch("s0", events=[event_write(4, "plan", {"n": 4})])])
        before = len(checkouts)
        await store.commit([Batch("s0", events=[event_write(4, "plan", {"n": 4})])])
        assert len(checkouts) == before + 1  # a fresh connection after the failure
        assert [e.seq for e in await store.read_events("s0")] == [1, 2, 3, 4]
    finally:
        await store.close()


async def test_session_fields_through_the_cached_statement(store: Store) -> None:
    # The same set of columns twice (the second through the statement built once), then
    # another set with a None.
    for n in (1, 2):
        await store.commit([Batch("s0", session_fields={"goal": {"n": n}, "title": f"t{n}"})])
        got = await store.get_session("s0")
        assert got is not None and (got.goal, got.title) == ({"n": n}, f"t{n}")
    await store.commit([Batch("s0", session_fields={"goal": None, "usage": {"in": 3}})])
    got = await store.get_session("s0")
    assert got is not None and (got.goal, got.usage, got.title) == (None, {"in": 3}, "t2")
    other = await store.get_session("s1")
    assert other is not None and (other.goal, other.title) == (None, None)  # only its own row


async def test_a_postgres_commit_opens_no_transaction_of_its_own(
    migrated_pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncpg.transaction

    store = await Store.open(migrated_pg_url)
    try:
        await store.migrate()
        await store.create_session(id="s0", owner="o", cwd="/w", mode="default", model="m")
        await store.commit([Batch("s0", session_fields={"title": "warm"})])  # the first connect
        begins: list[Any] = []
        real_start = asyncpg.transaction.Transaction.start

        async def counted_start(self: Any) -> None:
            begins.append(self)
            await real_start(self)

        monkeypatch.setattr(asyncpg.transaction.Transaction, "start", counted_start)
        for seq in (1, 2):
            await store.commit(
                [Batch("s0", events=[event_write(seq, "plan", {})], session_fields={"title": "t"})]
            )
        assert begins == []  # each commit was one autocommitted statement
        # The rare writes still share one transaction, and the connection autocommits after.
        await store.commit(
            [Batch("s0", truncate_from=0, messages=[(0, {"v": 1})], session_fields={"title": "u"})]
        )
        assert len(begins) == 1
        await store.commit([Batch("s0", events=[event_write(3, "plan", {})])])
        assert len(begins) == 1
        assert [e.seq for e in await store.read_events("s0")] == [1, 2, 3]
        assert (await store.get_session("s0")).title == "u"  # type: ignore[union-attr]
    finally:
        await store.close()


async def test_a_failed_commit_changes_nothing(store: Store) -> None:
    await store.commit([_batch(0, 1)])
    async with store.engine.begin() as conn:
        await conn.execute(update(SessionRow).values(updated_at=OLD))
    bad = [
        Batch("s1", events=[event_write(1, "plan", {})], session_fields={"title": "lost", "goal": {"g": 1}}),
        Batch("s2", events=[event_write(1, "plan", {})], messages=[(0, {"m": 1})]),
        Batch("s0", events=[event_write(1, "plan", {"again": True})]),  # seq 1 is taken
    ]
    with pytest.raises(IntegrityError):
        await store.commit(bad)
    for sid in ("s1", "s2"):
        assert await store.read_events(sid) == []
        got = await store.get_session(sid)
        assert got is not None and (got.title, got.goal, got.updated_at) == (None, None, OLD)
    assert await store.load_messages("s2") == []
    assert [(e.seq, e.payload) for e in await store.read_events("s0")] == [(1, {"text": "0-1"}), (2, {})]
    await store.commit(bad[:2])  # the writer recovers: the same good batches land whole
    assert [e.seq for e in await store.read_events("s1")] == [1]
    assert (await store.get_session("s1")).title == "lost"  # type: ignore[union-attr]


async def test_events_land_in_batch_order_without_gaps(store: Store) -> None:
    for seq in range(1, 30, 3):
        await store.commit(
            [
                Batch(f"s{i}", events=[event_write(seq + k, "plan", {"n": seq + k}) for k in range(3)])
                for i in range(5)
            ]
        )
    async with store.engine.connect() as conn:
        rows = (await conn.execute(select(EventRow.session_id, EventRow.seq).order_by(EventRow.id))).all()
    for i in range(5):
        # Row ids follow the batch's order: by id, each session's seqs are 1..30, no gap.
        assert [seq for sid, seq in rows if sid == f"s{i}"] == list(range(1, 31))
        assert [e.payload["n"] for e in await store.read_events(f"s{i}")] == list(range(1, 31))


async def test_sessions_changing_different_columns_in_one_commit(store: Store) -> None:
    await store.commit(
        [
            Batch("s0", session_fields={"title": "a", "plan": True, "usage": {"in": 1}}),
            Batch("s1", session_fields={"title": "b", "plan": False, "usage": None}),
            Batch("s2", session_fields={"goal": {"g": 2}, "partial": None}),
            Batch(
                "s3", events=[event_write(1, "plan", {})], session_fields={"title": None, "goal": {"g": 3}}
            ),
        ]
    )
    got = {sid: await store.get_session(sid) for sid in ("s0", "s1", "s2", "s3", "s4")}
    assert [(r.title, r.plan, r.usage, r.goal) for r in got.values() if r is not None] == [
        ("a", True, {"in": 1}, None),
        ("b", False, None, None),
        (None, False, None, {"g": 2}),
        (None, False, None, {"g": 3}),
        (None, False, None, None),
    ]


async def test_sqlite_driver_commit_stores_what_the_general_way_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The common SQLite commit bypasses SQLAlchemy Core (issue 14): the same batches, through
    # it and through `apply_batches`, must leave byte-identical rows (JSON text, datetimes,
    # booleans, JSON null) in the same order.
    import sqlite3

    import agentd.store.db as db_module

    def batches() -> list[Batch]:
        return [
            Batch(
                "s0",
                events=[event_write(1, "agent_message", {"text": "é ✓", "n": [1, 2.5, None]})],
                messages=[(0, {"role": "user", "content": "hi"}), (1, {"role": "assistant"})],
                session_fields={
                    "title": "t",
                    "plan": True,
                    "usage": None,
                    "goal": {"g": 1},
                    "updated_at": OLD,
                },
            ),
            Batch("s1", events=[event_write(1, "plan", {}), event_write(2, "usage", {"in": 3})]),
            Batch("s2", messages=[(0, {"m": 1})], session_fields={"partial": None}),
            Batch("s3", session_fields={"title": None, "plan": False}),
        ]

    fixed = datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=UTC)
    monkeypatch.setattr(db_module, "utcnow", lambda: fixed)
    monkeypatch.setattr(sqlite_writer, "utcnow", lambda: fixed)  # (read where the commit runs)
    driver_calls: list[str] = []
    real_execute = sqlite_commit._execute
    monkeypatch.setattr(
        sqlite_commit,
        "_execute",
        lambda cur, sql, rows: (driver_calls.append(sql), real_execute(cur, sql, rows)),
    )
    real_commit = sqlite_commit.commit
    dumps: dict[bool, dict[str, list[Any]]] = {}
    for fast in (True, False):
        monkeypatch.setattr(sqlite_commit, "commit", real_commit if fast else lambda *a: False)
        path = tmp_path / f"{fast}.db"
        store = await Store.open(f"sqlite+aiosqlite:///{path}")
        try:
            await store.migrate()
            for i in range(4):
                await store.create_session(id=f"s{i}", owner="o", cwd="/w", mode="default", model="m")
            calls_before = len(driver_calls)
            await store.commit(batches())
            await store.commit([Batch("s1", events=[event_write(3, "plan", {"again": True})])])
            assert (len(driver_calls) > calls_before) == fast  # the way under test was taken
        finally:
            await store.close()
        with contextlib.closing(sqlite3.connect(path)) as raw:
            dumps[fast] = {
                table: raw.execute(f"SELECT *, {types} FROM {table} ORDER BY 1").fetchall()
                for table, types in (
                    ("events", "typeof(payload), typeof(created_at)"),
                    ("messages", "typeof(data)"),
                    ("sessions", "typeof(plan), typeof(usage), typeof(updated_at)"),
                )
            }
    assert dumps[True] == dumps[False]
    assert len(dumps[True]["events"]) == 4 and len(dumps[True]["messages"]) == 3


async def test_postgres_one_statement_stores_what_the_general_way_stores(
    migrated_pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The one-statement commit sends its rows as json parameters (issue 32): the same batches,
    # through it and through `apply_batches`, must leave the same rows — payloads byte for
    # byte as the codec wrote them (spacing and escapes kept, a NUL's `\u0000` too: a json
    # column takes it, text does not), JSON null vs SQL NULL, booleans.
    from sqlalchemy import text

    import agentd.store.db as db_module

    def batches(p: str) -> list[Batch]:
        return [
            Batch(
                f"{p}0",
                events=[
                    event_write(1, "agent_message", {"text": "é ✓ a\x00b", "n": [1, 2.5, None]}),
                    EventWrite(2, "plan", b'{"a" :  [1, 2.50], "b":"\\u00e9"}'),
                ],
                messages=[(0, {"role": "user", "content": "h\x00i"}), (1, {"role": "assistant"})],
                session_fields={
                    "title": "t",
                    "plan": True,
                    "usage": None,
                    "goal": {"g": "\x00"},
                    "updated_at": OLD,
                },
                fence=None,
            ),
            Batch(f"{p}1", events=[event_write(1, "plan", {}), event_write(2, "usage", {"in": 3})]),
            Batch(f"{p}2", messages=[(0, {"m": 1})], session_fields={"partial": None}),
            Batch(f"{p}3", session_fields={"title": None, "plan": False, "running_turn": "turn_1"}),
        ]

    fixed = datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=UTC)
    monkeypatch.setattr(db_module, "utcnow", lambda: fixed)
    sent: list[str] = []
    real_pg = pg_commit.execute

    def pg_execute(driver: Any, sql: str, params: tuple[Any, ...]) -> Any:
        sent.append(sql)
        return real_pg(driver, sql, params)

    monkeypatch.setattr(pg_commit, "execute", pg_execute)
    store = await Store.open(migrated_pg_url)
    try:
        await store.migrate()
        for p in ("a", "b"):
            for i in range(4):
                await store.create_session(id=f"{p}{i}", owner="o", cwd="/w", mode="default", model="m")
        await store.commit([Batch("a0", session_fields={"title": "warm"})])  # the first connect
        await store.commit([Batch("b0", session_fields={"title": "warm"})])
        real_one = pg_commit.one_statement
        for p, fast in (("a", True), ("b", False)):
            monkeypatch.setattr(pg_commit, "one_statement", real_one if fast else lambda *a: None)
            before = len(sent)
            await store.commit(batches(p))
            assert (len(sent) > before) == fast  # the way under test was taken
        rows: dict[str, list[Any]] = {}
        async with store.engine.connect() as conn:
            for table, cols in (
                ("events", "seq, kind, payload::text, created_at, fence"),
                ("messages", "idx, data::text, fence"),
                (
                    "sessions",
                    "title, plan, usage::text, goal::text, partial::text, running_turn, updated_at, fence",
                ),
            ):
                for p in ("a", "b"):
                    key = "id" if table == "sessions" else "session_id"
                    sql = f"SELECT right({key}, 1), {cols} FROM {table} WHERE {key} LIKE :p ORDER BY 1, 2"
                    got = await conn.execute(text(sql), {"p": f"{p}%"})
                    rows[table + p] = [tuple(r) for r in got]
    finally:
        await store.close()
    for table in ("events", "messages", "sessions"):
        assert rows[table + "a"] == rows[table + "b"], table
    assert ("0", 2, "plan", '{"a" :  [1, 2.50], "b":"\\u00e9"}', fixed, None) in rows["eventsa"]
    assert rows["sessionsa"][2][5] == "null" and rows["sessionsa"][3][1:3] == (None, False)
    assert len(rows["eventsa"]) == 4 and len(rows["messagesa"]) == 3


async def test_a_postgres_writer_whose_connection_died_reconnects_for_the_next_commit(
    migrated_pg_url: str,
) -> None:
    # The one-statement commit runs on asyncpg's connection itself: a connection the server
    # killed may fail the commit in flight (a transient error the event log retries), but it
    # is never reused (issue 26 item 1) — the next commit reconnects and goes through, and
    # nothing is written twice.
    from sqlalchemy import text

    from agentd.session.eventlog.refusals import is_transient

    store = await Store.open(migrated_pg_url)
    try:
        await store.migrate()
        await store.create_session(id="s0", owner="o", cwd="/w", mode="default", model="m")
        await store.commit([Batch("s0", events=[event_write(1, "plan", {})])])
        writer = store._write_dbapi.driver_connection
        async with store.engine.begin() as conn:
            await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": writer.get_server_pid()})
        try:
            await store.commit([Batch("s0", events=[event_write(2, "plan", {})])])
        except Exception as exc:  # the commit in flight may die with its connection: retryable
            assert is_transient(exc), exc
            await store.commit([Batch("s0", events=[event_write(2, "plan", {})])])
        assert [e.seq for e in await store.read_events("s0")] == [1, 2]
    finally:
        await store.close()


def test_one_sessions_batch_makes_the_statement_a_batch_among_others_makes() -> None:
    # The one-batch shortcut of `pg_commit.one_statement` (no id set, no `any`): the same
    # rows as the same batch committed beside another session's; the rare writes (and a
    # time column) still go the general way; no rows, empty json arrays.
    now = datetime(2026, 12, 3, tzinfo=UTC)

    def batch() -> Batch:
        return Batch(
            "s0",
            events=[event_write(1, "plan", {"a": 1}), event_write(2, "usage", {})],
            messages=[(0, {"role": "user"})],
            session_fields={"title": "t"},
            fence=7,
        )

    alone = pg_commit.one_statement([batch()], now)
    other = Batch("s1", events=[event_write(5, "plan", {})], fence=3)
    shared = pg_commit.one_statement([batch(), other], now)
    assert alone is not None and shared is not None
    rows = [[orjson.loads(p) for p in one[1][1:]] for one in (alone, shared)]
    # Events ($2, payloads $3): s0's rows first, then s1's; messages ($4, $5) and s0's fields
    # ($7) alike; s1, with events and no fields, only touched ($6).
    assert rows[0][0] == rows[1][0][:2] and rows[1][0][2] == ["s1", 5, "plan", 3]
    assert rows[0][0] == [["s0", 1, "plan", 7], ["s0", 2, "usage", 7]]
    assert rows[0][1] == rows[1][1][:2] == [{"a": 1}, {}]
    assert rows[0][2] == rows[1][2] == [["s0", 0, 7]] and rows[0][3] == rows[1][3] == [{"role": "user"}]
    assert rows[0][4] == [] and rows[1][4] == [["s1", 3]]
    assert rows[0][5] == rows[1][5] == [["s0", "t", 7]]
    # The payloads go as the codec's very bytes.
    assert alone[1][2] == "[" + ",".join(e.data.decode() for e in batch().events) + "]"
    assert pg_commit.one_statement([Batch("s0", truncate_from=0)], now) is None
    assert pg_commit.one_statement([Batch("s0", queue=[QueueWrite(deletes=["p"])])], now) is None
    empty = pg_commit.one_statement([Batch("s0", session_fields={"title": "t"})], now)
    assert empty is not None and empty[1][1:6] == ("[]", "[]", "[]", "[]", "[]")
    # A time column as text would be read in the server's zone: the general way.
    assert pg_commit.one_statement([Batch("s0", session_fields={"created_at": now})], now) is None
