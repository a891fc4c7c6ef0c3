"""Routing commands between replicas through Postgres (R-C1, issue 15 item 2): two
`Router`s on one database, each woken by its own `PgListener`. A command reaches its
owner and the answer its caller, the row is gone afterwards; a caller never hangs — no
owner serving: `route_timeout`; the owner's lease gone: `owner_lost`; the owner process
restarted (same replica id) while running it: `owner_restarted`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from agentd.session.errors import SessionError, SessionErrorKind
from agentd.session.routing import Router
from agentd.store import leases as store_leases
from agentd.store.db import Store
from agentd.store.notify import PgListener, asyncpg_dsn
from agentd.store.routed import RoutedCommand
from tests.support.databases import postgres_database

pytestmark = pytest.mark.timeout(60)
SID = "sess_routed"


@contextlib.asynccontextmanager
async def listening(url: str, router: Router) -> AsyncIterator[PgListener]:
    listener = PgListener(url, {router.channel: router.on_notification}, on_connect=router.on_connect)
    task = asyncio.create_task(listener.run())
    try:
        await asyncio.wait_for(listener.connected.wait(), 10)
        yield listener
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _rows(url: str) -> int:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        return int(await conn.fetchval("SELECT count(*) FROM routed_commands"))
    finally:
        await conn.close()


async def _forward(
    router: Router, owner: str, *, wait_for_turn: bool = False, **params: Any
) -> dict[str, Any]:
    return await router.forward(
        session_id=SID,
        owner=owner,
        method="session/prompt",
        params={"sessionId": SID, **params},
        principal="alice",
        teams=("core",),
        wait_for_turn=wait_for_turn,
    )


async def test_commands_reach_the_owner_and_callers_never_hang() -> None:
    async with postgres_database() as url:
        store = await Store.open(url)
        await store.migrate()
        await store.create_session(id=SID, owner="alice", cwd="/w", mode="default", model="m")
        engine = store.engine
        seen: list[RoutedCommand] = []
        holding: asyncio.Queue[RoutedCommand] = asyncio.Queue()
        release = asyncio.Event()

        async def execute(command: RoutedCommand) -> dict[str, Any]:
            seen.append(command)
            if command.params.get("hold"):
                holding.put_nowait(command)
                await release.wait()
            return {"result": {"echo": command.params, "as": command.principal}}

        owner = Router(engine, "replica-a", timeout_s=30, check_interval_s=0.2)
        owner.execute = execute
        caller = Router(engine, "replica-b", timeout_s=1.0, check_interval_s=0.2)
        try:
            await owner.start()
            await caller.start()
            assert await store_leases.acquire(engine, SID, "replica-a", 30, 1) == 1
            async with listening(url, owner), listening(url, caller):
                # Reaches the owner, as the caller's principal and teams; the answer comes back.
                answer = await _forward(caller, "replica-a", n=1)
                assert answer == {"result": {"echo": {"sessionId": SID, "n": 1}, "as": "alice"}}
                assert seen[-1].teams == ("core",) and seen[-1].caller == "replica-b"
                assert await _rows(url) == 0  # read and deleted
                # The owner does not answer in time: a clear, retryable error at the deadline.
                with pytest.raises(SessionError) as timed_out:
                    await _forward(caller, "replica-a", hold=True)
                assert timed_out.value.kind is SessionErrorKind.ROUTE_FAILED
                assert timed_out.value.data == {"reason": "route_timeout", "retryable": True}
                assert await _rows(url) == 0  # withdrawn: the late answer finds nothing
                await holding.get()
                release.set()
                # Sent to a replica that does not hold the session (it died long ago):
                # `owner_lost`, without waiting for the deadline.
                with pytest.raises(SessionError) as gone:
                    await _forward(caller, "replica-x")
                assert gone.value.data == {"reason": "owner_lost", "retryable": True}
                release.clear()
                # A prompt waits for its turn with no deadline — only while the owner holds
                # the session: once the lease is gone, `owner_lost`.
                held = asyncio.create_task(_forward(caller, "replica-a", wait_for_turn=True, hold=True))
                await asyncio.wait_for(holding.get(), 10)
                await store_leases.release(engine, SID, "replica-a", 1)
                with pytest.raises(SessionError) as lost:
                    await held
                assert lost.value.data == {"reason": "owner_lost", "retryable": True}
                release.set()
                # The owner process restarts (same replica id) with a command running:
                # the new process answers it `owner_restarted`.
                release.clear()
                assert await store_leases.acquire(engine, SID, "replica-a", 30, 1) == 2
                running = asyncio.create_task(_forward(caller, "replica-a", wait_for_turn=True, hold=True))
                await asyncio.wait_for(holding.get(), 10)
                restarted = Router(engine, "replica-a", timeout_s=30, check_interval_s=0.2)
                await restarted.start()
                answer = await asyncio.wait_for(running, 10)
                assert answer["error"]["data"]["reason"] == "owner_restarted", answer
                assert answer["error"]["code"] == -32021, answer
                release.set()
            await owner.stop()
            assert await _rows(url) == 0
        finally:
            release.set()
            await store.close()
