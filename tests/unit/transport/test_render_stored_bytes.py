"""A frame whose update is the event's stored payload carries the codec's bytes and the
encoder embeds them as they are — the payload is serialised once, by the codec, not again
per frame or per client (issue 27 item 4) — while in-process readers still see a dict."""

from __future__ import annotations

from typing import Any

import orjson

from agentd.core.events import Event, EventKind
from agentd.session.eventlog.hub import EventHub
from agentd.session.sinks import Frame
from agentd.transport.render import (
    ACP_RENDERER,
    AcpRenderer,
    StoredPayload,
    encode_message,
    encode_notification,
    live_frames,
)

SID = "sess_1"
PLAN = {"sessionUpdate": "plan", "entries": [{"content": "a", "priority": "medium", "status": "pending"}]}
# The same JSON as orjson would write it, but spaced: a frame holding these bytes can only
# have embedded them, never re-serialised the payload.
SPACED = (
    b'{"sessionUpdate": "plan", "entries": [{"content": "a", "priority": "medium", "status": "pending"}]}'
)


def plan_event(seq: int = 1) -> Event:
    event = Event.stored(SID, EventKind.PLAN, orjson.dumps(PLAN), seq=seq)
    event.__dict__["data"] = SPACED  # (what `Event.stored` does with the stored bytes)
    return event


def test_a_frames_update_is_the_events_stored_bytes() -> None:
    event = plan_event()
    [(method, params)] = live_frames(event, 0)

    update = params["update"]
    assert isinstance(update, StoredPayload) and update.data is event.data
    assert update == PLAN and update["sessionUpdate"] == "plan"  # readers get a dict
    text = encode_notification(method, params)
    assert SPACED.decode() in text
    assert orjson.loads(text)["params"]["update"] == PLAN
    assert encode_message(method, params) == text.encode()


def test_an_agentd_event_wrapper_embeds_the_stored_bytes_too() -> None:
    data = b'{"severity": "info", "title": "done"}'
    event = Event.stored(SID, EventKind.NOTICE, orjson.dumps({"severity": "info", "title": "done"}), seq=1)
    event.__dict__["data"] = data
    frames = ACP_RENDERER.for_client(live_frames(event, 0), event, lambda u: u != "notice", 0)

    [(method, params)] = frames
    assert method == "_agentd/event"
    assert params["event"] == {"severity": "info", "title": "done"}
    assert data.decode() in encode_notification(method, params)


def test_an_older_servers_shape_is_sent_as_orjson_writes_it() -> None:
    # Stored bytes no typed update reads back (`Unparsed`): the wire keeps today's bytes.
    stored = b'{"sessionUpdate": "plan",  "entries": [], "old": 1}'
    event = Event.stored(SID, EventKind.PLAN, stored, seq=1)
    [(method, params)] = live_frames(event, 0)

    assert not isinstance(params["update"], StoredPayload)
    assert orjson.dumps(orjson.loads(stored)).decode() in encode_notification(method, params)


class CountingRenderer(AcpRenderer):
    def __init__(self) -> None:
        self.encodes = 0

    def encode(self, frame: Frame) -> str:
        self.encodes += 1
        return super().encode(frame)


class Client:
    """A connection that takes text encoded once for everyone."""

    def __init__(self, sink_id: str) -> None:
        self.id = sink_id
        self.texts: list[bytes] = []

    def send_notification(self, method: str, params: dict[str, Any]) -> bool:
        raise AssertionError("a shared frame is encoded once, not per client")

    async def send_replay(self, method: str, params: dict[str, Any]) -> bool:
        raise AssertionError("not replaying")

    def send_encoded(self, text: bytes) -> bool:
        self.texts.append(text)
        return True


def test_one_encoding_per_event_for_n_clients_embedding_the_stored_bytes() -> None:
    renderer = CountingRenderer()
    hub = EventHub(render=renderer)
    clients = [Client(f"conn_{i}") for i in range(8)]
    for client in clients:
        hub.subscribe(client, SID).go_live(0)

    hub.publish(plan_event())

    assert renderer.encodes == 1
    [text] = clients[0].texts
    assert all(c.texts[0] is text for c in clients)  # the very same text object
    assert SPACED in text
