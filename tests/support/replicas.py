"""Several real `agentd serve` processes on one fresh Postgres database — replicas of one
deployment, each with its own replica id, home and log — and tokens for their users."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import text

from agentd.infra.auth import create_token
from agentd.store.db import Store
from tests.support.databases import postgres_database
from tests.support.proc import AgentdProcess, agentd_serve, write_script

_EXPIRE = text("UPDATE session_leases SET expires_at = now() WHERE session_id = :s")


@dataclass
class Replicas:
    url: str  # the shared database
    servers: dict[str, AgentdProcess]  # replica id → process

    @property
    def a(self) -> AgentdProcess:
        return self.servers["replica-a"]

    @property
    def b(self) -> AgentdProcess:
        return self.servers["replica-b"]

    async def expire_lease(self, session_id: str) -> None:
        """The session's lease runs out now (by the database's clock): a test drives the
        expiry a stopped or killed owner would reach, instead of waiting a lease time on a
        loaded machine — the lease can then be long, and no live replica loses one by
        being starved of CPU for a moment."""
        store = await Store.open(self.url)
        try:
            async with store.engine.begin() as conn:
                await conn.execute(_EXPIRE, {"s": session_id})
        finally:
            await store.close()

    async def tokens(self, *principals: str, teams: Iterable[str] = ()) -> list[str]:
        """A new token for each principal, a member of `teams`."""
        store = await Store.open(self.url)
        try:
            return [(await create_token(store, p, teams=teams))[0] for p in principals]
        finally:
            await store.close()


@contextlib.asynccontextmanager
async def replicas(tmp_path: Path, scripts: Mapping[str, Path], **settings: str) -> AsyncIterator[Replicas]:
    """One replica per entry of `scripts` (replica id → its scripted provider's script file),
    all with `settings`, started side by side on a fresh database: one migrates it, the
    others wait for that. Each lives in `tmp_path / <replica id>`, its log `<replica id>.log`."""
    async with postgres_database() as url, contextlib.AsyncExitStack() as stack:

        def serve(rid: str) -> Any:
            return agentd_serve(
                tmp_path / rid,
                f"{rid}.log",
                replica_id=rid,
                database_url=url,
                script=str(scripts[rid]),
                **settings,
            )

        async with asyncio.TaskGroup() as starting:
            started = {rid: starting.create_task(stack.enter_async_context(serve(rid))) for rid in scripts}
        yield Replicas(url, {rid: task.result() for rid, task in started.items()})


@contextlib.asynccontextmanager
async def two_replicas(
    tmp_path: Path, script: list[dict[str, Any]], **settings: str
) -> AsyncIterator[Replicas]:
    """Replicas `replica-a` and `replica-b`, both playing `script` (looped)."""
    path = write_script(tmp_path / "script.json", script, loop=True)
    async with replicas(tmp_path, {"replica-a": path, "replica-b": path}, **settings) as started:
        yield started
