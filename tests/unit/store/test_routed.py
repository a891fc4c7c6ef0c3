"""A routed command's forward, and the delete of the rows whose outcome was delivered,
commit without waiting for their WAL flush — for their own statement only
(agentd/store/routed.py, issue 26 item 5): the pooled connection they used still commits
everything else durably, and what they wrote is committed at once."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from agentd.store import routed as rows
from agentd.store.notify import asyncpg_dsn
from agentd.store.pg_driver import driver
from tests.support.databases import postgres_database

pytestmark = pytest.mark.timeout(60)


async def test_a_forward_leaves_its_connection_committing_durably() -> None:
    async with postgres_database(migrated=True) as url:
        engine = create_async_engine(url, pool_size=1, max_overflow=0)  # one connection: the same one
        try:
            command_id = await rows.submit(
                engine, session_id="s", target="a", caller="b", method="m", principal="p", teams=(), params={}
            )
            async with driver(engine) as conn:
                assert await conn.fetchval("SHOW synchronous_commit") == "on"
                state = await conn.fetchval("SELECT state FROM routed_commands WHERE id = $1", command_id)
            assert state == "pending"
            claimed = await rows.claim(engine, command_id, "a", "incarnation")
            assert claimed is not None and claimed.id == command_id
        finally:
            await engine.dispose()


async def test_deleting_delivered_rows_leaves_its_connection_committing_durably() -> None:
    async with postgres_database(migrated=True) as url:
        engine = create_async_engine(url, pool_size=1, max_overflow=0)
        try:
            ids = [
                await rows.submit(
                    engine,
                    session_id="s",
                    target="a",
                    caller="b",
                    method="m",
                    principal="p",
                    teams=(),
                    params={},
                )
                for _ in range(3)
            ]
            await rows.forget_many(engine, ids[:2])
            async with driver(engine) as conn:
                assert await conn.fetchval("SHOW synchronous_commit") == "on"
                left = await conn.fetch("SELECT id FROM routed_commands")
            assert [r["id"] for r in left] == ids[2:]
        finally:
            await engine.dispose()


async def test_a_reply_sent_beside_the_outcome_wakes_the_caller_and_leaves_its_connection_durable() -> None:
    async with postgres_database(migrated=True) as url:
        engine = create_async_engine(url, pool_size=1, max_overflow=0)
        listener = await asyncpg.connect(asyncpg_dsn(url))
        heard: asyncio.Queue[str] = asyncio.Queue()
        try:
            await listener.add_listener(rows.replica_channel("b"), lambda *a: heard.put_nowait(a[3]))
            command = rows.RoutedCommand(7, "s", "b", "m", "p", (), {})
            await rows.send_reply(engine, command, '{"result":{"ok":true}}')
            raw = await asyncio.wait_for(heard.get(), 10)
            assert rows.carried_outcome(raw) == {"result": {"ok": True}}
            async with driver(engine) as conn:
                assert await conn.fetchval("SHOW synchronous_commit") == "on"
        finally:
            await listener.close()
            await engine.dispose()
