"""The hub renders and encodes a published event once for all the live clients that get the
same frames (issue 14, item 6), and still gives each client what is its own: a cursor of
its own, an update it cannot take, text it already has, a full buffer."""

from __future__ import annotations

import pytest

from agentd.core.events import Event, EventKind
from agentd.session.eventlog import hub as hub_module
from agentd.session.eventlog.hub import EventHub
from agentd.session.sinks import Frame
from agentd.transport.render import AcpRenderer
from tests.support.hub_sinks import EncodedSink, PlainSink

SID = "sess_1"
MID = "msg_1"


@pytest.fixture(autouse=True, params=[True, False], ids=["inline", "render-only"])
def inline_render(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here runs with the hub's written-out render and with `_render` alone."""
    monkeypatch.setattr(hub_module, "INLINE_RENDER", request.param)


class CountingRenderer(AcpRenderer):
    """The real ACP renderer, counting how often it renders and encodes."""

    def __init__(self) -> None:
        self.renders = 0
        self.encodes = 0

    def live(self, event: Event, last_seq: int) -> list[Frame]:
        self.renders += 1
        return super().live(event, last_seq)

    def encode(self, frame: Frame) -> str:
        self.encodes += 1
        return super().encode(frame)


def turn() -> list[Event]:
    """A user message, three streamed chunks, the final text, a notice."""
    text = "Hello there, world"
    chunks = [
        Event.stored(
            SID, EventKind.AGENT_MESSAGE_CHUNK, {"messageId": MID, "text": text[i : i + 6], "offset": i}
        )
        for i in range(0, len(text), 6)
    ]
    user = {"messageId": "u1", "content": [{"type": "text", "text": "hi"}]}
    return [
        Event.stored(SID, EventKind.USER_MESSAGE, user, seq=1),
        *chunks,
        Event.stored(SID, EventKind.AGENT_MESSAGE, {"messageId": MID, "text": text}, seq=2),
        Event.stored(SID, EventKind.NOTICE, {"severity": "info", "title": "done"}, seq=3),
    ]


def live_hub(renderer: AcpRenderer, *sinks: PlainSink) -> EventHub:
    hub = EventHub(render=renderer)
    for sink in sinks:
        hub.subscribe(sink, SID).go_live(0)
    return hub


def test_each_frame_is_rendered_and_encoded_once_for_all_clients() -> None:
    renderer = CountingRenderer()
    sinks = [EncodedSink(f"conn_{i}") for i in range(10)]
    hub = live_hub(renderer, *sinks)
    events = turn()

    for event in events:
        hub.publish(event)

    # One render per event and one encoding per frame, whatever the number of clients.
    assert renderer.renders == len(events)
    assert renderer.encodes == len(sinks[0].texts) == 6  # user, 3 chunks, final marker, notice
    assert all(s.encoded == s.texts == sinks[0].texts for s in sinks)


def test_the_shared_text_is_what_each_client_would_have_encoded_itself() -> None:
    renderer = CountingRenderer()
    shared, plain = EncodedSink("conn_a"), PlainSink("conn_b")
    hub = live_hub(renderer, shared, plain)

    for event in turn():
        hub.publish(event)

    assert shared.encoded == plain.texts  # byte for byte
    assert renderer.encodes == len(plain.texts)


def test_client_specific_frames_are_never_taken_from_the_shared_ones() -> None:
    renderer = CountingRenderer()
    a, b = EncodedSink("conn_a"), EncodedSink("conn_b")
    no_notice = EncodedSink("conn_c", unsupported=frozenset({"notice"}))
    hub = live_hub(renderer, a, b, no_notice)
    # conn_b attached mid-message: it was sent the first 9 characters already.
    hub_sub = hub.get("conn_b")
    assert hub_sub is not None
    hub_sub.seed_partial(EventKind.AGENT_MESSAGE_CHUNK, MID, "Hello the")
    b.texts.clear()
    b.encoded.clear()

    for event in turn():
        hub.publish(event)

    def chunks(sink: PlainSink) -> list[str]:
        return [t.decode() for t in sink.texts if b'"agent_message_chunk"' in t]

    assert [c.split('"text":"')[1].split('"')[0] for c in chunks(a)] == ["Hello ", "there,", " world"]
    # Only the part it lacks, with its own offset — rendered for it, not the shared frame.
    assert [c.split('"text":"')[1].split('"')[0] for c in chunks(b)] == ["re,", " world"]
    assert chunks(b)[1:] == chunks(a)[2:]  # from there on it shares the others' frames
    # The client that cannot take a `notice` update gets it as an `_agentd/event`.
    assert a.texts[-1].startswith(b'{"jsonrpc":"2.0","method":"session/update"')
    assert no_notice.texts[-1].startswith(b'{"jsonrpc":"2.0","method":"_agentd/event"')
    assert no_notice.texts[-1] not in no_notice.encoded
    assert no_notice.texts[:-1] == a.texts[:-1]


def test_a_full_client_is_told_to_resync_and_the_others_get_everything() -> None:
    renderer = CountingRenderer()
    slow, fast = EncodedSink("conn_slow", capacity=2), EncodedSink("conn_fast")
    hub = live_hub(renderer, slow, fast)

    for event in turn():
        hub.publish(event)

    assert len(slow.texts) == 2  # bounded: nothing past its capacity
    assert [m for m, _ in slow.urgent] == ["_agentd/resync_required"]
    assert slow.urgent[0][1]["lastSeq"] == 1  # the last durable event it really got
    assert len(fast.texts) == 6
    assert len(hub) == 1


def test_the_hub_remembers_the_last_durable_seq_it_published() -> None:
    """What a transient event published now follows (the broker's stamp, session_actor.py)."""
    hub = live_hub(AcpRenderer(), EncodedSink("conn_a"))
    seen = []
    for event in turn():
        hub.publish(event)
        seen.append(hub.seq)
    assert seen == [1, 1, 1, 1, 2, 3]  # the chunks after the user message leave it at 1
