"""A routed command's forward, its claim, and the delete of the rows whose outcome was
delivered, commit without waiting for their WAL flush — for their own statement only
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
            async with driver(engine) as conn:  # the claim's unflushed commit was its own only
                assert await conn.fetchval("SHOW synchronous_commit") == "on"
                state = await conn.fetchval("SELECT state FROM routed_commands WHERE id = $1", command_id)
            assert state == "running"
            assert not await rows.withdraw(engine, command_id)  # started: never withdrawn
        finally:
            await engine.dispose()


async def test_forwards_made_together_are_submitted_in_one_statement_each_with_its_own_id() -> None:
    """`submit_many` = `submit` of each forward: its own row, id and wake-up of its target, the
    ids in the forwards' order; its connection still commits durably afterwards."""
    async with postgres_database(migrated=True) as url:
        engine = create_async_engine(url, pool_size=1, max_overflow=0)
        listener = await asyncpg.connect(asyncpg_dsn(url))
        heard: dict[str, asyncio.Queue[str]] = {t: asyncio.Queue() for t in ("a", "c")}
        try:
            for target, queue in heard.items():
                await listener.add_listener(
                    rows.replica_channel(target), lambda *a, q=queue: q.put_nowait(a[3])
                )
            forwards = [
                rows.Forward(f"s{n}", "a" if n % 2 else "c", "b", "m", "p", ("eng",), {"n": n})
                for n in range(6)
            ]
            first = await rows.submit_many(engine, forwards[:1])  # a lone one: the plain statement
            ids = first + await rows.submit_many(engine, forwards[1:])
            assert len(set(ids)) == 6
            for forward, command_id in zip(forwards, ids, strict=True):
                command = await rows.claim(engine, command_id, forward.target, "inc")
                assert command is not None
                got = (command.session_id, command.params, command.teams)
                assert got == (forward.session_id, forward.params, ("eng",))
            for target, queue in heard.items():
                got = [await asyncio.wait_for(queue.get(), 10) for _ in range(3)]
                want = [i for f, i in zip(forwards, ids, strict=True) if f.target == target]
                assert sorted(got) == sorted(rows.payload(rows.Wake.COMMAND, i) for i in want)
            async with driver(engine) as conn:
                assert await conn.fetchval("SHOW synchronous_commit") == "on"
        finally:
            await listener.close()
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


async def test_the_owner_claims_stores_and_replies_for_many_commands_in_one_statement_each() -> None:
    """claim_many, finish_many_quiet and send_replies answer as claim, finish(wake=False)
    and send_reply would for each command (issue 26 item 5: an owner woken for many)."""
    async with postgres_database(migrated=True) as url:
        engine = create_async_engine(url, pool_size=1, max_overflow=0)
        listener = await asyncpg.connect(asyncpg_dsn(url))
        heard: asyncio.Queue[str] = asyncio.Queue()
        try:
            await listener.add_listener(rows.replica_channel("b"), lambda *a: heard.put_nowait(a[3]))

            async def submit(target: str) -> int:
                return await rows.submit(
                    engine, session_id="s", target=target, caller="b", method="m", principal="p",
                    teams=("eng",), params={"n": target},
                )  # fmt: skip

            mine, elsewhere, withdrawn = await submit("a"), await submit("c"), await submit("a")
            assert await rows.withdraw(engine, withdrawn)
            taken = await rows.claim_many(engine, [withdrawn, mine, elsewhere], "a", "inc")
            assert [c.id if c else None for c in taken] == [None, mine, None]
            command = taken[1]
            assert command is not None and command.teams == ("eng",) and command.params == {"n": "a"}
            # Taken again by the same process (an answer lost), not by another one.
            assert (await rows.claim_many(engine, [mine], "a", "other"))[0] is None
            assert (await rows.claim_many(engine, [mine], "a", "inc"))[0] is not None

            outcomes = [(mine, '{"result":{"ok":1}}'), (elsewhere, '{"result":{}}')]
            await rows.finish_many_quiet(engine, outcomes)
            assert await rows.take_outcome(engine, mine) == (rows.State.DONE, {"result": {"ok": 1}})
            assert await rows.take_outcome(engine, elsewhere) == (rows.State.PENDING, None)  # never running
            assert await rows.take_outcome(engine, mine) == (None, None)  # taken: its row is gone

            second = rows.RoutedCommand(8, "s", "b", "m", "p", (), {})
            await rows.send_replies(engine, [(command, '{"result":{"n":1}}'), (second, '{"result":{"n":2}}')])
            got = [await asyncio.wait_for(heard.get(), 10) for _ in range(2)]
            assert [rows.parse_payload(raw) for raw in got] == [(rows.Wake.REPLY, mine), (rows.Wake.REPLY, 8)]
            assert rows.carried_outcome(got[1]) == {"result": {"n": 2}}
            async with driver(engine) as conn:
                assert await conn.fetchval("SHOW synchronous_commit") == "on"
        finally:
            await listener.close()
            await engine.dispose()
