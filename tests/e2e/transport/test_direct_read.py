"""Under uvicorn (as `agentd serve` runs) a client's frames are read from the server's own
ASGI `receive` (`Connection._read_direct`); `ws_direct_read=False` reads them through
Starlette's `receive_text` (the library path). Either way: the same turn, a binary frame
refused with the connection kept, and the connection's end noticed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from starlette.websockets import WebSocket

from agentd.transport.connection import Connection
from tests.support.client import WsClient, agent_text, text_prompt
from tests.support.server import scripted
from tests.support.session import new_session


@pytest.mark.parametrize("direct", [True, False])
async def test_both_read_paths_serve_a_turn_refuse_binary_and_see_the_end(
    server_factory: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch, direct: bool
) -> None:
    through_starlette: list[str] = []
    receive_text = WebSocket.receive_text

    async def recording(self: WebSocket) -> str:
        text = await receive_text(self)
        through_starlette.append(text)
        return text

    monkeypatch.setattr(WebSocket, "receive_text", recording)
    closed = asyncio.Event()
    close = Connection._close

    async def closing(self: Connection, writer: asyncio.Task[None]) -> None:
        closed.set()
        await close(self, writer)

    monkeypatch.setattr(Connection, "_close", closing)
    provider = scripted({"text": "one two three"}, loop=True)
    async with server_factory(provider, ws_direct_read=direct) as server:
        client = await WsClient.connect(server.base_url)
        try:
            sid = await new_session(client, workspace)
            result = await client.call("session/prompt", text_prompt(sid, "hi"))
            assert result["stopReason"] == "end_turn"
            assert agent_text(client.updates(sid)) == "one two three"
            await client.ws.send(b'{"jsonrpc": "2.0", "id": 77, "method": "session/list", "params": {}}')
            reply = await client.next_unmatched()
            assert reply["id"] is None
            assert reply["error"] == {"code": -32600, "message": "binary frames are not supported"}
            assert (await client.call("session/list", {}))["sessions"]  # still served
        finally:
            await client.close()
        await asyncio.wait_for(closed.wait(), 10)  # the server's reader saw the client leave
        # Starlette's `receive_text` read every frame on the library path, none on the direct one.
        assert (through_starlette == []) is direct
        assert direct or len(through_starlette) >= 4
