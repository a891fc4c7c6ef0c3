"""Live events only while someone watches (agentd/session/replicas/live_watch.py): the
announcements and questions on the broker, how long an owner believes a watch (2W after
the last announcement), and the two sides — the owner's `LivePublisher` and a watcher's
`WatchAnnouncer` — over an in-memory broker."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from agentd.core.events import Event, EventKind
from agentd.session.replicas import live_watch
from agentd.session.replicas.live import LivePublisher, live_channel
from agentd.session.replicas.live_watch import (
    WATCH_CHANNEL,
    WHO_CHANNEL,
    WatchAnnouncer,
    Watched,
    asked_session,
    watch_message,
    watched_session,
    who_message,
)
from agentd.store.broker import Gap, Subscribers, Subscription
from tests.support.polling import until


class MemoryBroker:
    """A broker in one process: what is published reaches the channel's subscribers."""

    def __init__(self) -> None:
        self.subscribers = Subscribers()
        self.published: list[tuple[str, bytes]] = []

    async def publish(self, channel: str, data: bytes) -> None:
        await self.publish_many([(channel, data)])

    async def publish_many(self, messages: Sequence[tuple[str, bytes]]) -> None:
        for channel, data in messages:
            self.published.append((channel, data))
            self.subscribers.deliver(channel, data)

    async def subscribe(self, channel: str) -> Subscription:
        sub = Subscription(channel, self._unsubscribe)
        self.subscribers.add(sub)
        return sub

    async def _unsubscribe(self, sub: Subscription) -> None:
        self.subscribers.remove(sub)

    async def close(self) -> None:
        pass

    def on(self, channel: str) -> list[bytes]:
        return [data for ch, data in self.published if ch == channel]

    def subscribed(self, channel: str) -> bool:
        return bool(self.subscribers.by_channel.get(channel))


def chunk(text: str) -> Event:
    return Event.stored("s1", EventKind.AGENT_MESSAGE_CHUNK, {"messageId": "m1", "text": text, "offset": 0})


def test_messages_round_trip_and_anything_else_is_ignored() -> None:
    assert watched_session(watch_message("a b", "replica-b")) == "a b"  # a session id may hold a space
    assert asked_session(who_message("s1")) == "s1"
    assert asked_session(who_message(None)) == ""  # every session
    for bad in (b"", b"watch", b"watch s1", b"watch  r", b"hello s1 r", b"\xff\xfe"):
        assert watched_session(bad) is None
    for bad in (b"", b"who ", b"whom s1", b"watch s1 r"):
        assert asked_session(bad) is None


def test_an_owner_believes_a_watch_for_two_intervals_after_its_last_announcement() -> None:
    now = [100.0]
    watched = Watched(interval_s=10.0, clock=lambda: now[0])
    assert not watched("s1") and len(watched) == 0
    watched.received(watch_message("s1", "b"))
    assert watched("s1") and not watched("s2") and len(watched) == 1
    now[0] = 119.0
    assert watched("s1")
    watched.received(watch_message("s1", "b"))  # re-announced: 2W from now
    now[0] = 138.9
    assert watched("s1")
    now[0] = 139.0  # no announcement for 2W: the watcher went away
    assert not watched("s1") and len(watched) == 0
    assert watched.received(Gap.RECONNECTED) is True  # the caller asks again
    assert watched.received(b"who s1") is False and watched.heard == 2


def test_without_live_on_demand_every_session_counts_as_watched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_watch, "LIVE_ON_DEMAND", False)
    assert Watched()("s1")


def test_expired_watches_are_forgotten_once_there_are_many(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_watch, "PRUNE_AT", 3)
    now = [0.0]
    watched = Watched(interval_s=1.0, clock=lambda: now[0])
    for sid in ("a", "b", "c"):
        watched.announced(sid)
    now[0] = 5.0
    watched.announced("d")  # four remembered: the three expired ones go
    assert watched._until.keys() == {"d"}


async def test_an_owner_hears_a_watcher_and_publishes_only_while_watched() -> None:
    broker = MemoryBroker()
    owner = LivePublisher(broker)  # type: ignore[arg-type]
    owner.start()
    await until(lambda: broker.on(WHO_CHANNEL) == [b"who"], what="the owner asking every watcher")
    owner.owned("s1")  # a session taken: who watches it?
    await until(lambda: broker.on(WHO_CHANNEL) == [b"who", b"who s1"], what="the question about s1")
    assert not owner.watched("s1")
    watcher = WatchAnnouncer(broker, "replica-b", lambda: ["s1"], owner.send)  # type: ignore[arg-type]
    watcher.announce("s1")
    await until(lambda: owner.watched("s1"), what="the owner hearing the watch")
    assert owner.watched.heard == 1 and not owner.watched("s2")
    owner.publish("s1", 0, chunk("hi"))
    await until(lambda: len(broker.on(live_channel("s1"))) == 1, what="the chunk on the broker")
    assert owner.published == 1
    await owner.stop()


async def test_a_watcher_answers_questions_about_its_sessions_and_re_announces() -> None:
    broker = MemoryBroker()
    sessions = ["s1", "s2"]
    sent: list[tuple[str, bytes]] = []

    def send(channel: str, data: bytes) -> None:
        sent.append((channel, data))

    watcher = WatchAnnouncer(broker, "replica-b", lambda: sessions, send, interval_s=3600)  # type: ignore[arg-type]
    watcher.start()
    await until(lambda: broker.subscribed(WHO_CHANNEL), what="the watcher listening for questions")
    await broker.publish(WHO_CHANNEL, who_message("s2"))
    await broker.publish(WHO_CHANNEL, who_message("elsewhere"))  # not watched here: no answer
    await broker.publish(WHO_CHANNEL, b"noise")
    await broker.publish(WHO_CHANNEL, who_message(None))
    want = [watch_message(s, "replica-b") for s in ("s2", "s1", "s2")]
    await until(lambda: len(sent) == 3, what="the answers")
    assert [c for c, _ in sent] == [WATCH_CHANNEL] * 3
    assert sorted(d for _, d in sent) == sorted(want) and sent[0][1] == want[0]
    await watcher.stop()

    sent.clear()  # every interval, each session watched
    every = WatchAnnouncer(broker, "replica-b", lambda: sessions, send, interval_s=0.01)  # type: ignore[arg-type]
    every.start()
    await until(lambda: len(sent) >= 4, what="two rounds of announcements")
    assert {d for _, d in sent} == {watch_message(s, "replica-b") for s in sessions}
    await every.stop()


async def test_an_owner_asks_every_watcher_again_after_a_gap() -> None:
    broker = MemoryBroker()
    owner = LivePublisher(broker)  # type: ignore[arg-type]
    owner.start()
    await until(lambda: broker.on(WHO_CHANNEL) == [b"who"], what="the first question")
    broker.subscribers.gap(Gap.RECONNECTED)
    await until(lambda: broker.on(WHO_CHANNEL) == [b"who", b"who"], what="the question after the gap")
    await owner.stop()


async def test_without_live_on_demand_a_new_owner_asks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_watch, "LIVE_ON_DEMAND", False)
    owner = LivePublisher(MemoryBroker())  # type: ignore[arg-type]
    owner.owned("s1")
    assert len(owner._outbox) == 0
