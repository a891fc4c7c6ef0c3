"""A replica watching a session owned elsewhere never strands its clients (issue 26 item
2): when the session's log cannot be read for the bound, each client is told
`_agentd/resync_required` (`log_unreachable`) with the last seq it got, and the watch ends,
so a re-attach starts a fresh one. A stand-in store injects the fault."""

from __future__ import annotations

from typing import Any, cast

import pytest

from agentd.session.replicas.remote import RemoteWatches
from agentd.store.db import Store, StoredEvent
from agentd.transport.render import ACP_RENDERER
from tests.support.polling import until

SID = "s-remote"
pytestmark = pytest.mark.timeout(30)


class Log:
    def __init__(self) -> None:
        self.events: list[StoredEvent] = []
        self.down = False

    async def last_seq(self, session_id: str) -> int:
        return len(self.events)

    async def latest_events(self, session_id: str, kinds: list[str], *, limit: int) -> list[StoredEvent]:
        return []

    async def read_events_many(self, reads: list[tuple[str, int, int]]) -> list[Any]:
        return [await self.read_events(sid, after_seq=after, limit=limit) for sid, after, limit in reads]

    async def read_events(self, session_id: str, *, after_seq: int = 0, limit: int | None = None) -> Any:
        if self.down:
            raise ConnectionError("the database is away")
        return [e for e in self.events if e.seq > after_seq][:limit]

    def append(self, seq: int) -> None:
        self.events.append(StoredEvent(seq, "notice", {"severity": "info", "title": f"n{seq}"}))


class Sink:
    def __init__(self) -> None:
        self.id = "conn_1"
        self.frames: list[tuple[str, dict[str, Any]]] = []
        self.urgent: list[tuple[str, dict[str, Any]]] = []

    def send_notification(self, method: str, params: dict[str, Any]) -> bool:
        self.frames.append((method, params))
        return True

    async def send_replay(self, method: str, params: dict[str, Any]) -> bool:
        return self.send_notification(method, params)

    def send_urgent(self, method: str, params: dict[str, Any]) -> None:
        self.urgent.append((method, params))


async def _unanswered(*_a: Any) -> None:
    return None


async def test_a_watch_whose_log_cannot_be_read_tells_its_clients_and_ends() -> None:
    log = Log()
    log.append(1)
    watches = RemoteWatches(cast(Store, log), ACP_RENDERER, _unanswered, replica_id="b", stuck_after_s=0.2)
    sink = Sink()
    await watches.attach(SID, sink, replay=None, after_seq=1, buffer_limit=100, owner="a")
    log.append(2)
    watches.tails.on_notification(f"2 {SID}")
    await until(lambda: len(sink.frames) == 1, what="seq 2 delivered")

    log.down = True
    log.append(3)
    watches.tails.on_notification(f"3 {SID}")
    await until(lambda: sink.urgent, what="the client told")
    ((method, params),) = sink.urgent
    assert method == "_agentd/resync_required"
    assert params["reason"] == "log_unreachable" and params["lastSeq"] == 2
    await until(lambda: len(watches) == 0, what="the watch ended")

    # Once the log is back, a re-attach gets a new watch that follows it.
    log.down = False
    again = Sink()
    await watches.attach(SID, again, replay=None, after_seq=3, buffer_limit=100, owner="a")
    log.append(4)
    watches.tails.on_notification(f"4 {SID}")
    await until(lambda: [p["_meta"]["agentd"]["seq"] for _, p in again.frames] == [4], what="seq 4")
    await watches.stop()
