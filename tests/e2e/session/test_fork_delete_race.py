"""`_agentd/session/fork` racing `session/delete` (issue 9): the fork either succeeds with
the whole history it asked for or fails "not found" (-32002), never with an internal
error, and nothing half-made is left behind (no fork without its history, no orphaned
events or messages of the deleted session, no live actor for it)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import text

from agentd.store.db import Store
from tests.support.client import text_prompt
from tests.support.server import scripted
from tests.support.session import new_session

ROUNDS = 20
RESOURCE_NOT_FOUND = -32002


async def test_fork_racing_delete_is_a_clean_success_or_not_found(
    server_factory, workspace: Path, db_url: str
) -> None:
    async with server_factory(scripted({"text": "hello there"}, loop=True), database_url=db_url) as server:
        forker = await server.client()
        deleter = await server.client()
        sources: list[str] = []
        forks: dict[str, str] = {}  # fork id → source id
        outcomes: list[str] = []
        for i in range(ROUNDS):
            sid = await new_session(forker, workspace)
            await forker.call("session/prompt", text_prompt(sid, f"round {i}"))
            sources.append(sid)
            fork = forker.request("_agentd/session/fork", {"sessionId": sid})
            delete = deleter.request("session/delete", {"sessionId": sid})
            # Alternate who goes first so both interleavings get exercised.
            if i % 2:
                deleted, forked = await asyncio.gather(delete, fork)
            else:
                forked, deleted = await asyncio.gather(fork, delete)
            assert deleted.get("result") == {} or deleted["error"]["code"] == RESOURCE_NOT_FOUND, deleted
            if "error" in forked:
                assert forked["error"]["code"] == RESOURCE_NOT_FOUND, forked
                outcomes.append("not_found")
            else:
                forks[forked["result"]["sessionId"]] = sid
                outcomes.append("forked")
            assert server.app.state.agentd.manager.live_actor(sid) is None  # deleted: not live

        # Every successful fork is a whole session: loadable, with the source's exchange.
        listed = {s["sessionId"] for s in (await forker.call("session/list", {}))["sessions"]}
        assert listed == set(forks)  # every source is gone, every fork that succeeded is there
        for fid in forks:
            viewer = await server.client()
            await viewer.call("session/load", {"sessionId": fid, "cwd": str(workspace), "mcpServers": []})
            texts = [u["content"]["text"] for u in viewer.updates(fid) if "content" in u]
            assert "hello there" in "".join(texts)
            await viewer.close()
        await forker.close()
        await deleter.close()

    store = await Store.open(db_url)
    try:
        async with store.engine.connect() as conn:
            for table in ("events", "messages"):
                orphans = await conn.execute(
                    text(f"SELECT count(*) FROM {table} WHERE session_id NOT IN (SELECT id FROM sessions)")
                )
                assert orphans.scalar_one() == 0, table
            for sid in sources:
                assert await store.get_session(sid) is None
    finally:
        await store.close()
    assert len(outcomes) == ROUNDS


async def test_forking_a_source_deleted_after_it_was_read_creates_nothing(migrated_db_url: str) -> None:
    """The store's side of the race: the source record was read, then the session was
    deleted before the copy began. The fork must roll its own row back."""
    store = await Store.open(migrated_db_url)
    try:
        await store.migrate()
        source = await store.create_session(id="sess_src", owner="local", cwd="/", mode="default", model="m")
        assert await store.delete_session(source.id)
        assert await store.fork_session(source, "sess_fork", up_to_seq=0) is None
        assert await store.get_session("sess_fork") is None
        # With the source still there, the same call makes a whole fork.
        again = await store.create_session(id="sess_src2", owner="local", cwd="/", mode="default", model="m")
        fork = await store.fork_session(again, "sess_fork2", up_to_seq=0)
        assert fork is not None and fork.title == "fork of sess_src2"
    finally:
        await store.close()
