"""The drain barrier (R-L3h) over a real WebSocket, with a SLOW client.

Before a step's tools run, the events of the sampling round that asked for them must
have reached the clients' queues, so no client ever sees a tool event ahead of the
message that requested it. Checked with a raw `websockets` client that reads one frame
at a time and pauses between reads (its tiny receive queue pushes back on the server):

- every `agent_message_chunk` of the assistant message that requested the tools arrives
  before any of their `tool_call` notifications, and so does the durable `_agentd/event`
  `agent_message`;
- a second, fast client attached to the same session (`session/load`) sees the same order;
- with permissions on, the `session/request_permission` request also comes after the
  message that asked for the tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import websockets

from agentd.infra.config import PermissionMode
from agentd.protocol.agentd import AGENTD_CLIENT
from tests.support.acp_schema import AcpValidator
from tests.support.client import allow, text_prompt
from tests.support.server import scripted
from tests.support.session import is_event, new_session
from tests.support.text import distinct_words

READ_PAUSE = 0.002  # the slow client's pause after each frame it reads
# The scripted model's pause between chunks: it streams as a model does, a chunk per loop
# step. Without it the whole message is one burst, which the writer legitimately merges
# for a client with more than a write slice queued — how many frames then survive is
# slice arithmetic, not a stream (and depended on which loop step the sampling began in).
CHUNK_PACE = 0.001

# ---------------------------------------------------------------------------- slow client


class SlowClient:
    """A raw JSON-RPC client that reads frames slowly (one at a time, pausing after each),
    with a receive queue of one message so the server's writes back up behind it."""

    def __init__(self, ws: Any, pause: float) -> None:
        self.ws = ws
        self.pause = pause
        self.ids = itertools.count(1)
        self.frames: list[dict[str, Any]] = []
        self.sent_methods: dict[Any, str] = {}
        self.on_request: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None
        self._waiters: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._seen = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, base_url: str, pause: float = READ_PAUSE) -> SlowClient:
        ws = await websockets.connect(
            base_url.replace("http://", "ws://") + "/acp", max_size=None, max_queue=1
        )
        client = cls(ws, pause)
        await client.call(
            "initialize", {"protocolVersion": 1, "clientCapabilities": {}, "_meta": AGENTD_CLIENT}
        )
        return client

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader

    async def _read(self) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            while True:
                msg = json.loads(await self.ws.recv())
                self.frames.append(msg)
                if "method" in msg and "id" in msg and self.on_request is not None:
                    result = await self.on_request(msg)
                    reply = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
                    await self.ws.send(json.dumps(reply))
                elif "method" not in msg and msg.get("id") in self._waiters:
                    self._waiters.pop(msg["id"]).set_result(msg)
                async with self._seen:
                    self._seen.notify_all()
                await asyncio.sleep(self.pause)  # a slow reader, not a synchronisation point

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        req_id = next(self.ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiters[req_id] = fut
        self.sent_methods[req_id] = method
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params}))
        return await asyncio.wait_for(fut, 60)

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        resp = await self.request(method, params)
        assert "error" not in resp, resp
        return resp["result"]


# ---------------------------------------------------------------------------- helpers


def timeline(frames: list[dict[str, Any]], session_id: str) -> list[tuple[Any, ...]]:
    """The frames that matter here, in arrival order, as comparable tokens."""
    out: list[tuple[Any, ...]] = []
    for f in frames:
        if not isinstance(f, dict):
            continue
        method = f.get("method")
        params = f.get("params") or {}
        if params.get("sessionId") != session_id:
            continue
        if method == "session/update":
            u = params["update"]
            kind = u["sessionUpdate"]
            if kind == "agent_message_chunk":
                out.append(("chunk", u.get("messageId"), u["content"]["text"]))
            elif kind == "tool_call":
                out.append(("tool_call", u["toolCallId"]))
            elif kind == "tool_call_update" and "status" in u:
                out.append(("tool_call_update", u["toolCallId"], u["status"]))
        elif method == "_agentd/event" and params["kind"] in ("agent_message", "turn_started", "turn_ended"):
            event = params["event"]
            out.append((params["kind"], event.get("messageId") or event.get("turnId")))
        elif method == "session/request_permission":
            out.append(("permission", params["toolCall"]["toolCallId"]))
    return out


def assert_message_precedes_its_tools(
    line: list[tuple[Any, ...]], text: str, call_ids: list[str], *, permission: bool = False
) -> str:
    """Every chunk and the final `agent_message` of the message whose text is `text` come
    before any event of `call_ids`. Returns the message id."""
    finals = [t for t in line if t[0] == "agent_message"]
    chunks_by_id: dict[str, list[int]] = {}
    for i, t in enumerate(line):
        if t[0] == "chunk":
            chunks_by_id.setdefault(t[1], []).append(i)
    matching = [mid for mid, idx in chunks_by_id.items() if "".join(line[i][2] for i in idx) == text]
    assert len(matching) == 1, f"expected one streamed message with the scripted text, got {matching}"
    message_id = matching[0]
    chunk_positions = chunks_by_id[message_id]
    assert len(chunk_positions) > 10  # a real stream of many chunks, not one blob
    final_positions = [i for i, t in enumerate(line) if t == ("agent_message", message_id)]
    assert len(final_positions) == 1 and len(finals) >= 1
    tool_positions = [
        i
        for i, t in enumerate(line)
        if t[0] in ("tool_call", "tool_call_update", "permission") and t[1] in call_ids
    ]
    assert {line[i][1] for i in tool_positions if line[i][0] == "tool_call"} == set(call_ids)
    if permission:
        assert {line[i][1] for i in tool_positions if line[i][0] == "permission"} == set(call_ids)
    first_tool = min(tool_positions)
    assert max(chunk_positions) < first_tool, "a tool event overtook the message that requested it"
    assert final_positions[0] < first_tool, "a tool event overtook the message's agent_message event"
    assert max(chunk_positions) < final_positions[0]
    return message_id


def assert_valid_frames(frames: list[dict[str, Any]], sent_methods: dict[Any, str]) -> None:
    validator = AcpValidator.default()
    for frame in frames:
        validator.assert_valid_agent_frame(frame, sent_methods)


REQUESTING = "Let me look around the workspace. " + distinct_words(330)  # ~360 chars, not repetitive
CALLS = [
    {"name": "list_dir", "arguments": {"path": "."}, "id": "call_ls"},
    {"name": "bash", "arguments": {"command": "echo hello"}, "id": "call_echo"},
]
CALL_IDS = ["call_ls", "call_echo"]


def requesting_script() -> Any:
    return scripted(
        {"text": REQUESTING, "chunk_size": 6, "chunk_delay": CHUNK_PACE, "tool_calls": CALLS},
        {"text": "All done."},
    )


async def run_prompt(slow: SlowClient, session_id: str) -> dict[str, Any]:
    resp = await slow.request("session/prompt", text_prompt(session_id, "look around"))
    assert "error" not in resp, resp
    assert resp["result"]["stopReason"] == "end_turn"
    return resp


# ---------------------------------------------------------------------------- tests


async def test_slow_client_sees_the_whole_message_before_the_tool_calls_it_requested(
    server_factory, workspace: Path
):
    provider = requesting_script()
    async with server_factory(provider, permission_mode=PermissionMode.BYPASS) as server:
        slow = await SlowClient.connect(server.base_url)
        sid = await new_session(slow, workspace)

        await run_prompt(slow, sid)

        line = timeline(slow.frames, sid)
        assert_message_precedes_its_tools(line, REQUESTING, CALL_IDS)
        # And the tools then ran to completion, after their announcements.
        for call_id in CALL_IDS:
            events = [t for t in line if t[0].startswith("tool_call") and t[1] == call_id]
            assert events == [
                ("tool_call", call_id),
                ("tool_call_update", call_id, "in_progress"),
                ("tool_call_update", call_id, "completed"),
            ]
        assert len(provider.requests) == 2
        assert_valid_frames(slow.frames, slow.sent_methods)
        await slow.close()


async def test_a_slow_and_a_fast_client_on_one_session_see_the_same_order(server_factory, workspace: Path):
    provider = requesting_script()
    async with server_factory(provider, permission_mode=PermissionMode.BYPASS) as server:
        slow = await SlowClient.connect(server.base_url)
        sid = await new_session(slow, workspace)
        fast = await server.client()
        await fast.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})

        await run_prompt(slow, sid)
        # The fast client got everything the turn produced (turn_ended is its last event).
        await fast.wait_notification(is_event(sid, "turn_ended"))

        slow_line = timeline(slow.frames, sid)
        fast_line = timeline(fast.frames, sid)
        slow_id = assert_message_precedes_its_tools(slow_line, REQUESTING, CALL_IDS)
        fast_id = assert_message_precedes_its_tools(fast_line, REQUESTING, CALL_IDS)
        assert slow_id == fast_id
        assert slow_line == fast_line
        assert_valid_frames(slow.frames, slow.sent_methods)
        assert_valid_frames(fast.frames, fast.sent_methods)
        await fast.close()
        await slow.close()


async def test_permission_request_comes_after_the_message_that_asked_for_the_tool(
    server_factory, workspace: Path
):
    provider = scripted(
        {"text": REQUESTING, "chunk_size": 6, "chunk_delay": CHUNK_PACE, "tool_calls": [CALLS[1]]},
        {"text": "All done."},
    )
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        slow = await SlowClient.connect(server.base_url)

        async def allow(msg: dict[str, Any]) -> dict[str, Any]:
            assert msg["method"] == "session/request_permission"
            return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

        slow.on_request = allow
        sid = await new_session(slow, workspace)

        await run_prompt(slow, sid)

        line = timeline(slow.frames, sid)
        assert_message_precedes_its_tools(line, REQUESTING, ["call_echo"], permission=True)
        assert ("tool_call_update", "call_echo", "completed") in line
        await slow.close()


async def test_tool_call_is_announced_before_its_permission_request(server_factory, workspace: Path):
    provider = scripted(
        {"text": REQUESTING, "chunk_size": 6, "chunk_delay": CHUNK_PACE, "tool_calls": [CALLS[1]]},
        {"text": "All done."},
    )
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        client = await server.client()
        client.on_request = allow()
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "look around"))
        assert result["stopReason"] == "end_turn"

        line = timeline(client.frames, sid)
        assert ("permission", "call_echo") in line
        assert line.index(("tool_call", "call_echo")) < line.index(("permission", "call_echo"))
        await client.close()
