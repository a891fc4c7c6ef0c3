"""WebSocket permessage-deflate (AGENTD_WS_COMPRESSION): off by default — the client's
offer is declined and frames go uncompressed (per-frame zlib was a measurable share of a
turn's CPU, issue 14) — and negotiated when switched on; a turn works either way."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.client import WsClient, agent_text, text_prompt
from tests.support.server import scripted
from tests.support.session import new_session


@pytest.mark.parametrize("enabled", [False, True])
async def test_compression_is_negotiated_only_when_switched_on(
    server_factory, workspace: Path, enabled: bool
) -> None:
    settings = {"ws_compression": True} if enabled else {}
    async with server_factory(scripted({"text": "ok"}, loop=True), **settings) as server:
        client = await WsClient.connect(server.base_url)  # websockets offers permessage-deflate
        try:
            accepted = client.ws.response.headers.get("Sec-WebSocket-Extensions", "")
            assert ("permessage-deflate" in accepted) is enabled
            sid = await new_session(client, workspace)
            result = await client.call("session/prompt", text_prompt(sid, "hi"))
            assert result["stopReason"] == "end_turn"
            assert agent_text(client.updates(sid)) == "ok"
        finally:
            await client.close()
