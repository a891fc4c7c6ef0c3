"""R-E1: streaming deltas are transient, but the partial text of a message still streaming
is checkpointed to the store at most every second; the checkpoint is cleared in the same
commit as the message's final text. A message cut off by a stop ends durably with the
text clients were shown, marked interrupted. (The `kill -9` case is in
tests/e2e/store/test_persistence.py.)"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

from agentd.core.events import Event, EventKind
from agentd.session.actor.session_actor import PARTIAL_CHECKPOINT_INTERVAL_S
from agentd.session.eventlog.hub import Subscriber
from agentd.store.db import Store
from agentd.transport.render import ACP_RENDERER
from tests.support.client import text_prompt
from tests.support.server import scripted
from tests.support.spies import SubmitSpy

TEXT = "".join(f"tok{i:03d} " for i in range(120))  # 840 characters


async def test_partial_text_is_checkpointed_at_most_every_second_and_cleared_with_the_final_text(
    server_factory, workspace: Path, db_url: str
) -> None:
    # ~3.6 s of streaming at 30 ms a chunk.
    provider = scripted({"text": TEXT, "chunk_size": 7, "chunk_delay": 0.03})
    async with server_factory(provider, database_url=db_url) as server:
        spy = SubmitSpy(server.app.state.agentd.writer)
        client = await server.client()
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        result = await client.call("session/prompt", text_prompt(sid, "stream"))
        assert result["stopReason"] == "end_turn"
        await client.close()

    written = spy.checkpoints()
    stored = [(t, p) for t, p in written if p is not None]
    assert len(stored) >= 2, written  # the stream lasted well over a second
    # Never more often than once a second (the timer only ever fires late, never early).
    times = [t for t, _ in stored]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(g >= PARTIAL_CHECKPOINT_INTERVAL_S - 0.01 for g in gaps), gaps
    # Each checkpoint is the text streamed so far: growing prefixes of the final text.
    texts = [p["messages"][0]["text"] for _, p in stored]
    assert all(TEXT.startswith(t) and t for t in texts)
    assert texts == sorted(texts, key=len) and len(set(texts)) == len(texts)
    assert [p["messages"][0]["kind"] for _, p in stored] == ["agent_message_chunk"] * len(stored)
    # Cleared right after the final text was submitted: the same group commit.
    assert written[-1][1] is None
    kinds = [
        kw["event"].kind if kw.get("event") is not None else ("partial" if "session_fields" in kw else None)
        for _, kw in spy.calls
    ]
    final_at = kinds.index(EventKind.AGENT_MESSAGE)
    assert kinds[final_at + 1] == "partial"
    assert spy.calls[final_at + 1][1]["session_fields"]["partial"] is None

    store = await Store.open(db_url)
    try:
        assert (await store.get_session(sid)).partial is None
    finally:
        await store.close()


async def test_a_message_cut_off_by_shutdown_ends_durably_with_the_text_shown(
    server_factory, workspace: Path, db_url: str
) -> None:
    # 20 s of streaming; the shutdown grace is 1 s: the turn is cancelled mid-message.
    provider = scripted({"text": TEXT, "chunk_size": 7, "chunk_delay": 0.2})
    async with server_factory(provider, database_url=db_url, shutdown_grace_s=1.0) as server:
        client = await server.client()
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        prompt = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "stream")))
        await client.wait_notification(
            lambda m: (
                m["method"] == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            )
        )
    response = await asyncio.wait_for(prompt, 10)  # answered before the socket closed
    assert response["result"]["stopReason"] == "cancelled"
    await client.close()

    shown = "".join(
        u["content"]["text"] for u in client.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"
    )
    store = await Store.open(db_url)
    try:
        events = await store.read_events(sid)
        finals = [e.payload for e in events if e.kind == "agent_message"]
        assert len(finals) == 1
        assert finals[0]["text"] and TEXT.startswith(finals[0]["text"]) and finals[0]["text"] != TEXT
        assert finals[0]["text"] == shown  # exactly what the client was shown
        assert [e.kind for e in events][-1] == "turn_ended"
        assert (await store.get_session(sid)).partial is None
    finally:
        await store.close()


class ListSink:
    id = "sink-1"

    def __init__(self) -> None:
        self.frames: list[tuple[str, dict[str, Any]]] = []

    def send_notification(self, method: str, params: dict[str, Any]) -> bool:
        self.frames.append((method, params))
        return True


def test_a_final_text_the_client_never_saw_stream_is_sent_whole() -> None:
    """A live client gets the whole text of a message that ended without streaming to it
    (a message recovered after a crash), not just the end marker."""
    sink = ListSink()
    sub = Subscriber(sink, "s1", render=ACP_RENDERER)
    sub.go_live(0)
    sub.deliver(
        Event.stored(
            "s1", EventKind.AGENT_MESSAGE, {"messageId": "m1", "text": "cut off", "interrupted": True}, seq=1
        )
    )
    chunks = [p for m, p in sink.frames if m == "session/update"]
    assert [c["update"]["content"]["text"] for c in chunks] == ["cut off"]
    # The text is transient (at the client's cursor); seq 1 is the event's own frame, the
    # one every live client gets for it (issue 26 item 3: one form per seq).
    assert chunks[0]["_meta"]["agentd"] == {"seq": 0, "transient": True, "final": True, "interrupted": True}
    assert [(m, p["_meta"]["agentd"]["seq"]) for m, p in sink.frames] == [
        ("session/update", 0),
        ("_agentd/event", 1),
    ]

    # A message it did see stream only gets the end marker (no duplicate text).
    sink.frames.clear()
    sub.deliver(
        Event.stored("s1", EventKind.AGENT_MESSAGE_CHUNK, {"messageId": "m2", "text": "hello", "offset": 0})
    )
    sub.deliver(Event.stored("s1", EventKind.AGENT_MESSAGE, {"messageId": "m2", "text": "hello"}, seq=2))
    texts = [p["update"]["content"]["text"] for m, p in sink.frames if m == "session/update"]
    assert texts == ["hello"]
    assert [m for m, _ in sink.frames] == ["session/update", "_agentd/event"]
