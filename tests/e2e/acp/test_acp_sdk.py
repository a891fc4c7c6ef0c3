"""End to end with the official ACP Python SDK (`agent-client-protocol`), unchanged.

The SDK's own WebSocket transport (`acp.ws.create_websocket_stream`) is wrapped in a
recording proxy so that every frame agentd sent can be checked against the pinned ACP
schema, while the SDK does all the JSON-RPC work (ids, routing, pydantic models).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from acp import text_block
from acp.schema import (
    AgentMessageChunk,
    CurrentModeUpdate,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)

from tests.support.acp_sdk import sdk_connection
from tests.support.server import scripted

# ---------------------------------------------------------------------------- helpers


def write_then_bash_script() -> Any:
    return scripted(
        {
            "text": "I will write the file.",
            "chunk_size": 4,
            "tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "from sdk\n"}}],
        },
        {
            "text": "Now a command.",
            "chunk_size": 4,
            "tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}],
        },
        {"text": "All done.", "chunk_size": 3},
    )


# ---------------------------------------------------------------------------- tests


async def test_sdk_prompt_with_two_permissioned_tools_and_valid_frames(server_factory, workspace: Path):
    async with (
        server_factory(write_then_bash_script()) as server,
        sdk_connection(server) as (conn, client, tr),
    ):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        assert session.modes is not None and session.modes.current_mode_id == "default"

        response = await conn.prompt(session_id=sid, prompt=[text_block("write out.txt then say hi")])

        assert response.stop_reason == "end_turn"
        assert (workspace / "out.txt").read_text() == "from sdk\n"
        # Updates arrived through the SDK's typed models.
        assert client.agent_text(sid) == "I will write the file.Now a command.All done."
        assert len(client.of(sid, AgentMessageChunk)) > 3  # streamed, not one blob
        starts = client.of(sid, ToolCallStart)
        assert [s.kind for s in starts] == ["edit", "execute"]
        assert all(s.status == "pending" for s in starts)
        finals = {
            u.tool_call_id: u.status
            for u in client.of(sid, ToolCallProgress)
            if u.status in ("completed", "failed")
        }
        assert finals == {starts[0].tool_call_id: "completed", starts[1].tool_call_id: "completed"}
        bash_final = next(
            u
            for u in client.of(sid, ToolCallProgress)
            if u.tool_call_id == starts[1].tool_call_id and u.status == "completed"
        )
        assert bash_final.raw_output == {"exitCode": 0, "truncated": False}
        shown = [c.content.text for c in bash_final.content or [] if c.type == "content"]
        assert shown and shown[-1].strip() == "hi"
        # Exactly two permission requests, one per tool call, answered through the SDK.
        assert len(client.permission_requests) == 2
        assert [p[1].tool_call_id for p in client.permission_requests] == [s.tool_call_id for s in starts]
        assert all(p[0] == sid for p in client.permission_requests)
        # The SDK answered with the option it was offered (its response frame went out).
        answered = [m for m in tr.sent if "result" in m]
        assert [m["result"]["outcome"] for m in answered] == [
            {"outcome": "selected", "optionId": "allow_once"}
        ] * 2
        # Every frame the server sent is valid ACP (camelCase, no nulls, per-method schema).
        tr.assert_all_frames_valid()
        # The prompt response is the last frame of the turn for this request.
        assert tr.index_of_response("session/prompt") > max(
            i for i, f in enumerate(tr.received) if f.get("method") == "session/update"
        )


async def test_sdk_load_session_replays_history_before_responding(server_factory, workspace: Path):
    async with server_factory(write_then_bash_script()) as server:
        async with sdk_connection(server) as (conn, client, _):
            sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
            assert (
                await conn.prompt(session_id=sid, prompt=[text_block("do the thing")])
            ).stop_reason == "end_turn"
            live_text = client.agent_text(sid)
            live_calls = [s.tool_call_id for s in client.of(sid, ToolCallStart)]

        async with sdk_connection(server) as (conn2, client2, tr2):
            loaded = await conn2.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
            # Replayed before the response came back: already delivered when `load_session` returns.
            assert loaded.modes is not None and loaded.modes.current_mode_id == "default"
            users = client2.of(sid, UserMessageChunk)
            assert [u.content.text for u in users] == ["do the thing"]
            assert client2.agent_text(sid) == live_text
            assert [s.tool_call_id for s in client2.of(sid, ToolCallStart)] == live_calls
            completed = [u.tool_call_id for u in client2.of(sid, ToolCallProgress) if u.status == "completed"]
            assert completed == live_calls
            # The history starts with the user's prompt.
            assert isinstance(client2.updates[0][1], UserMessageChunk)
            # On the wire: every replayed update precedes the session/load response.
            load_at = tr2.index_of_response("session/load")
            updates_at = [i for i, f in enumerate(tr2.received) if f.get("method") == "session/update"]
            assert updates_at and max(updates_at) < load_at
            tr2.assert_all_frames_valid()


async def test_sdk_list_sessions_returns_the_session(server_factory, workspace: Path):
    async with server_factory(scripted({"text": "hello"})) as server, sdk_connection(server) as (conn, _, tr):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("name me")])

        listed = await conn.list_sessions()
        assert [s.session_id for s in listed.sessions] == [sid]
        info = listed.sessions[0]
        assert info.cwd == str(workspace)
        assert info.title == "name me"
        assert info.updated_at
        assert listed.next_cursor is None
        filtered = await conn.list_sessions(cwd=str(workspace / "elsewhere"))
        assert filtered.sessions == []
        tr.assert_all_frames_valid()


async def test_sdk_plan_mode_refuses_writes(server_factory, workspace: Path):
    provider = scripted(
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "plan.txt", "content": "nope"}}]},
        {"text": "I may not write in plan mode."},
    )
    async with server_factory(provider) as server, sdk_connection(server) as (conn, client, tr):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await conn.set_session_mode(session_id=sid, mode_id="plan")
        response = await conn.prompt(session_id=sid, prompt=[text_block("write plan.txt")])

        assert response.stop_reason == "end_turn"
        assert not (workspace / "plan.txt").exists()
        assert [u.current_mode_id for u in client.of(sid, CurrentModeUpdate)] == ["plan"]
        start = client.of(sid, ToolCallStart)[0]
        statuses = [
            u.status for u in client.of(sid, ToolCallProgress) if u.tool_call_id == start.tool_call_id
        ]
        assert statuses == ["failed"]  # refused outright: never in progress
        assert client.permission_requests == []  # plan mode does not even ask
        assert client.agent_text(sid) == "I may not write in plan mode."
        tr.assert_all_frames_valid()


async def test_sdk_cancel_ends_prompt_with_cancelled(server_factory, workspace: Path):
    provider = scripted(
        {"text": "x" * 400, "chunk_size": 2, "chunk_delay": 0.05, "delay": 0.1},
        {"text": "after cancel"},
    )
    async with server_factory(provider) as server, sdk_connection(server) as (conn, client, tr):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("talk slowly")]))
        await asyncio.wait_for(client.update_seen.wait(), 10)  # the turn is streaming

        await conn.cancel(session_id=sid)
        response = await asyncio.wait_for(prompt, 10)  # far sooner than the 10 s script

        assert response.stop_reason == "cancelled"
        streamed = client.agent_text(sid)
        assert 0 < len(streamed) < 400
        # The session still works afterwards.
        again = await conn.prompt(session_id=sid, prompt=[text_block("again")])
        assert again.stop_reason == "end_turn"
        assert client.agent_text(sid).endswith("after cancel")
        tr.assert_all_frames_valid()
