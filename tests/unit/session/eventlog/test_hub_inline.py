"""`EventHub.publish` renders a live client's frames itself for the common cases
(`INLINE_RENDER`, agentd/session/eventlog/hub.py) and leaves the rest to `Subscriber._render`:
every client gets byte for byte what `_render` alone gives it — senders, clients seeded
mid-message or attached after a message's start, clients that cannot take an update, a
client that falls behind, a seq published twice."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.core import AgentTextChunk
from agentd.core.events import Event, EventKind
from agentd.session.eventlog import hub as hub_module
from agentd.session.eventlog.hub import EventHub, Subscriber
from agentd.transport.render import AcpRenderer
from tests.support.hub_sinks import EncodedSink, PlainSink

SID = "sess_1"
MID = "msg_1"


def chunk(mid: str, text: str, offset: int, *, thought: bool = False) -> Event:
    return Event(SID, AgentTextChunk(mid, text, offset, thought=thought))


def final(mid: str, text: str, seq: int) -> Event:
    return Event.stored(SID, EventKind.AGENT_MESSAGE, {"messageId": mid, "text": text}, seq=seq)


def notice(title: str, seq: int | None) -> Event:
    return Event.stored(SID, EventKind.NOTICE, {"severity": "info", "title": title}, seq=seq)


def run(inline: bool, monkeypatch: pytest.MonkeyPatch, *, runs: bool = False) -> tuple[list[Any], int]:
    """One session's stream through a hub with these clients; what each got, and how many
    times `Subscriber._render` ran. `runs`: the events between attaches published in one
    call each (as the writer publishes a batch)."""
    monkeypatch.setattr(hub_module, "INLINE_RENDER", inline)
    calls = 0
    original = Subscriber._render

    def counted(self: Subscriber, event: Event, shared: Any) -> Any:
        nonlocal calls
        calls += 1
        return original(self, event, shared)

    monkeypatch.setattr(Subscriber, "_render", counted)
    hub = EventHub(render=AcpRenderer())
    sender, seeded, plain = EncodedSink("conn_a"), EncodedSink("conn_b"), PlainSink("conn_c")
    picky = EncodedSink("conn_d", unsupported=frozenset({"notice", "agent_thought_chunk"}))
    slow = EncodedSink("conn_e", capacity=5)
    sinks: list[PlainSink] = [sender, seeded, plain, picky, slow]
    for sink in sinks:
        hub.subscribe(sink, SID).go_live(0)
    seeded_sub = hub.get("conn_b")
    assert seeded_sub is not None
    seeded_sub.seed_partial(EventKind.AGENT_MESSAGE_CHUNK, MID, "Hello the")
    user = {"messageId": "u1", "content": [{"type": "text", "text": "hi"}]}
    user_event = Event.stored(SID, EventKind.USER_MESSAGE, user, seq=1)
    user_event.__dict__["origin"] = "conn_a"  # the sender's own prompt is not echoed to it
    late = EncodedSink("conn_f")  # attaches after the message's start
    stream: list[Event | str] = [
        user_event,
        chunk(MID, "Hello ", 0),
        "attach late",
        chunk(MID, "there,", 6),
        chunk(MID, "", 12),  # an empty chunk: `_chunk`'s case
        chunk(MID, " world", 12),
        chunk("t1", "think", 0, thought=True),
        chunk("t1", "ing", 5, thought=True),
        final(MID, "Hello there, world", 2),
        final(MID, "Hello there, world", 2),  # published twice: the second is no news
        notice("transient", None),
        chunk("m2", "gap", 0),
        chunk("m2", "past a gap", 20),  # chunks in between never came: held back
        final("m2", "gap" + "x" * 17 + "past a gap", 3),
        notice("done", 4),
        notice("old", 3),  # behind every client's cursor
        notice("after", 5),
    ]
    pending: list[Event] = []
    for item in [*stream, "end"]:
        if isinstance(item, str):
            if pending:
                hub.publish(*pending)
                pending = []
            if item == "attach late":
                hub.subscribe(late, SID).go_live(hub.seq)
                sinks.append(late)
        elif runs:
            pending.append(item)
        else:
            hub.publish(item)
    got: list[Any] = [(s.id, s.texts, getattr(s, "encoded", None), s.urgent) for s in sinks]
    got.append([(sid, sub.last_seq, sub._delivered, sub._missed) for sid, sub in hub._each])
    got.append((hub.seq, len(hub)))
    return got, calls


def test_every_client_gets_what_render_alone_gives_it(monkeypatch: pytest.MonkeyPatch) -> None:
    library, library_calls = run(False, monkeypatch)
    inline, inline_calls = run(True, monkeypatch)
    assert inline == library
    assert inline_calls < library_calls  # the common cases did not go through `_render`
    by_id = {entry[0]: entry for entry in library[:-2]}
    assert by_id["conn_e"][3] and len(by_id["conn_e"][1]) == 5  # the slow client: resync, bounded
    assert not any(b'"hi"' in t for t in by_id["conn_a"][1])  # no echo of its own prompt
    assert any(b'"hi"' in t for t in by_id["conn_c"][1])
    assert any(b"_agentd/event" in t for t in by_id["conn_d"][1])  # a notice it cannot take


@pytest.mark.parametrize("inline", [True, False])
def test_events_published_in_one_call_reach_every_client_as_one_by_one(
    inline: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The writer hands a batch's events to the hub in one `publish` call.
    assert run(inline, monkeypatch, runs=True)[0] == run(inline, monkeypatch)[0]


def test_a_subscriber_that_breaks_on_one_event_of_a_run_still_gets_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hub = EventHub(render=AcpRenderer())
    good, bad = EncodedSink("conn_a"), EncodedSink("conn_b")
    for sink in (good, bad):
        hub.subscribe(sink, SID).go_live(0)
    sent = bad.send_encoded

    def breaks_on_first(text: str) -> bool:
        if not bad.texts:
            bad.texts.append("")  # broken once
            raise RuntimeError("boom")
        return sent(text)

    monkeypatch.setattr(bad, "send_encoded", breaks_on_first)
    bad_sub = hub.get("conn_b")
    assert bad_sub is not None
    bad_sub._send = breaks_on_first
    hub.publish(notice("one", 1), notice("two", 2))
    assert len(good.texts) == 2 and len(bad.texts) == 2 and b'"two"' in bad.texts[1]
    assert hub.seq == 2
    with pytest.raises(RuntimeError):  # one event alone: its caller's to log, as before
        bad.texts.clear()
        hub.publish(notice("three", 3))


def test_the_updates_render_has_steps_for_have_no_subclasses() -> None:
    # `publish` tells them by exact type: a subclass would take the written-out path and
    # skip `_render`'s steps for it.
    for cls in hub_module._OWN_STEPS:
        assert cls.__subclasses__() == [], cls
