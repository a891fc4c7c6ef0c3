"""Bad frames over a real WebSocket that used to close the connection or answer -32603
(issue 9): malformed client→server *responses*, frames over `max_frame_bytes` (up to the
WebSocket ceiling of 4× the limit), and a NUL in `cwd`. Each gets its JSON-RPC error and
the same connection keeps answering afterwards."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentd.app import create_app
from agentd.infra.config import Settings
from agentd.serve import WS_CEILING_FACTOR, server_for
from tests.support.client import WsClient, agent_text, text_prompt
from tests.support.server import scripted
from tests.support.session import new_session

INVALID_REQUEST = -32600
INVALID_PARAMS = -32602


async def assert_still_usable(client: WsClient, session_id: str) -> None:
    before = len(client.updates(session_id))
    result = await client.call("session/prompt", text_prompt(session_id, "still there?"))
    assert result["stopReason"] == "end_turn"
    assert agent_text(client.updates(session_id)[before:]) == "ok"


@pytest.mark.parametrize(
    "frame",
    [
        {"jsonrpc": "2.0", "id": {"a": 1}, "result": {}},
        {"jsonrpc": "2.0", "id": [1, 2], "result": {}},
        {"jsonrpc": "2.0", "id": [1], "error": {"code": -32000, "message": "x"}},
        {"jsonrpc": "2.0", "id": True, "result": {}},
        {"jsonrpc": "2.0", "id": "agentd-1", "error": {"code": "oops", "message": "x"}},
        {"jsonrpc": "2.0", "id": 7, "error": {"code": 1.5, "message": "x"}},
        {"jsonrpc": "2.0", "id": 7, "error": {"message": "no code"}},
        {"jsonrpc": "2.0", "id": 7, "error": "a string"},
    ],
)
async def test_a_malformed_response_frame_is_an_invalid_request_and_the_connection_stays(
    server_factory, workspace: Path, frame: dict[str, Any]
) -> None:
    async with server_factory(scripted({"text": "ok"}, loop=True)) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        await client.send_raw(json.dumps(frame))
        reply = await client.next_unmatched()
        assert reply["id"] is None
        assert reply["error"]["code"] == INVALID_REQUEST
        assert reply["error"]["message"].startswith("Invalid Request: a response")
        await assert_still_usable(client, sid)
        await client.close()


async def test_a_well_formed_response_to_an_unknown_id_is_ignored(server_factory, workspace: Path) -> None:
    async with server_factory(scripted({"text": "ok"}, loop=True)) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        await client.send_raw(
            json.dumps({"jsonrpc": "2.0", "id": "nobody", "error": {"code": 5, "message": "x"}})
        )
        await assert_still_usable(client, sid)
        assert not any("error" in f and f.get("id") is None for f in client.frames)  # no reply to it
        await client.close()


@pytest.mark.parametrize("method", ["session/new", "session/load", "session/list"])
async def test_a_nul_in_cwd_is_invalid_params(server_factory, workspace: Path, method: str) -> None:
    async with server_factory(scripted({"text": "ok"}, loop=True)) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        params: dict[str, Any] = {"cwd": f"{workspace}\x00/etc", "mcpServers": []}
        if method == "session/load":
            params["sessionId"] = sid
        if method == "session/list":
            params = {"cwd": f"{workspace}\x00"}
        resp = await client.request(method, params)
        assert resp["error"]["code"] == INVALID_PARAMS, resp
        assert resp["error"]["message"] == "Invalid params: cwd: cwd must not contain a NUL character"
        listed = await client.call("session/list", {})
        assert [s["sessionId"] for s in listed["sessions"]] == [sid]  # nothing was created
        await assert_still_usable(client, sid)
        await client.close()


async def test_a_frame_over_max_frame_bytes_gets_invalid_request_and_the_connection_stays(
    server_factory, workspace: Path
) -> None:
    limit = 64 * 1024
    async with server_factory(scripted({"text": "ok"}, loop=True), max_frame_bytes=limit) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        big = {"jsonrpc": "2.0", "id": 99, "method": "session/list", "params": {"pad": "x" * (100 * 1024)}}
        await client.send_raw(json.dumps(big))
        reply = await client.next_unmatched()
        assert reply["error"] == {"code": INVALID_REQUEST, "message": f"frame larger than {limit} bytes"}
        await assert_still_usable(client, sid)
        await client.close()


async def test_a_frame_over_the_websocket_ceiling_closes_the_socket_with_1009(
    server_factory, workspace: Path
) -> None:
    limit = 16 * 1024
    async with server_factory(scripted({"text": "ok"}, loop=True), max_frame_bytes=limit) as server:
        client = await server.client()
        await new_session(client, workspace)
        await client.send_raw("x" * (WS_CEILING_FACTOR * limit + 1))
        await asyncio.wait_for(client._reader, 10)  # the client's reader ends when the socket closes
        assert client.ws.close_code == 1009
        # Other connections are unaffected.
        other = await server.client()
        assert (await other.call("session/list", {}))["sessions"]
        await other.close()


async def test_a_10_mb_frame_with_the_default_limit_gets_invalid_request(
    server_factory, workspace: Path
) -> None:
    """The documented default: 4 MiB frames, so a 10 MB one is answered -32600 (it is under
    the 16 MiB ceiling) and the connection keeps working."""
    limit = Settings.model_fields["max_frame_bytes"].default
    assert limit < 10_000_000 < WS_CEILING_FACTOR * limit
    async with server_factory(scripted({"text": "ok"}, loop=True)) as server:
        assert server.settings.max_frame_bytes == limit
        client = await server.client()
        sid = await new_session(client, workspace)
        pad = "x" * 10_000_000
        await client.send_raw(
            json.dumps({"jsonrpc": "2.0", "id": 5, "method": "session/list", "params": {"p": pad}})
        )
        reply = await client.next_unmatched(within=30)
        assert reply["error"] == {"code": INVALID_REQUEST, "message": f"frame larger than {limit} bytes"}
        await assert_still_usable(client, sid)
        await client.close()


def test_the_served_websocket_ceiling_follows_the_settings(tmp_path: Path) -> None:
    """`agentd serve` and the embedded server both size the WebSocket from the app's settings."""
    app = create_app(Settings(home=tmp_path, max_frame_bytes=1000))
    assert server_for(app, host="127.0.0.1", port=0).config.ws_max_size == WS_CEILING_FACTOR * 1000
    default = Settings.model_fields["max_frame_bytes"].default
    assert server_for(create_app(Settings(home=tmp_path)), host="127.0.0.1", port=0).config.ws_max_size == (
        WS_CEILING_FACTOR * default
    )


async def test_a_malformed_answer_to_a_server_request_fails_that_request_not_the_connection(
    server_factory, workspace: Path
) -> None:
    """The server asks the editor for a file (R-T6); the editor answers with an error whose
    code is not an integer: it gets -32600, the waiting tool fails at once with a readable
    result (instead of waiting forever), and the turn goes on."""
    (workspace / "notes.txt").write_text("on disk\n")
    provider = scripted(
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}, "id": "r"}]},
        {"text": "ok"},
    )
    async with server_factory(provider) as server:
        client = await WsClient.connect(server.base_url, fs={"readTextFile": True})
        answered: list[Any] = []

        async def broken_editor(msg: dict[str, Any]) -> None:
            assert msg["method"] == "fs/read_text_file"
            bad = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": "EACCES", "message": "no"}}
            await client.send_raw(json.dumps(bad))
            answered.append(await client.next_unmatched())
            return None  # the raw frame above was the answer

        client.on_request = broken_editor
        sid = await new_session(client, workspace)
        result = await client.call("session/prompt", text_prompt(sid, "read it"))
        assert result["stopReason"] == "end_turn"
        assert [a["error"]["code"] for a in answered] == [INVALID_REQUEST]
        results = {m.tool_call_id: m.content for m in provider.requests[-1].messages if m.role == "tool"}
        assert "the client could not fs/read_text_file" in results["r"]
        assert "error code must be an integer" in results["r"]
        await client.close()
