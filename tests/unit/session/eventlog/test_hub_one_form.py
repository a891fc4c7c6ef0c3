"""Each seq reaches each client once, in one form (issue 26 item 3). A client that did not
get a message streamed — it watches from a replica that streams nothing, or attached after
the message started — gets the whole text as a transient chunk marked `final`, then the
message's event exactly as a client that watched it stream: for every seq, the same one
frame on every client, and the same assembled text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentd.core.events import Event, EventKind
from agentd.session.eventlog import hub as hub_module
from agentd.session.eventlog.hub import EventHub
from agentd.transport.render import ACP_RENDERER, encode_notification

SID = "sess_1"
MID = "msg_1"
TEXT = "Hello there, world"


@pytest.fixture(autouse=True, params=[True, False], ids=["inline", "render-only"])
def inline_render(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here runs with the hub's written-out render and with `_render` alone."""
    monkeypatch.setattr(hub_module, "INLINE_RENDER", request.param)


class Sink:
    def __init__(self, sink_id: str) -> None:
        self.id = sink_id
        self.frames: list[dict[str, Any]] = []

    def send_notification(self, method: str, params: dict[str, Any]) -> bool:
        self.frames.append(json.loads(encode_notification(method, params)))
        return True

    async def send_replay(self, method: str, params: dict[str, Any]) -> bool:
        return self.send_notification(method, params)


def durable(events: list[Event]) -> list[Event]:
    return [e for e in events if e.seq is not None]


def conversation() -> list[Event]:
    user = {"messageId": "u1", "content": [{"type": "text", "text": "hi"}]}
    chunks = [
        Event.stored(
            SID, EventKind.AGENT_MESSAGE_CHUNK, {"messageId": MID, "text": TEXT[i : i + 6], "offset": i}
        )
        for i in range(0, len(TEXT), 6)
    ]
    return [
        Event.stored(SID, EventKind.USER_MESSAGE, user, seq=1),
        *chunks,
        Event.stored(SID, EventKind.AGENT_MESSAGE, {"messageId": MID, "text": TEXT}, seq=2),
        Event.stored(SID, EventKind.NOTICE, {"severity": "info", "title": "done"}, seq=3),
    ]


def by_seq(frames: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """The durable (non-transient) frames of each seq."""
    out: dict[int, list[dict[str, Any]]] = {}
    for f in frames:
        meta = f["params"]["_meta"]["agentd"]
        if not meta.get("transient"):
            out.setdefault(meta["seq"], []).append(f)
    return out


def text_of(frames: list[dict[str, Any]]) -> str:
    """What a client assembles (a `final` chunk replaces what it had)."""
    text = ""
    for f in frames:
        update = f["params"].get("update") or {}
        if update.get("sessionUpdate") == "agent_message_chunk":
            chunk = update["content"]["text"]
            text = chunk if f["params"]["_meta"]["agentd"].get("final") else text + chunk
    return text


def test_a_client_given_no_stream_gets_each_seq_in_the_streaming_clients_form() -> None:
    streamed, owner_hub = Sink("on_owner"), EventHub(render=ACP_RENDERER)
    owner_hub.subscribe(streamed, SID).go_live(0)
    from_log, watch_hub = Sink("elsewhere"), EventHub(render=ACP_RENDERER)
    watch_hub.subscribe(from_log, SID).go_live(0)
    events = conversation()
    for event in events:
        owner_hub.publish(event)
    for event in durable(events):  # another replica publishes what the log holds
        watch_hub.publish(event)

    assert by_seq(from_log.frames) == by_seq(streamed.frames)
    assert all(len(frames) == 1 for frames in by_seq(from_log.frames).values()), "one frame per seq"
    assert text_of(from_log.frames) == text_of(streamed.frames) == TEXT
    (whole,) = [f for f in from_log.frames if f["params"]["_meta"]["agentd"].get("transient")]
    assert whole["params"]["_meta"]["agentd"] == {"seq": 1, "transient": True, "final": True}


def test_a_client_that_missed_the_start_gets_the_same_frames_per_seq() -> None:
    hub = EventHub(render=ACP_RENDERER)
    early, late = Sink("early"), Sink("late")
    hub.subscribe(early, SID).go_live(0)
    events = conversation()
    hub.publish(events[0])
    hub.publish(events[1])  # the first chunk
    hub.subscribe(late, SID).go_live(1)  # attaches after it
    for event in events[2:]:
        hub.publish(event)
    late_seqs = by_seq(late.frames)
    assert late_seqs == {s: f for s, f in by_seq(early.frames).items() if s > 1}
    assert text_of(late.frames) == TEXT
