"""A shared Postgres for tests (issue 31, item 7): the suite names its databases with
`AGENTD_TEST_PG_PREFIX` and drops only what it made — another run's databases, under
another prefix, are left alone; a prefix that would not be a plain identifier is refused."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from tests.support import databases
from tests.support.databases import PG_ADMIN_DSN, postgres_database


async def names() -> set[str]:
    admin = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        return {r["datname"] for r in await admin.fetch("SELECT datname FROM pg_database")}
    finally:
        await admin.close()


async def test_the_suite_names_its_databases_by_the_prefix_and_drops_only_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not await databases._pg_available():
        pytest.fail(f"Postgres not reachable at {PG_ADMIN_DSN}")
    mine = f"agentd_prefix_{uuid.uuid4().hex[:6]}_"
    other = f"another_run_{uuid.uuid4().hex[:8]}"  # a database of someone else's run
    admin = await asyncpg.connect(PG_ADMIN_DSN)
    await admin.execute(f'CREATE DATABASE "{other}"')
    try:
        monkeypatch.setattr(databases, "PG_PREFIX", mine)
        async with postgres_database() as url:
            name = url.rsplit("/", 1)[1]
            assert name.startswith(mine) and name in await names()
        assert name not in await names()  # dropped: it was ours
        assert other in await names()  # left alone: it was not
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{other}"')
        await admin.close()


@pytest.mark.parametrize("bad", ['x"; DROP DATABASE postgres; --', "Upper_", "9starts_with_a_digit", ""])
def test_a_prefix_that_is_no_plain_identifier_is_refused(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setattr(databases, "PG_PREFIX", bad)
    with pytest.raises(pytest.fail.Exception, match="AGENTD_TEST_PG_PREFIX"):
        databases.database_name()
