"""Under uvicorn (as `agentd serve` runs) a client's frames reach the socket through the
writer's batched path (agentd/transport/socket_write.py): the app's middleware stack hands
the WebSocket endpoint uvicorn's own `send`, and everything the client received went that
way, in order, with or without permessage-deflate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from agentd.transport.socket_write import SocketWriter
from tests.support.client import WsClient, agent_text, text_prompt
from tests.support.server import scripted
from tests.support.session import new_session


@pytest.mark.parametrize("compression", [False, True])
async def test_every_frame_goes_through_the_socket_writer(
    server_factory: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch, compression: bool
) -> None:
    written: list[Any] = []
    write = SocketWriter.write

    def recording(self: SocketWriter, frames: list[str]) -> None:
        written.extend(orjson.loads(f) for f in frames)
        write(self, frames)

    monkeypatch.setattr(SocketWriter, "write", recording)
    provider = scripted({"text": "one two three"}, loop=True)
    async with server_factory(provider, ws_compression=compression) as server:
        client = await WsClient.connect(server.base_url)
        try:
            sid = await new_session(client, workspace)
            result = await client.call("session/prompt", text_prompt(sid, "hi"))
            assert result["stopReason"] == "end_turn"
            assert agent_text(client.updates(sid)) == "one two three"
            assert written  # the batched path, not the ASGI one
            assert written == client.frames  # all of it, in order
        finally:
            await client.close()


@pytest.mark.parametrize("compression", [False, True])
async def test_the_library_path_serves_the_same_frames_when_direct_writes_are_off(
    server_factory: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch, compression: bool
) -> None:
    """`ws_direct_write=False`: every frame through ASGI's `websocket.send`, none through
    the batched writer, and the client gets the same turn."""
    written: list[Any] = []
    write = SocketWriter.write

    def recording(self: SocketWriter, frames: list[str]) -> None:
        written.extend(frames)
        write(self, frames)

    monkeypatch.setattr(SocketWriter, "write", recording)
    provider = scripted({"text": "one two three"}, loop=True)
    async with server_factory(provider, ws_compression=compression, ws_direct_write=False) as server:
        client = await WsClient.connect(server.base_url)
        try:
            sid = await new_session(client, workspace)
            result = await client.call("session/prompt", text_prompt(sid, "hi"))
            assert result["stopReason"] == "end_turn"
            assert agent_text(client.updates(sid)) == "one two three"
            assert client.frames  # it was served…
            assert written == []  # …and not by the direct writer
        finally:
            await client.close()
