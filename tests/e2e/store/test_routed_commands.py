"""Routing commands between replicas through Postgres (R-C1, issue 15 item 2): two
`Router`s on one database, each woken by its own `PgListener`. A command reaches its
owner and the answer its caller, the row is gone afterwards; a caller never hangs — no
owner serving: `route_timeout`; the owner's lease gone: `owner_lost`; the owner process
restarted (same replica id) while running it: `owner_restarted`. A command the dead owner
never started is withdrawn (`OwnerGone.ran` False: safe to carry on elsewhere, and the owner
coming back can no longer run it). A pool with no free connection on the owner delays a
command, never loses it, and never ends the router (issue 26 item 5)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from agentd.session.errors import SessionError, SessionErrorKind
from agentd.session.replicas.routing import OwnerGone, Router
from agentd.store import leases as store_leases
from agentd.store import routed as routed_rows
from agentd.store.db import Store
from agentd.store.notify import PgListener, asyncpg_dsn
from agentd.store.routed import RoutedCommand
from tests.support.databases import postgres_database
from tests.support.polling import until

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


async def _no_rows(url: str) -> bool:
    return await _rows(url) == 0


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
    async with postgres_database(migrated=True) as url:
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
                await until(
                    lambda: _no_rows(url), 10
                )  # deleted (later: the outcome came in its notification)
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


async def test_a_command_the_dead_owner_never_started_is_withdrawn_for_carrying_on() -> None:
    async with postgres_database(migrated=True) as url:
        store = await Store.open(url)
        await store.create_session(id=SID, owner="alice", cwd="/w", mode="default", model="m")
        caller = Router(store.engine, "replica-b", timeout_s=30, check_interval_s=0.2)
        try:
            await caller.start()
            assert await store_leases.acquire(store.engine, SID, "replica-a", 30, 1) == 1
            async with listening(url, caller):
                # A is dead (nobody serves its channel): the command waits while its lease runs.
                sent = asyncio.create_task(_forward(caller, "replica-a", wait_for_turn=True, n=1))
                await until(lambda: _has_rows(url), 10)
                assert not sent.done()
                await store_leases.release(store.engine, SID, "replica-a", 1)  # the lease ran out
                with pytest.raises(OwnerGone) as gone:
                    await asyncio.wait_for(sent, 10)
                assert gone.value.ran is False and gone.value.holder is None
                assert gone.value.data == {"reason": "owner_lost", "retryable": True}
                assert await _rows(url) == 0  # withdrawn: A, were it to come back, finds nothing to run
        finally:
            await store.close()


async def test_an_exhausted_pool_on_the_owner_delays_a_command_and_the_router_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with postgres_database(migrated=True) as url:
        store = await Store.open(url)
        await store.create_session(id=SID, owner="alice", cwd="/w", mode="default", model="m")
        tiny = create_async_engine(url, pool_size=1, max_overflow=0, pool_timeout=0.1)
        owner = Router(tiny, "replica-a", timeout_s=30, check_interval_s=0.2)
        caller = Router(store.engine, "replica-b", timeout_s=30, check_interval_s=0.2)

        async def execute(command: RoutedCommand) -> dict[str, Any]:
            return {"result": {"n": command.params["n"]}}

        owner.execute = execute
        rescans = asyncio.create_task(owner.run())
        try:
            await owner.start()
            await caller.start()
            assert await store_leases.acquire(store.engine, SID, "replica-a", 30, 1) == 1
            async with listening(url, owner), listening(url, caller):
                async with tiny.connect() as hog:  # the owner's only connection, taken
                    await hog.execute(text("SELECT 1"))
                    sent = asyncio.create_task(_forward(caller, "replica-a", n=1))
                    await until(lambda: "claiming routed command" in caplog.text, 10)
                    assert not sent.done()
                # Freed: the claim goes through on a retry (or the rescan), the answer comes back.
                assert await asyncio.wait_for(sent, 20) == {"result": {"n": 1}}
                assert await _forward(caller, "replica-a", n=2) == {"result": {"n": 2}}  # still serving
            assert "Task exception was never retrieved" not in caplog.text
            assert not rescans.done()
        finally:
            rescans.cancel()
            await owner.stop()
            await tiny.dispose()
            await store.close()


async def _has_rows(url: str) -> bool:
    return await _rows(url) > 0


async def test_a_claim_whose_answer_was_lost_is_taken_again_by_the_same_process() -> None:
    """The claim committed but its connection dropped before the answer: the row is running
    under this process's own stamp; the retry (or the next rescan) takes it again and runs
    it, instead of leaving its caller waiting for good."""
    async with postgres_database(migrated=True) as url:
        store = await Store.open(url)
        await store.create_session(id=SID, owner="alice", cwd="/w", mode="default", model="m")
        owner = Router(store.engine, "replica-a", timeout_s=30, check_interval_s=0.2)
        caller = Router(store.engine, "replica-b", timeout_s=30, check_interval_s=0.2)
        ran: list[int] = []

        async def execute(command: RoutedCommand) -> dict[str, Any]:
            ran.append(command.id)
            return {"result": {"n": command.params["n"]}}

        owner.execute = execute
        try:
            await caller.start()
            assert await store_leases.acquire(store.engine, SID, "replica-a", 30, 1) == 1
            async with listening(url, caller):  # (nobody listens for A: it is woken by hand)
                sent = asyncio.create_task(_forward(caller, "replica-a", n=7))
                await until(lambda: _has_rows(url), 10)
                (command_id,) = await routed_rows.pending(store.engine, "replica-a", owner.incarnation)
                assert await routed_rows.claim(
                    store.engine, command_id, "replica-a", owner.incarnation
                )  # answer "lost"
                other = await routed_rows.claim(store.engine, command_id, "replica-a", "another-process")
                assert other is None  # nobody else can take it
                await owner.rescan()
                assert await asyncio.wait_for(sent, 10) == {"result": {"n": 7}}
                assert ran == [command_id]  # run once
        finally:
            await owner.stop()
            await store.close()
