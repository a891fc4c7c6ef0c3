"""Watches of sessions owned elsewhere are made one per session, and concurrently across
sessions (issue 26 item 5): 200 clients' first routed prompts, each subscribing its
connection to its session's log, do not queue behind each other's reads; two clients of
one session get one watch; a watch whose making failed is made by the next client."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from agentd.session.replicas.remote import RemoteWatches
from agentd.store.db import Store, StoredEvent
from agentd.transport.render import ACP_RENDERER

pytestmark = pytest.mark.timeout(30)


class Log:
    """A store whose `last_seq` of a session waits until that session is released."""

    def __init__(self) -> None:
        self.held: dict[str, asyncio.Event] = {}
        self.reads: list[str] = []
        self.fail_next = False

    async def last_seq(self, session_id: str) -> int:
        self.reads.append(session_id)
        if session_id in self.held:
            await self.held[session_id].wait()
        if self.fail_next:
            self.fail_next = False
            raise ConnectionError("the database is away")
        return 0

    async def latest_events(self, session_id: str, kinds: list[str], *, limit: int) -> list[StoredEvent]:
        return []

    async def read_events_many(self, reads: list[tuple[str, int, int]]) -> list[Any]:
        return [await self.read_events(sid, after_seq=after, limit=limit) for sid, after, limit in reads]

    async def read_events(self, session_id: str, *, after_seq: int = 0, limit: int | None = None) -> Any:
        return []


class Sink:
    def __init__(self, sink_id: str) -> None:
        self.id = sink_id

    def send_notification(self, method: str, params: dict[str, Any]) -> bool:
        return True

    async def send_replay(self, method: str, params: dict[str, Any]) -> bool:
        return True

    def send_urgent(self, method: str, params: dict[str, Any]) -> None:
        pass


async def _unanswered(*_a: Any) -> None:
    return None


def _attach(watches: RemoteWatches, session_id: str, sink_id: str) -> asyncio.Task[Any]:
    return asyncio.create_task(
        watches.attach(session_id, Sink(sink_id), replay=None, after_seq=0, buffer_limit=100, owner="a")
    )


async def test_watches_of_different_sessions_are_made_at_once_and_one_per_session() -> None:
    log = Log()
    log.held["slow"] = asyncio.Event()
    watches = RemoteWatches(cast(Store, log), ACP_RENDERER, _unanswered, replica_id="b")
    try:
        slow = [_attach(watches, "slow", f"c{i}") for i in range(2)]
        fast = _attach(watches, "fast", "c3")
        done, _ = await asyncio.wait({fast}, timeout=10)  # (a hang guard: it needs no wait at all)
        assert fast in done and not any(t.done() for t in slow)  # not queued behind "slow"
        log.held["slow"].set()
        await asyncio.gather(*slow)
        assert log.reads.count("slow") == 1  # one watch for both of its clients
        assert len(watches) == 2 and len(watches.get("slow").hub) == 2  # type: ignore[union-attr]
    finally:
        await watches.stop()


async def test_a_watch_whose_making_failed_is_made_by_the_next_client() -> None:
    log = Log()
    log.held["s"] = asyncio.Event()
    log.fail_next = True
    watches = RemoteWatches(cast(Store, log), ACP_RENDERER, _unanswered, replica_id="b")
    try:
        first, second = _attach(watches, "s", "c1"), _attach(watches, "s", "c2")
        await asyncio.sleep(0)  # (ordering only) both are in: the first reads, the second waits for it
        log.held["s"].set()
        with pytest.raises(ConnectionError):
            await first
        await second  # it made the watch itself
        assert log.reads == ["s", "s"] and len(watches) == 1
    finally:
        await watches.stop()
