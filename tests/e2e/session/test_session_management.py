"""Session management (R-P2, R-P3, R-S3): resume, close, delete, fork, and idempotent
prompt submission with `_meta.agentd.requestId`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.acp_schema import AcpValidator
from tests.support.client import RpcFailed, agent_text, text_prompt
from tests.support.polling import until
from tests.support.server import scripted
from tests.support.session import new_session, served_session


async def test_initialize_advertises_resume_close_delete(server_factory):
    async with server_factory(scripted()) as server:
        client = await server.client()
        init = client.frames[0]["result"]
        assert init["agentCapabilities"]["sessionCapabilities"] == {
            "list": {}, "resume": {}, "close": {}, "delete": {}
        }  # fmt: skip
        assert "_agentd/session/fork" in init["_meta"]["agentd"]["extensions"]
        await client.close()


async def test_resume_attaches_without_replaying(server_factory, workspace: Path):
    provider = scripted({"text": "first"}, {"text": "second"})
    async with served_session(server_factory, workspace, provider) as (server, a, sid):
        await a.call("session/prompt", text_prompt(sid, "one"))
        b = await server.client()
        result = await b.call("session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        assert result["modes"]["currentModeId"] == "default"
        assert agent_text(b.updates(sid)) == ""  # no replay
        await a.call("session/prompt", text_prompt(sid, "two"))
        await b.wait_notification(
            lambda m: m["method"] == "_agentd/event" and m["params"]["kind"] == "turn_ended"
        )
        assert agent_text(b.updates(sid)) == "second"  # but live traffic flows
        for frame in b.frames:
            AcpValidator.default().assert_valid_agent_frame(frame, b.sent_methods)
        await a.close()
        await b.close()


async def test_close_cancels_the_running_turn_and_the_session_stays_loadable(server_factory, workspace: Path):
    provider = scripted({"text": "x" * 200, "chunk_size": 2, "chunk_delay": 0.05}, {"text": "again"})
    async with served_session(server_factory, workspace, provider) as (server, client, sid):
        prompt = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "talk")))
        await client.wait_notification(
            lambda m: (
                m["method"] == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            )
        )
        assert await client.call("session/close", {"sessionId": sid}) == {}
        response = await prompt
        assert response["result"]["stopReason"] == "cancelled"
        other = await server.client()
        await other.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        assert agent_text(other.updates(sid)).startswith("xx")
        result = await other.call("session/prompt", text_prompt(sid, "again"))
        assert result["stopReason"] == "end_turn"
        await client.close()
        await other.close()


async def test_delete_removes_the_session_everywhere(server_factory, workspace: Path):
    async with served_session(server_factory, workspace, scripted({"text": "hi"})) as (server, client, sid):
        await client.call("session/prompt", text_prompt(sid, "hello"))
        assert await client.call("session/delete", {"sessionId": sid}) == {}
        assert (await client.call("session/list", {}))["sessions"] == []
        assert await server.app.state.agentd.store.read_events(sid) == []
        with pytest.raises(RpcFailed) as err:
            await client.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        assert err.value.code == -32002


async def test_fork_copies_history_up_to_a_seq(server_factory, workspace: Path):
    provider = scripted({"text": "answer one"}, {"text": "answer two"}, {"text": "forked answer"})
    async with served_session(server_factory, workspace, provider) as (server, client, sid):
        await client.call("session/prompt", text_prompt(sid, "question one"))
        await server.app.state.agentd.writer.barrier()
        cut = max(e.seq for e in await server.app.state.agentd.store.read_events(sid))
        await client.call("session/prompt", text_prompt(sid, "question two"))

        fork = await client.call("_agentd/session/fork", {"sessionId": sid, "upToSeq": cut})
        assert fork["forkedFrom"] == sid and fork["upToSeq"] == cut
        fid = fork["sessionId"]
        assert fid != sid
        events = await server.app.state.agentd.store.read_events(fid)
        assert events and max(e.seq for e in events) == cut
        # The fork continues from the first exchange only.
        await client.call("session/prompt", text_prompt(fid, "question three"))
        users = [m.content for m in provider.requests[-1].messages if m.role == "user"]
        assert users == ["question one", "question three"]
        # The original is untouched.
        listed = {s["sessionId"]: s for s in (await client.call("session/list", {}))["sessions"]}
        assert set(listed) == {sid, fid}
        assert listed[fid]["title"].startswith("fork of ")
        with pytest.raises(RpcFailed) as err:
            await client.call("_agentd/session/fork", {"sessionId": sid, "upToSeq": 10_000})
        assert err.value.code == -32602


async def test_a_retried_request_id_never_runs_twice(server_factory, workspace: Path):
    provider = scripted({"text": "slow answer", "delay": 0.3}, {"text": "other"})
    async with served_session(server_factory, workspace, provider) as (server, client, sid):
        params = text_prompt(sid, "do it once", requestId="req-42")
        first = asyncio.create_task(client.request("session/prompt", params))
        await client.wait_notification(
            lambda m: m["method"] == "_agentd/event" and m["params"]["kind"] == "turn_started"
        )
        # The client lost its connection and retries with the same requestId, twice.
        retry_client = await server.client()
        second = await retry_client.call("session/prompt", params)
        first_result = (await first)["result"]
        assert second["_meta"]["agentd"]["promptId"] == first_result["_meta"]["agentd"]["promptId"]
        assert second["stopReason"] == first_result["stopReason"] == "end_turn"
        third = await retry_client.call("session/prompt", params)  # after it finished
        assert third == second
        assert len(provider.requests) == 1  # queued and run exactly once
        started = [
            f
            for f in client.frames
            if f.get("method") == "_agentd/event" and f["params"]["kind"] == "turn_started"
        ]
        assert len(started) == 1
        await client.close()
        await retry_client.close()


async def test_idle_actors_are_evicted_and_recreated_transparently(server_factory, workspace: Path):
    provider = scripted({"text": "before"}, {"text": "after"})
    async with server_factory(provider, idle_evict_s=0.2) as server:
        manager = server.app.state.agentd.manager
        client = await server.client()
        sid = await new_session(client, workspace)
        await client.call("session/prompt", text_prompt(sid, "one"))
        # Attached client: never evicted, however long it idles.
        assert await manager.evict_idle(0.0) == []
        await client.call("_agentd/session/detach", {"sessionId": sid})
        # The background sweep evicts it.
        await until(lambda: sid not in {a.id for a in manager.live()}, what="the idle session's eviction")
        # ...and the next request recreates it from the store with its full context.
        result = await client.call("session/prompt", text_prompt(sid, "two"))
        assert result["stopReason"] == "end_turn"
        assert [m.content for m in provider.requests[-1].messages if m.role == "user"] == ["one", "two"]
        await client.close()
