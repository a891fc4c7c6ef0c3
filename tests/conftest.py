"""Shared fixtures: a real agentd server on a free loopback port, on SQLite or on the
running Postgres (one fresh database per test)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from agentd.app import create_app
from agentd.core.provider import Provider
from agentd.embedded import serve_in_background
from agentd.infra.config import PermissionMode, ProviderName, Settings
from agentd.providers.scripted import ScriptedProvider
from agentd.store.db import Store
from tests.support.browser import server_stopping
from tests.support.client import WsClient
from tests.support.databases import premigrate_sqlite
from tests.support.xdist_stderr import pytest_configure  # noqa: F401 - a hook: timeout stacks under xdist

PG_ADMIN_DSN = os.environ.get("AGENTD_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


async def _pg_available() -> bool:
    try:
        conn = await asyncpg.connect(PG_ADMIN_DSN, timeout=3)
    except Exception:
        return False
    await conn.close()
    return True


_pg_base = PG_ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
_pg_template: str | None = None  # this process's migrated template database


async def _migrated_template(admin: asyncpg.Connection) -> str:
    """A database at the newest schema, made once per test process (each xdist worker has
    its own: a template must have no other connection while it is copied); dropped at the
    end of the session (`pytest_sessionfinish`)."""
    global _pg_template
    if _pg_template is None:
        name = f"agentd_tpl_{uuid.uuid4().hex[:12]}"
        await admin.execute(f'CREATE DATABASE "{name}"')
        store = await Store.open(f"{_pg_base}/{name}")
        try:
            await store.migrate()
        finally:
            await store.close()  # no connection left: it can serve as a template
        _pg_template = name
    return _pg_template


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _pg_template is not None:
        asyncio.run(_drop_database(_pg_template))


async def _drop_database(name: str) -> None:
    admin = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@asynccontextmanager
async def postgres_database(*, migrated: bool = False) -> AsyncIterator[str]:
    """A fresh Postgres database, empty or (`migrated`) a copy of one at the newest schema
    (`CREATE DATABASE … TEMPLATE`: no Alembic upgrade per test); yields its SQLAlchemy
    URL; dropped afterwards."""
    if not await _pg_available():
        if os.environ.get("CI"):
            pytest.fail(f"Postgres not reachable at {PG_ADMIN_DSN} (required in CI)")
        pytest.skip("Postgres not reachable")
    name = f"agentd_t_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        template = f' TEMPLATE "{await _migrated_template(admin)}"' if migrated else ""
        await admin.execute(f'CREATE DATABASE "{name}"{template}')
    finally:
        await admin.close()
    try:
        yield f"{_pg_base}/{name}"
    finally:
        await _drop_database(name)


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


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws.resolve()


@dataclass
class Server:
    base_url: str
    settings: Settings
    provider: Provider
    app: Any

    async def client(self, **caps: Any) -> WsClient:
        return await WsClient.connect(self.base_url, **caps)


ServerFactory = Callable[..., Any]
TEST_SHUTDOWN_GRACE_S = 1.0  # the default is 10 s


@asynccontextmanager
async def running_server(
    *,
    home: Path,
    provider: Provider,
    database_url: str | None = None,
    permission_mode: PermissionMode = PermissionMode.DEFAULT,
    tools: dict[str, Any] | None = None,
    fallbacks: list[Any] | None = None,
    **settings_kw: Any,
) -> AsyncIterator[Server]:
    """`tools` replaces the built-in tool set (e.g. builtin_tools() plus a test tool)."""
    # A test that leaves its server with a turn still running (often on purpose: a restart
    # must resume it) waits half the shutdown grace for it to reach its gate: 0.5 s here,
    # not 5 s. Tests of the shutdown itself set their own.
    settings_kw.setdefault("shutdown_grace_s", TEST_SHUTDOWN_GRACE_S)
    settings = Settings(
        home=home,
        database_url=database_url,
        provider=ProviderName.SCRIPTED,
        permission_mode=permission_mode,
        **settings_kw,
    )
    await premigrate_sqlite(settings.resolved_database_url())
    app = create_app(settings, provider=provider, tools=tools, fallbacks=fallbacks)
    async with serve_in_background(app) as base:
        try:
            yield Server(base, settings, provider, app)
        finally:
            server_stopping()  # a page's refused reconnects from here on are expected


def scripted(*steps: dict[str, Any], loop: bool = False) -> ScriptedProvider:
    return ScriptedProvider.from_dict({"loop": loop, "steps": list(steps)})


@pytest.fixture
async def server_factory(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """`async with server_factory(provider, **settings) as server:`"""

    def factory(provider: Provider, **kw: Any) -> Any:
        kw.setdefault("home", tmp_path / "home")
        return running_server(provider=provider, **kw)

    yield factory
