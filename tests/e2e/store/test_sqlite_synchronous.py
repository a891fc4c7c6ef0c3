"""`AGENTD_SQLITE_SYNCHRONOUS`: SQLite's `PRAGMA synchronous` on every connection the store
opens — `normal` by default (crash-safe in WAL mode), `full` for power-loss durability."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from agentd.infra.config import Settings, SqliteSynchronous
from agentd.store.db import Store
from tests.support.server import scripted

# What `PRAGMA synchronous` reads back as.
LEVELS = {SqliteSynchronous.NORMAL: 1, SqliteSynchronous.FULL: 2, SqliteSynchronous.EXTRA: 3}


async def synchronous_of(store: Store) -> int:
    async with store.engine.connect() as conn:
        return int((await conn.execute(text("PRAGMA synchronous"))).scalar_one())


async def test_the_default_stays_normal(tmp_path: Path) -> None:
    assert Settings(home=tmp_path).sqlite_synchronous is SqliteSynchronous.NORMAL
    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    try:
        assert await synchronous_of(store) == LEVELS[SqliteSynchronous.NORMAL]
    finally:
        await store.close()


@pytest.mark.parametrize("level", list(SqliteSynchronous))
async def test_the_server_store_uses_the_configured_level(
    server_factory, workspace: Path, level: SqliteSynchronous, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTD_SQLITE_SYNCHRONOUS", level.value)  # as an operator sets it
    async with server_factory(scripted({"text": "ok"})) as server:
        assert server.settings.sqlite_synchronous is level
        client = await server.client()
        await client.call("session/new", {"cwd": str(workspace), "mcpServers": []})  # the store works
        assert await synchronous_of(server.app.state.agentd.store) == LEVELS[level]
        await client.close()


def test_an_unknown_level_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENTD_SQLITE_SYNCHRONOUS", "off; DROP TABLE sessions")
    with pytest.raises(ValueError, match="sqlite_synchronous"):
        Settings(home=tmp_path)
