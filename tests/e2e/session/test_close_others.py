"""`session/close` is of the session, not of one client's view (ACP: cancel its work, free
its resources): the actor stops, and the session's other clients on that server — a
WebSocket client and an SSE stream — see the cancelled turn end, then get
`_agentd/resync_required` with `reason: session_closed` and are detached, rather than
staying attached to an actor that sends nothing more. The closing client gets `{}` and
nothing more of the session; re-attaching from the told `lastSeq` reloads the session, and
a prompt then runs a new turn as usual."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.client import WsClient, agent_text, text_prompt
from tests.support.gated import GatedProvider
from tests.support.polling import until
from tests.support.server import scripted
from tests.support.session import resyncs, served_session
from tests.support.sse import SseStream, sse

pytestmark = pytest.mark.timeout(120)

ATTACH = "_agentd/session/attach"
DETACH = "_agentd/session/detach"
CLOSED = "session_closed"


def _ws_order(client: WsClient, sid: str) -> list[str]:
    """The session's turn ends and resyncs, as the client got them."""
    out = []
    for f in client.frames:
        if not isinstance(f, dict) or (f.get("params") or {}).get("sessionId") != sid:
            continue
        if f.get("method") == "_agentd/resync_required":
            out.append("resync")
        elif f.get("method") == "_agentd/event" and f["params"]["kind"] == "turn_ended":
            out.append("turn_ended")
    return out


def _commands(frame: dict[str, Any]) -> bool:
    update = (frame.get("data") or {}).get("update") or {}
    is_update = frame.get("event") == "session/update"
    return is_update and update.get("sessionUpdate") == "available_commands_update"


def _sse_order(stream: SseStream) -> list[str]:
    out = []
    for f in stream.frames:
        if f.get("event") == "_agentd/resync_required":
            out.append("resync")
        elif f.get("event") == "_agentd/event" and f["data"].get("kind") == "turn_ended":
            out.append("turn_ended")
    return out


async def test_close_tells_and_detaches_the_sessions_other_clients(server_factory, workspace: Path) -> None:
    gated = GatedProvider(scripted({"text": "slow answer"}, {"text": "after the close"}), hold={0})
    async with served_session(server_factory, workspace, gated) as (server, closer, sid):
        watcher = await server.client()
        try:
            await watcher.call(ATTACH, {"sessionId": sid, "afterSeq": 0})
            async with sse(server.base_url, sid, params={"after": 0}) as stream:
                # Live once its replay is over: the available commands follow the replay
                # (agentd/session/eventlog/attach.py). Until then live frames wait behind it, and a
                # close would tell the stream the lower `lastSeq` it had been sent.
                await stream.until(lambda f: f.get("event") == "_agentd/session/snapshot")
                await stream.until(_commands)
                prompt = asyncio.create_task(closer.call("session/prompt", text_prompt(sid, "one")))
                await gated.held(0)  # a turn is running

                assert await closer.call("session/close", {"sessionId": sid}) == {}
                assert (await prompt)["stopReason"] == "cancelled"

                # The WebSocket client: the cancelled turn's end, then told, and detached.
                await until(lambda: resyncs(watcher, sid), what="the other client told of the close")
                [told] = resyncs(watcher, sid)
                assert told["reason"] == CLOSED, told
                assert _ws_order(watcher, sid) == ["turn_ended", "resync"]
                assert await watcher.call(DETACH, {"sessionId": sid}) == {"detached": False}

                # The SSE stream: the same, and then it ends.
                ended = await stream.until(lambda f: f.get("event") == "_agentd/resync_required")
                assert ended["data"]["reason"] == CLOSED, ended
                assert _sse_order(stream) == ["turn_ended", "resync"]
                with pytest.raises(EOFError):
                    await stream.next()
            # The closing client has its answer and nothing else.
            assert resyncs(closer, sid) == []

            # Re-attaching from what it was told reloads the session; a prompt runs as usual.
            attached = await watcher.call(ATTACH, {"sessionId": sid, "afterSeq": told["lastSeq"]})
            snapshot = attached["snapshot"]
            assert snapshot["lastSeq"] >= told["lastSeq"]
            assert snapshot["queue"] == []  # close cleared it
            seen_by_closer = len(closer.frames)
            answer = await watcher.call("session/prompt", text_prompt(sid, "two"))
            assert answer["stopReason"] == "end_turn"
            assert agent_text(watcher.updates(sid)).endswith("after the close")
            # The closer was detached by its close: the new turn is not sent to it.
            assert all(
                (f.get("params") or {}).get("sessionId") != sid
                for f in closer.frames[seen_by_closer:]
                if isinstance(f, dict)
            )
        finally:
            gated.release(0)
            await watcher.close()


async def test_close_of_an_idle_session_over_http_tells_every_attached_client(
    server_factory, workspace: Path
) -> None:
    """A close sent without a connection (`POST /rpc`) has no caller to spare: every
    attached client is told."""
    async with served_session(server_factory, workspace, scripted({"text": "hi"})) as (server, client, sid):
        await client.call("session/prompt", text_prompt(sid, "one"))
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            reply = await http.post(
                "/rpc",
                json={"jsonrpc": "2.0", "id": 1, "method": "session/close", "params": {"sessionId": sid}},
            )
        assert reply.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}, reply.text
        await until(lambda: resyncs(client, sid), what="the attached client told of the close")
        assert [r["reason"] for r in resyncs(client, sid)] == [CLOSED]
        assert await client.call(DETACH, {"sessionId": sid}) == {"detached": False}
        # Resuming reloads it.
        resumed = await client.call(
            "session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        )
        assert resumed["modes"]["currentModeId"] == "default"
