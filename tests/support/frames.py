"""What a client saw: durable seqs, transcripts, attach, `_agentd/event` payloads."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from tests.support.client import WsClient

ATTACH = "_agentd/session/attach"


DETACH = "_agentd/session/detach"


SNAPSHOT = "_agentd/session/snapshot"


RESYNC_REQUIRED = -32017


def agentd_meta(frame: dict[str, Any]) -> dict[str, Any]:
    return ((frame.get("params") or {}).get("_meta") or {}).get("agentd") or {}


def is_durable(frame: dict[str, Any]) -> bool:
    meta = agentd_meta(frame)
    return "method" in frame and "id" not in frame and "seq" in meta and not meta.get("transient")


def response_index(client: WsClient, req_id: Any) -> int:
    return next(
        i
        for i, f in enumerate(client.frames)
        if isinstance(f, dict) and "method" not in f and f.get("id") == req_id
    )


def durable_seqs(frames: list[Any], session_id: str) -> list[int]:
    """The seq of each durable event, in arrival order; frames of one event (several
    content blocks) count once."""
    out: list[int] = []
    for f in frames:
        if isinstance(f, dict) and is_durable(f) and f["params"].get("sessionId") == session_id:
            seq = agentd_meta(f)["seq"]
            if not out or out[-1] != seq:
                out.append(seq)
    return out


async def stored_seqs(server: Any, session_id: str, after: int = 0) -> list[int]:
    events = await server.app.state.agentd.store.read_events(session_id, after_seq=after)
    return [e.seq for e in events]


def has_turn_ended(client: WsClient, session_id: str, count: int = 1) -> Callable[[], bool]:
    def check() -> bool:
        n = sum(
            1
            for f in client.frames
            if isinstance(f, dict)
            and f.get("method") == "_agentd/event"
            and f["params"]["sessionId"] == session_id
            and f["params"]["kind"] == "turn_ended"
        )
        return n >= count

    return check


def transcript(frames: list[Any], session_id: str) -> list[tuple[Any, ...]]:
    """A client's reconstruction: user/agent/thought text per messageId (a chunk marked
    `_meta.agentd.final` replaces what was assembled so far), tool calls with their last
    status; in order of first appearance."""
    order: list[tuple[str, str]] = []
    texts: dict[tuple[str, str], str] = {}
    statuses: dict[tuple[str, str], str] = {}
    for f in frames:
        if not (isinstance(f, dict) and f.get("method") == "session/update"):
            continue
        if f["params"]["sessionId"] != session_id:
            continue
        u = f["params"]["update"]
        kind = u["sessionUpdate"]
        if kind in ("user_message_chunk", "agent_message_chunk", "agent_thought_chunk"):
            key = (kind, u["messageId"])
            if key not in texts:
                order.append(key)
                texts[key] = ""
            if agentd_meta(f).get("final"):
                texts[key] = u["content"]["text"]
            else:
                texts[key] += u["content"]["text"]
        elif kind in ("tool_call", "tool_call_update"):
            key = ("tool", u["toolCallId"])
            if key not in statuses:
                order.append(key)
                statuses[key] = ""
            if "status" in u:
                statuses[key] = u["status"]
    return [(*k, texts[k]) if k in texts else (*k, statuses[k]) for k in order]


def message_text(frames: list[Any], session_id: str, message_id: str) -> str:
    for kind, mid, text in transcript(frames, session_id):
        if kind == "agent_message_chunk" and mid == message_id:
            return text
    raise AssertionError(f"no text for {message_id}")


async def load_transcript(server: Any, session_id: str) -> list[tuple[Any, ...]]:
    fresh = await server.client()
    try:
        resp = await fresh.request("session/load", {"sessionId": session_id, "cwd": "/", "mcpServers": []})
        assert "error" not in resp, resp
        return transcript(fresh.frames[: response_index(fresh, resp["id"])], session_id)
    finally:
        await fresh.close()


async def attach(client: WsClient, session_id: str, after_seq: int = 0) -> dict[str, Any]:
    """Attach; the response gets `start`: the index in `client.frames` where this attach's
    frames begin."""
    start = len(client.frames)
    resp = await client.request(ATTACH, {"sessionId": session_id, "afterSeq": after_seq})
    assert "error" not in resp, resp
    return {**resp, "start": start}


class Counter:
    """Counts notifications a client has received, so a test can act after the N-th one."""

    def __init__(self, client: WsClient, predicate: Callable[[dict[str, Any]], bool]) -> None:
        self.client = client
        self.predicate = predicate

    def count(self) -> int:
        return sum(1 for f in self.client.frames if isinstance(f, dict) and self.predicate(f))


def is_agent_chunk(f: dict[str, Any]) -> bool:
    return (
        f.get("method") == "session/update"
        and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


async def reach(counter: Counter, n: int, done: asyncio.Task[Any]) -> None:
    """Wait until `counter` reached `n` notifications or the prompt task finished; each
    step awaits the client's own notification queue, no sleep decides the order."""
    async with asyncio.timeout(30):
        while counter.count() < n and not done.done():
            getter = asyncio.ensure_future(counter.client.notifications.get())
            await asyncio.wait({getter, done}, return_when=asyncio.FIRST_COMPLETED)
            if not getter.done():
                getter.cancel()


CHUNK_KINDS = ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")


def conversation_view(updates: list[dict[str, Any]]) -> list[Any]:
    """The updates with chunk boundaries erased: consecutive chunks of one messageId become
    one `[(kind, messageId), text]` entry; everything else is kept as is. Live chunking and
    replay chunking differ (R-E3 only promises the same assembled text). User messages are
    left out: the client that sent a prompt is not echoed its own message live."""
    out: list[Any] = []
    for u in updates:
        kind = u["sessionUpdate"]
        if kind == "user_message_chunk":
            continue
        if kind in CHUNK_KINDS:
            key = (kind, u.get("messageId"))
            if out and isinstance(out[-1], list) and out[-1][0] == key:
                out[-1][1] += u["content"]["text"]
            else:
                out.append([key, u["content"]["text"]])
        else:
            out.append(u)
    return out


def texts_by_message(updates: list[dict[str, Any]], kind: str = "agent_message_chunk") -> dict[str, str]:
    joined: dict[str, str] = {}
    for u in updates:
        if u["sessionUpdate"] == kind:
            joined[u["messageId"]] = joined.get(u["messageId"], "") + u["content"]["text"]
    return joined


def notification_seqs(client: WsClient) -> list[int]:
    """The `seq` of every durable notification the client received, in order."""
    out = []
    for f in client.frames:
        if isinstance(f, dict) and "method" in f and "id" not in f:
            meta = f["params"]["_meta"]["agentd"]
            if not meta.get("transient"):
                out.append(meta["seq"])
    return out
