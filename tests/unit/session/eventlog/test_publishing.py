"""A committed batch's events go to their hub in one `publish` call per run
(agentd/session/eventlog/publishing.py, `PUBLISH_RUNS`): every client gets what one call per
event gives it, waiters are answered after the events before them, and a failed session's
events are not shown."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentd.core.events import Event, EventKind
from agentd.infra import Metrics
from agentd.session.eventlog import publishing
from agentd.session.eventlog.hub import EventHub
from agentd.session.eventlog.writer import EventWriter
from agentd.transport.render import AcpRenderer
from tests.support.hub_sinks import EncodedSink, PlainSink


class NoStore:
    """Commits everything at once (nothing is read back)."""

    async def commit(self, batches: Any) -> None:
        return None


def notice(sid: str, title: str, seq: int | None) -> Event:
    return Event.stored(sid, EventKind.NOTICE, {"severity": "info", "title": title}, seq=seq)


async def stream(runs: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], int, list[str]]:
    """Two sessions' events, a barrier among them, through one writer: what each client got,
    how many `publish` calls the hubs took, and the order of deliveries and the answer."""
    monkeypatch.setattr(publishing, "PUBLISH_RUNS", runs)
    calls = 0
    original = EventHub.publish

    def counted(self: EventHub, *events: Event) -> None:
        nonlocal calls
        calls += 1
        original(self, *events)

    monkeypatch.setattr(EventHub, "publish", counted)
    monkeypatch.setattr(publishing, "_HUB_PUBLISH", counted)
    metrics = Metrics()
    writer = EventWriter(NoStore(), metrics=metrics)  # type: ignore[arg-type]
    writer.start()
    order: list[str] = []
    hubs, sinks = {}, []
    for sid in ("a", "b"):
        hubs[sid] = EventHub(render=AcpRenderer())
        for sink in (EncodedSink(f"{sid}1"), PlainSink(f"{sid}2")):
            hubs[sid].subscribe(sink, sid).go_live(0)
            sinks.append(sink)
    publish = {sid: hub.publish for sid, hub in hubs.items()}  # one bound method each, as a journal keeps
    for i in range(1, 4):
        writer.submit("a", event=notice("a", f"a{i}", i), publish=publish["a"])
    writer.submit("a", event=notice("a", "other", None), publish=lambda e: order.append(e.payload["title"]))
    writer.submit("b", event=notice("b", "b1", 1), publish=publish["b"])
    waiter = writer.barrier()
    waiter.add_done_callback(lambda _f: order.append(f"barrier after {len(sinks[0].texts)}"))
    writer.submit("a", event=notice("a", "a4", 4), publish=publish["a"])
    writer.submit("a", messages=[(0, {"role": "user", "content": "x"})])  # no event: nothing shown
    writer.submit("a", event=notice("a", "a5", 5), publish=publish["a"])
    await writer.barrier()
    await writer.stop()
    assert sum(metrics.fanout_lag_seconds.counts) == 7  # every published event observed once
    return [(s.id, s.texts) for s in sinks], calls, order


async def test_a_batch_published_in_runs_reaches_every_client_as_one_call_per_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    each, each_calls, each_order = await stream(False, monkeypatch)
    runs, run_calls, run_order = await stream(True, monkeypatch)
    assert runs == each
    assert run_order == each_order == ["other", "barrier after 5"]
    assert [len(texts) for _, texts in runs] == [5, 5, 1, 1]
    assert (each_calls, run_calls) == (6, 3)  # (a1 a2 a3) (b1) (a4 a5): a message write ends no run


async def test_a_failed_sessions_events_in_a_run_are_not_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(publishing, "PUBLISH_RUNS", True)
    writer = EventWriter(NoStore())  # type: ignore[arg-type]
    writer.start()
    hub = EventHub(render=AcpRenderer())
    sink = EncodedSink("c")
    hub.subscribe(sink, "a").go_live(0)
    writer.submit("a", event=notice("a", "a1", 1), publish=hub.publish)
    await writer.barrier()
    writer.discard("a")  # its lease was lost: nothing more of it is shown
    publish = hub.publish
    writer.submit("a", event=notice("a", "a2", 2), publish=publish)
    writer.submit("a", event=notice("a", "a3", 3), publish=publish)
    await asyncio.wait_for(writer.barrier(), 30)
    await writer.stop()
    assert len(sink.texts) == 1 and b'"a1"' in sink.texts[0]
