"""ACP's Streamable HTTP transport (issue 12, item 2): the official Python SDK's HTTP client
(`acp.http.create_http_stream`) drives a whole session over `POST /acp` + the `GET /acp`
event stream, with the same semantics as the WebSocket — a permission asked and answered,
cancel, load with replay — and every frame validates against the pinned schema."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from acp import text_block
from acp.schema import UserMessageChunk

from agentd.infra.auth import create_token
from agentd.infra.config import AuthMode, PermissionMode
from tests.support.acp_http import http_sdk
from tests.support.polling import until
from tests.support.server import scripted


def provider() -> Any:
    return scripted(
        {
            "text": "Writing.",
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "http.txt", "content": "over http\n"}}
            ],
        },
        {"text": "Done over HTTP."},
        {"text": "y" * 300, "chunk_size": 2, "chunk_delay": 0.05, "delay": 0.1},
        {"text": "after cancel"},
    )


async def test_the_sdk_http_client_runs_a_whole_session(server_factory: Any, workspace: Path) -> None:
    async with server_factory(provider(), permission_mode=PermissionMode.DEFAULT) as server:
        async with http_sdk(server.base_url) as (conn, client, transport):
            sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
            done = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("write it")]), 60)
            assert done.stop_reason == "end_turn"
            assert len(client.permission_requests) == 1  # asked over the stream, answered by POST
            assert (workspace / "http.txt").read_text() == "over http\n"
            assert client.agent_text(sid) == "Writing.Done over HTTP."

            client.update_seen.clear()
            before = client.agent_text(sid)
            slow = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("slowly")]))
            await asyncio.wait_for(client.update_seen.wait(), 30)
            await conn.cancel(session_id=sid)
            assert (await asyncio.wait_for(slow, 30)).stop_reason == "cancelled"
            assert 0 < len(client.agent_text(sid)) - len(before) < 300
            again = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("again")]), 60)
            assert again.stop_reason == "end_turn"
            transport.assert_all_frames_valid()

        # A second HTTP client loads the session: the history is replayed on its stream.
        async with http_sdk(server.base_url) as (conn, client, transport):
            await asyncio.wait_for(conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[]), 60)
            users = [u.content.text for u in client.of(sid, UserMessageChunk)]
            assert users == ["write it", "slowly", "again"]
            assert client.agent_text(sid).endswith("after cancel")
            transport.assert_all_frames_valid()
        # The connections are closed (DELETE) and forgotten.
        await until(lambda: not server.app.state.agentd.http_connections.by_id, what="the connections to go")


async def test_bad_requests_get_readable_errors(server_factory: Any, workspace: Path) -> None:
    async with (
        server_factory(scripted({"text": "x"})) as server,
        httpx.AsyncClient(base_url=server.base_url) as http,
    ):
        first = await http.post(
            "/acp", json={"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}
        )
        assert first.status_code == 400 and "initialize" in first.json()["error"]
        unknown = await http.post(
            "/acp",
            json={"jsonrpc": "2.0", "id": 1, "method": "session/list"},
            headers={"Acp-Connection-Id": "nope"},
        )
        assert unknown.status_code == 404
        stream = await http.get("/acp", headers={"Accept": "text/event-stream", "Acp-Connection-Id": "nope"})
        assert stream.status_code == 404
        assert (await http.delete("/acp", headers={"Acp-Connection-Id": "nope"})).status_code == 404
        garbage = await http.post("/acp", content=b"{not json")
        assert garbage.status_code == 400


async def test_a_connection_belongs_to_its_principal(server_factory: Any, workspace: Path) -> None:
    async with server_factory(scripted({"text": "x"}), auth=AuthMode.TOKEN) as server:
        store = server.app.state.agentd.store
        alice, _ = await create_token(store, "alice")
        bob, _ = await create_token(store, "bob")
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            refused = await http.post(
                "/acp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
            )
            assert refused.status_code == 401
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
            opened = await http.post("/acp", json=init, headers={"Authorization": f"Bearer {alice}"})
            assert opened.status_code == 200 and opened.json()["result"]["protocolVersion"] == 1
            cid = opened.headers["Acp-Connection-Id"]
            # Bob cannot use, watch or close Alice's connection: it looks missing.
            as_bob = {"Authorization": f"Bearer {bob}", "Acp-Connection-Id": cid}
            msg = {"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}
            assert (await http.post("/acp", json=msg, headers=as_bob)).status_code == 404
            assert (await http.delete("/acp", headers=as_bob)).status_code == 404
            as_alice = {"Authorization": f"Bearer {alice}", "Acp-Connection-Id": cid}
            assert (await http.post("/acp", json=msg, headers=as_alice)).status_code == 202
            assert (await http.delete("/acp", headers=as_alice)).status_code == 204
