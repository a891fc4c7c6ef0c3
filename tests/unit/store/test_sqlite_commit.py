"""The SQLite group commit through the driver (agentd/store/sqlite_commit.py): a turn's
commit runs one SQLite statement per table — its few rows in one multi-row INSERT, the
transaction begun by the driver itself — and stays one transaction, all or nothing,
whichever way it begins. Real SQLite files."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, event
from sqlalchemy.exc import IntegrityError

from agentd.store import sqlite_commit
from agentd.store.db import Batch, Store
from agentd.store.models import Base, EventRow
from tests.support.databases import event_write

NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)


def _turn(seq: int, idx: int) -> Batch:
    """What a trivial turn's second commit holds: three events, a message, two fields."""
    return Batch(
        "s0",
        events=[event_write(seq + k, kind, {"n": seq + k}) for k, kind in enumerate(("a", "b", "c"))],
        messages=[(idx, {"role": "assistant", "content": "hi"})],
        session_fields={"usage": {"in": 3}, "running_turn": None},
    )


async def test_a_turns_commit_runs_one_statement_per_table(tmp_path: Path) -> None:
    # Each SQLite statement run is a driver call that lets go of the GIL and takes it back
    # on the writer thread: three events are one INSERT, not three (issue 32).
    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    ran: list[str] = []
    try:
        await store.migrate()
        await store.create_session(id="s0", owner="o", cwd="/w", mode="default", model="m")

        def traced(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.set_trace_callback(ran.append)

        event.listen(store.commit_engine, "connect", traced)  # the writer connects on its first commit
        await store.commit([_turn(1, 0)])
        await store.commit([_turn(4, 1)])
        verbs = [" ".join(sql.split()[:3]) for sql in ran if not sql.startswith("PRAGMA")]
        one = ["BEGIN", "INSERT INTO events", "INSERT INTO messages", "UPDATE sessions SET", "COMMIT"]
        assert verbs == one * 2
        assert [(e.seq, e.kind, e.payload) for e in await store.read_events("s0")] == [
            (n, "abc"[(n - 1) % 3], {"n": n}) for n in range(1, 7)
        ]
        got = await store.get_session("s0")
        assert got is not None and (got.usage, got.running_turn) == ({"in": 3}, None)
    finally:
        await store.close()


def _engine(path: Path) -> Any:
    engine = create_engine(f"sqlite+pysqlite:///{path}")
    Base.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO sessions (id, owner, cwd, mode, plan, model, agent, permission_memory, "
            "created_at, updated_at) VALUES ('s0', 'o', '/w', 'default', 0, 'm', 'default', '{}', "
            "'2026-01-01 00:00:00', '2026-01-01 00:00:00')"
        )
    return engine


def _seqs(dbapi: Any) -> list[int]:
    return [r[0] for r in dbapi.execute("SELECT seq FROM events ORDER BY id").fetchall()]


@pytest.mark.parametrize("autocommit", [False, True])
def test_a_failed_commit_leaves_nothing_whichever_way_it_began(tmp_path: Path, autocommit: bool) -> None:
    # The driver begins the transaction with the first INSERT; a connection in autocommit
    # (isolation_level None) begins nothing itself, so the commit sends BEGIN: either way the
    # events before a refused row are rolled back with it.
    engine = _engine(tmp_path / "b.db")
    with engine.connect() as conn:
        dbapi: Any = conn.connection.dbapi_connection
        if autocommit:
            dbapi.isolation_level = None
        assert sqlite_commit.commit(conn, [_turn(1, 0)], NOW)
        with pytest.raises(IntegrityError):  # message idx 0 is taken: the whole commit fails
            sqlite_commit.commit(conn, [_turn(4, 0)], NOW)
        assert not dbapi.in_transaction
        assert _seqs(dbapi) == [1, 2, 3]
        assert sqlite_commit.commit(conn, [_turn(4, 1)], NOW)  # the connection goes on
        assert _seqs(dbapi) == list(range(1, 7))
    engine.dispose()


def test_many_rows_go_through_one_executemany_in_their_order(tmp_path: Path) -> None:
    engine = _engine(tmp_path / "c.db")
    n = sqlite_commit.MULTI_ROW_MAX * 2 + 1
    batch = Batch("s0", events=[event_write(seq, "plan", {"n": seq}) for seq in range(1, n + 1)])
    with engine.connect() as conn:
        assert sqlite_commit.commit(conn, [batch], NOW)
        rows = conn.exec_driver_sql("SELECT seq, payload FROM events ORDER BY id").all()
    assert rows == [(seq, f'{{"n":{seq}}}') for seq in range(1, n + 1)]
    engine.dispose()


@pytest.mark.parametrize("fast", [True, False], ids=["isoformat", "processor"])
@pytest.mark.parametrize(
    "now",
    [NOW, datetime(2026, 12, 3, 8, 0, 1, 5), datetime(2026, 12, 3, 8, 0), datetime(999, 1, 2, tzinfo=UTC)],
    ids=["aware", "microseconds", "naive", "year-999"],
)
def test_the_commits_time_is_written_as_the_columns_own_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast: bool, now: datetime
) -> None:
    """`datetime.isoformat` (FAST_TIME) writes the text SQLAlchemy's own DATETIME processor
    writes: the general way and the readers see the same times."""
    monkeypatch.setattr(sqlite_commit, "FAST_TIME", fast)
    sqlite_commit._binds.cache_clear()
    engine = _engine(tmp_path / "d.db")
    try:
        own = sqlite_commit._processor(engine.dialect, EventRow, "created_at")
        assert (sqlite_commit._binds(engine.dialect).created_at is sqlite_commit._iso) is fast
        with engine.connect() as conn:
            assert sqlite_commit.commit(conn, [_turn(1, 0)], now)
            events = conn.exec_driver_sql("SELECT DISTINCT created_at FROM events").all()
            session = conn.exec_driver_sql("SELECT updated_at FROM sessions").all()
        assert events == session == [(own(now),)]
    finally:
        sqlite_commit._binds.cache_clear()
        engine.dispose()


def test_a_column_stored_another_way_keeps_its_processor() -> None:
    def other(value: datetime) -> str:
        return value.strftime("%Y%m%d%H%M%S")

    assert sqlite_commit._datetime_text(other) is other
    assert sqlite_commit._datetime_text(lambda value: value.isoformat(" ")) is not sqlite_commit._iso
