"""Live events through the broker (issue 26 item 4), the pure parts: the message a transient
event becomes, and the relay's order on a watching replica — each broker message right after
the durable event it followed on the owner, held while the log tail is behind, dropped once
its message's final text went by, the end of a final text that outran its chunks sent as one
chunk before it."""

from __future__ import annotations

from typing import Any

from agentd.core.events import Event, EventKind
from agentd.session.replicas.live import LiveFeed, LivePublisher, LiveRelay, decode, encode
from agentd.store.broker import Gap
from tests.support.polling import until

SID = "s1"
CHUNK = EventKind.AGENT_MESSAGE_CHUNK


def chunk(text: str, offset: int, mid: str = "m1") -> Event:
    return Event.stored(SID, CHUNK, {"messageId": mid, "text": text, "offset": offset})


def durable(seq: int, kind: EventKind = EventKind.USAGE, **payload: Any) -> Event:
    return Event.stored(SID, kind, payload, seq=seq)


class Watch:
    """The relay with a hub that records, and a log tail that is woken."""

    def __init__(self, cursor: int = 0) -> None:
        self.out: list[tuple[int | None, str]] = []
        self.woken: list[int] = []
        self.relay = LiveRelay(SID, self._hub, cursor=cursor, wake=self.woken.append)

    def _hub(self, event: Event) -> None:
        self.out.append((event.seq, event.payload.get("text", event.kind.value)))

    def log(self, event: Event) -> None:  # what the log tail does per durable event
        self.relay.before(event)
        self._hub(event)
        self.relay.after(event)

    def broker(self, after: int, event: Event) -> None:
        self.relay.received(encode(SID, after, event))


def test_a_message_round_trips_and_foreign_ones_are_refused() -> None:
    assert decode(encode(SID, 7, chunk("hé", 3)), SID) == (7, chunk("hé", 3))
    for bad in (
        b"",
        b"[]",
        b"{}",
        encode("other", 1, chunk("x", 0)),
        b'{"s":"s1","a":"1","k":"usage","p":{}}',
    ):
        assert decode(bad, SID) is None
    assert decode(b'{"s":"s1","a":1,"k":"agent_message_chunk","p":{"text":"x"}}', SID) is None


def test_in_order_with_the_log_held_while_the_tail_is_behind() -> None:
    w = Watch(cursor=2)
    w.broker(2, chunk("He", 0))  # follows seq 2, which this replica published: at once
    w.broker(3, chunk("llo", 2))  # follows seq 3, not read yet: held, the tail woken
    assert w.out == [(None, "He")] and w.woken == [3]
    w.log(durable(3))
    w.log(durable(4))
    assert w.out == [(None, "He"), (3, "usage"), (None, "llo"), (4, "usage")]


def test_held_messages_go_out_before_the_next_durable_event() -> None:
    w = Watch(cursor=0)
    w.broker(1, chunk("a", 0))
    w.broker(1, chunk("b", 1))
    w.log(durable(1))  # seq 1 then what followed it
    w.log(durable(2, EventKind.AGENT_MESSAGE, messageId="m1", text="ab"))
    assert w.out == [(1, "usage"), (None, "a"), (None, "b"), (2, "ab")]


def test_late_chunks_of_a_finished_message_are_dropped() -> None:
    w = Watch(cursor=0)
    w.broker(0, chunk("ab", 0))
    w.log(durable(1, EventKind.AGENT_MESSAGE, messageId="m1", text="abcd"))
    w.broker(0, chunk("cd", 2))  # arrived after the final text: already sent with it
    w.broker(0, chunk("zz", 0, mid="m2"))  # another message: still forwarded
    assert w.out == [(None, "ab"), (None, "cd"), (1, "abcd"), (None, "zz")]


def test_the_end_of_a_final_text_that_outran_its_chunks_goes_out_as_one_chunk() -> None:
    w = Watch(cursor=0)
    w.broker(0, chunk("Hel", 0))
    w.log(durable(1, EventKind.AGENT_MESSAGE, messageId="m1", text="Hello world"))
    assert w.out == [(None, "Hel"), (None, "lo world"), (1, "Hello world")]
    # A message none of whose chunks arrived gets nothing extra (its final text is whole).
    w.log(durable(2, EventKind.AGENT_MESSAGE, messageId="m9", text="whole"))
    assert w.out[-1] == (2, "whole") and len(w.out) == 4


def test_messages_from_before_the_watch_and_gaps_change_nothing() -> None:
    w = Watch(cursor=5)
    w.broker(4, chunk("old", 0))
    w.relay.received(Gap.RECONNECTED)
    w.relay.received(b"not json")
    assert w.out == [] and w.relay.gaps == 1


def test_the_owner_stamps_each_transient_event_with_the_last_durable_seq() -> None:
    local: list[Event] = []

    class Outbox:
        def __init__(self) -> None:
            self.sent: list[tuple[str, int, Event]] = []

            self.asked: list[str] = []

        def publish(self, session_id: str, after: int, event: Event) -> None:
            self.sent.append((session_id, after, event))

        def owned(self, session_id: str) -> None:  # a new owner asks who watches (live_watch.py)
            self.asked.append(session_id)

    outbox = Outbox()
    feed = LiveFeed(SID, local.append, lambda: outbox, seq=4)  # type: ignore[arg-type, return-value]
    assert outbox.asked == [SID]
    feed(chunk("a", 0))
    feed(durable(5))
    feed(chunk("b", 1))
    assert [(a, e.payload["text"]) for _, a, e in outbox.sent] == [(4, "a"), (5, "b")]
    assert len(local) == 3  # its own clients get everything, first


async def test_the_outbox_is_bounded_and_a_failing_broker_loses_only_transient_messages() -> None:
    class Failing:
        calls = 0

        async def publish_many(self, messages: list[tuple[str, bytes]]) -> None:
            self.calls += 1
            raise ConnectionError("down")

    broker = Failing()
    publisher = LivePublisher(broker, limit=3)  # type: ignore[arg-type]
    for i in range(5):
        publisher.publish(SID, 0, chunk(str(i), i))
    assert publisher.dropped == 2 and len(publisher._outbox) == 3
    publisher.start()
    await until(lambda: publisher.dropped == 5, what="the failed batch dropped")
    assert broker.calls == 1
    await publisher.stop()
