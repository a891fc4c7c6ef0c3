"""Issue 28 item 7: `_agentd/session/compact` acknowledged while a turn runs ("scheduled")
survives `kill -9` like an acknowledged prompt — the request is a compaction job stored in
the queue before the answer goes out, and the restarted server runs it. A real
`agentd serve`, on SQLite and Postgres."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentd.store.db import Store
from tests.support.client import WsClient, text_prompt
from tests.support.polling import value_of
from tests.support.proc import agentd_serve, write_script

# Streams its first chunk, then stalls until the server dies: once that chunk is seen, the
# turn's request is under way and a compaction can only be scheduled for its next one.
GATE_STEP = {"text": "working on it", "chunk_size": 4, "chunk_delay": 60}
SUMMARY = "The user asked two questions; the agent answered both."


async def compaction_payloads(db_url: str, sid: str) -> list[dict[str, Any]] | None:
    store = await Store.open(db_url)
    try:
        events = await store.read_events(sid)
    finally:
        await store.close()
    found = [e.payload for e in events if e.kind == "compaction"]
    return found or None


async def test_a_compaction_acknowledged_behind_a_running_turn_survives_kill_9(
    tmp_path: Path, workspace: Path, db_url: str
) -> None:
    first_life = write_script(
        tmp_path / "first.json", [{"text": "one"}, {"text": "two"}, GATE_STEP], loop=False
    )
    async with agentd_serve(tmp_path / "a", database_url=db_url, script=str(first_life)) as server:
        client = await WsClient.connect(server.base_url)
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        for text in ("first question", "second question"):
            assert (await client.call("session/prompt", text_prompt(sid, text)))["stopReason"] == "end_turn"
        running = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "long job")))
        await client.wait_notification(
            lambda m: (
                m["method"] == "session/update"
                and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk"
                and m["params"]["update"]["content"].get("text") == "work"
            ),
            within=30,
        )
        scheduled = await client.call("_agentd/session/compact", {"sessionId": sid})
        assert scheduled == {"status": "scheduled"}
        # Acknowledged: the server dies at once, before the turn reaches another request.
        await server.kill9()
        running.cancel()
        await client.close()
    assert await compaction_payloads(db_url, sid) is None  # nothing compacted yet

    second_life = write_script(tmp_path / "second.json", [{"text": SUMMARY}], loop=True)
    async with agentd_serve(tmp_path / "b", database_url=db_url, script=str(second_life)):
        # The stored job is resumed with the session's queue and compacts it.
        payloads = await value_of(lambda: compaction_payloads(db_url, sid), 60, what="the compaction ran")
    [compaction] = payloads
    replaced = [m.get("content") for m in compaction["replaced"]]
    assert "first question" in replaced
