"""Shared fixtures: a real agentd server on a free loopback port, on SQLite or on the
running Postgres (one fresh database per test). The helpers behind them live in
`tests/support/` (`server.py`, `databases.py`), where test modules import them from."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from agentd.core.provider import Provider
from tests.support.databases import drop_postgres_template, postgres_database, premigrate_sqlite
from tests.support.file_order import load, longest_first
from tests.support.server import Server, ServerFactory, running_server, scripted
from tests.support.subagents import write_agents
from tests.support.xdist_stderr import pytest_configure  # noqa: F401 - a hook: timeout stacks under xdist

# A test's event loop ends within a deadline, or the test errors with the stacks of the tasks
# that held it: a task ignoring its cancellation no longer hangs the run.
pytest_plugins = ["tests.support.loop_teardown"]

# Not for importing: names test modules once took from here (now tests/support/), kept only so
# that a branch written before the move still collects; tests/unit/test_test_layout.py fails
# on each such import, naming it.
MOVED_TO_SUPPORT = (Server, ServerFactory, scripted, postgres_database)


# Property tests judge results, never speed: Hypothesis's per-example deadline and its "too
# slow" health check are timed asserts that fail on a loaded CI host (xdist workers beside
# servers under test). A test may still set its own settings.
settings.register_profile("agentd", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("agentd")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The longest files first: under `--dist loadfile` both workers then end together
    # (tests/support/file_order.py); each file's own order is kept.
    items[:] = longest_first(items, load())


def pytest_sessionfinish(session: pytest.Session) -> None:
    drop_postgres_template()


@pytest.fixture(params=["sqlite", "postgres"])
async def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """Runs the test once on SQLite and once on Postgres, on a fresh, empty database — or,
    for a test that starts a server (`server_factory`), which would migrate it first
    thing, on one already migrated (a copy; the server's migration is then one query)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'agentd.db'}"  # running_server copies a migrated one
    else:
        async with postgres_database(migrated="server_factory" in request.fixturenames) as url:
            yield url


@pytest.fixture(params=["sqlite", "postgres"])
async def migrated_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """`db_url`, already at the newest schema: for tests whose subject is not the migration
    (a copy of a migrated database; their own `migrate()` is then one query, where an Alembic
    upgrade from empty costs seconds on a loaded host). Tests of the migrations use `db_url`."""
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'agentd.db'}"
        await premigrate_sqlite(url)
        yield url
    else:
        async with postgres_database(migrated=True) as url:
            yield url


@pytest.fixture(params=["postgres"])
async def migrated_pg_url() -> AsyncIterator[str]:
    """`pg_url`, already at the newest schema (as `migrated_db_url`)."""
    async with postgres_database(migrated=True) as url:
        yield url


@pytest.fixture(params=["postgres"])
async def pg_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """For what only Postgres has (its one-statement commit, its own connection's death): a
    case of the Postgres parameter (reported as `[postgres]` like `db_url`'s), a fresh empty
    database, not a SQLite case that skips."""
    async with postgres_database() as url:
        yield url


@pytest.fixture
def agents_dir(tmp_path: Path) -> Path:
    """A folder of the sub-agent tests' agent definitions (`tests/support/subagents.py`)."""
    return write_agents(tmp_path / "agents")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws.resolve()


@pytest.fixture
async def server_factory(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """`async with server_factory(provider, **settings) as server:`"""

    def factory(provider: Provider, **kw: Any) -> Any:
        kw.setdefault("home", tmp_path / "home")
        return running_server(provider=provider, **kw)

    yield factory
