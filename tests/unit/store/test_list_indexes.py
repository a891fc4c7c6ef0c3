"""`session/list` among many stored sessions (issue 14, item 7): migration 0007's indexes
exist after an upgrade and go away on a downgrade, and every page — first or later, with
or without the cwd filter or a search — is one index range with no sort, on SQLite and
Postgres (a search filters that range: a page stops reading once it has its rows)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Engine, event, inspect

from agentd.store.db import Store, alembic_config
from agentd.store.session_list import session_list_query

NEW = {("owner", "updated_at", "id"), ("owner", "cwd", "updated_at", "id")}
OLD = {("owner",), ("updated_at",), ("owner", "updated_at")}


def _indexes(sync_conn: Any) -> set[tuple[str, ...]]:
    return {tuple(i["column_names"]) for i in inspect(sync_conn).get_indexes("sessions")}


async def test_migration_0007_replaces_the_list_indexes_and_downgrades(db_url: str) -> None:
    store = await Store.open(db_url)
    try:
        await store.migrate()
        async with store.engine.connect() as conn:
            assert NEW <= await conn.run_sync(_indexes)
            assert not OLD & await conn.run_sync(_indexes)
        async with store.engine.begin() as conn:
            await conn.run_sync(lambda c: command.downgrade(alembic_config(c), "0006"))
        async with store.engine.connect() as conn:
            assert OLD <= await conn.run_sync(_indexes)
            assert not NEW & await conn.run_sync(_indexes)
        await store.migrate()
        async with store.engine.connect() as conn:
            assert NEW <= await conn.run_sync(_indexes)
    finally:
        await store.close()


@contextmanager
def explained(engine: Engine, prefix: str) -> Iterator[None]:
    """Statements run meanwhile are EXPLAINed instead (their parameters bound as usual)."""

    def explain(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> Any:
        return prefix + statement, params

    event.listen(engine, "before_cursor_execute", explain, retval=True)
    try:
        yield
    finally:
        event.remove(engine, "before_cursor_execute", explain)


@pytest.mark.parametrize("query", [None, "notes"])  # the page's search (issue 17)
@pytest.mark.parametrize("cwd", [None, "/w/3"])
@pytest.mark.parametrize("paging", [False, True])
async def test_a_list_page_is_one_index_range_without_a_sort(
    migrated_db_url: str, cwd: str | None, paging: bool, query: str | None
) -> None:
    store = await Store.open(migrated_db_url)
    try:
        await store.migrate()
        before = (datetime(2026, 1, 1, tzinfo=UTC), "sess_x") if paging else None
        q = session_list_query(owner="local", cwd=cwd, before=before, limit=51, query=query)
        postgres = store.engine.dialect.name == "postgresql"
        index = "ix_sessions_owner_cwd_updated_id" if cwd else "ix_sessions_owner_updated_id"
        async with store.engine.connect() as conn:
            if postgres:  # an empty table: make the planner show what it would do with many rows
                await conn.exec_driver_sql("SET enable_seqscan = off")
            with explained(store.engine.sync_engine, "EXPLAIN " if postgres else "EXPLAIN QUERY PLAN "):
                # The raw rows: the select's result processors would parse the plan as dates.
                rows = await conn.run_sync(lambda c: c.execute(q).cursor.fetchall())
        plan = " | ".join(str(row[-1]) for row in rows)
        assert index in plan, plan
        assert "TEMP B-TREE" not in plan and "Sort" not in plan, plan
        if paging:  # the cursor bounds the index range, not a filter over the owner's rows
            assert "(updated_at,id)<(?,?)" in plan.replace(" ", "") or "Index Cond" in plan, plan
    finally:
        await store.close()
