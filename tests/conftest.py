"""Shared fixtures: a real agentd server on a free loopback port, on SQLite or on the
running Postgres (one fresh database per test)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from server.app import create_app
from server.config import PermissionMode, ProviderName, Settings
from server.embedded import serve_in_background
from server.providers.base import Provider
from server.providers.scripted import ScriptedProvider
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


@asynccontextmanager
async def postgres_database() -> AsyncIterator[str]:
    """A fresh, empty Postgres database; yields its SQLAlchemy URL; dropped afterwards."""
    if not await _pg_available():
        if os.environ.get("CI"):
            pytest.fail(f"Postgres not reachable at {PG_ADMIN_DSN} (required in CI)")
        pytest.skip("Postgres not reachable")
    name = f"agentd_t_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    base = PG_ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
    try:
        yield f"{base}/{name}"
    finally:
        admin = await asyncpg.connect(PG_ADMIN_DSN)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


@pytest.fixture(params=["sqlite", "postgres"])
async def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """Runs the test once on SQLite and once on Postgres."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'agentd.db'}"
    else:
        async with postgres_database() as url:
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
        yield Server(base, settings, provider, app)


def scripted(*steps: dict[str, Any], loop: bool = False) -> ScriptedProvider:
    return ScriptedProvider.from_dict({"loop": loop, "steps": list(steps)})


@pytest.fixture
async def server_factory(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """`async with server_factory(provider, **settings) as server:`"""

    def factory(provider: Provider, **kw: Any) -> Any:
        kw.setdefault("home", tmp_path / "home")
        return running_server(provider=provider, **kw)

    yield factory
