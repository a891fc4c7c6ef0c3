"""The events channel is listened to only while this replica follows a log owned elsewhere
(agentd/session/replicas/log_tail.py `LogTails.on_demand`, issue 32): LISTEN before a
watch's cursor is read (so every commit after that read is announced), UNLISTEN once the
last tail is gone — unless another watch began meanwhile. A stand-in store records the
order of the calls."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from agentd.session.replicas import log_tail
from agentd.session.replicas.log_tail import LogTail, LogTails
from agentd.session.replicas.remote import RemoteWatches
from agentd.store.db import Store, StoredEvent
from agentd.transport.render import ACP_RENDERER
from tests.support.hub_sinks import PlainSink

pytestmark = pytest.mark.timeout(30)


class Channel:
    """LISTEN / UNLISTEN as calls recorded in `calls` (shared with the store's)."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.listening = False
        self.fail = False

    async def listen(self) -> None:
        self.calls.append("listen")
        await asyncio.sleep(0)  # a round trip
        if self.fail:
            raise ConnectionError("the listener is away")
        self.listening = True

    async def unlisten(self) -> None:
        self.calls.append("unlisten")
        await asyncio.sleep(0)
        self.listening = False


class Log:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.fail = False

    async def last_seq(self, session_id: str) -> int:
        self.calls.append(f"cursor {session_id}")
        if self.fail:
            raise ConnectionError("the database is away")
        return 0

    async def latest_events(self, session_id: str, kinds: list[str], *, limit: int) -> list[StoredEvent]:
        return []

    async def read_events_many(self, reads: list[tuple[str, int, int]]) -> list[Any]:
        return [[] for _ in reads]

    async def read_events(self, session_id: str, *, after_seq: int = 0, limit: int | None = None) -> Any:
        return []


async def _unanswered(*_a: Any) -> None:
    return None


def _watches(calls: list[str]) -> tuple[RemoteWatches, Channel, Log]:
    log, channel = Log(calls), Channel(calls)
    watches = RemoteWatches(cast(Store, log), ACP_RENDERER, _unanswered, replica_id="b")
    assert watches.tails.on_demand(channel.listen, channel.unlisten)
    return watches, channel, log


async def _settled() -> None:
    for _ in range(5):  # the unlisten task and its round trip
        await asyncio.sleep(0)


async def _attach(watches: RemoteWatches, sid: str, n: int) -> PlainSink:
    sink = PlainSink(f"conn_{n}")
    await watches.attach(sid, sink, replay=None, after_seq=0, buffer_limit=100, owner="a")
    return sink


async def test_nothing_is_listened_to_until_a_watch_and_the_cursor_is_read_after_listen() -> None:
    calls: list[str] = []
    watches, channel, _ = _watches(calls)
    assert not watches.tails.listening and calls == []  # a replica watching nothing: no LISTEN
    await _attach(watches, "s1", 1)
    assert calls == ["listen", "cursor s1"]  # LISTEN first: a commit after the read is announced
    assert channel.listening
    await watches.stop()


async def test_the_last_tail_gone_unlistens_and_the_next_watch_listens_again() -> None:
    calls: list[str] = []
    watches, channel, _ = _watches(calls)
    one, two = await _attach(watches, "s1", 1), await _attach(watches, "s2", 2)
    await watches.detach("s1", one.id)
    await _settled()
    assert channel.listening and "unlisten" not in calls  # s2 still followed
    await watches.detach("s2", two.id)
    await _settled()
    assert not channel.listening and calls[-1] == "unlisten"
    await _attach(watches, "s3", 3)
    assert calls[-2:] == ["listen", "cursor s3"] and channel.listening
    await watches.stop()


async def test_a_follow_begun_before_the_unlisten_ran_keeps_the_channel() -> None:
    calls: list[str] = []
    tails, channel = LogTails(), Channel(calls)
    assert tails.on_demand(channel.listen, channel.unlisten)
    await tails.follow()
    tails.add(LogTail(cast(Store, Log(calls)), "s1", lambda _e: None, after_seq=0))
    tails.remove("s1")  # the unlisten is scheduled, not run yet
    await tails.follow()  # another watch begins: its LISTEN's round trip lets the task run
    await _settled()
    assert calls == ["listen", "listen"] and channel.listening and tails.listening
    tails.unfollow()
    await _settled()
    assert calls[-1] == "unlisten" and not channel.listening
    await tails.stop()


async def test_a_watch_that_could_not_be_made_gives_its_follow_back() -> None:
    calls: list[str] = []
    watches, channel, log = _watches(calls)
    log.fail = True
    with pytest.raises(ConnectionError):
        await _attach(watches, "s1", 1)
    await _settled()
    assert not watches.tails.listening and calls == ["listen", "cursor s1", "unlisten"]
    channel.fail, log.fail = True, False  # a LISTEN that fails: nothing is followed either
    with pytest.raises(ConnectionError):
        await watches.tails.follow()
    await _settled()
    assert not watches.tails.listening
    await watches.stop()


async def test_switched_off_the_caller_listens_from_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_tail, "EVENTS_ON_DEMAND", False)
    tails, channel = LogTails(), Channel([])
    assert not tails.on_demand(channel.listen, channel.unlisten)
    assert tails.listening  # (no hooks: always)


async def test_tails_added_without_on_demand_are_woken_as_before() -> None:
    tails = LogTails()
    tail = LogTail(cast(Store, Log([])), "s1", lambda _e: None, after_seq=0)
    tails.add(tail)
    tails.on_notification("3 s1")
    assert tail.announced == 3
    tails.remove("s1")
    assert tails.listening and len(tails) == 0
