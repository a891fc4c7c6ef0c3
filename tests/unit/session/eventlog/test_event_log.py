"""The event log pipeline (R-E1/R-E2): group commit, publish after commit, order kept,
and a batch the database refuses never wedges the other sessions."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentd.core.events import Event, EventKind
from agentd.infra import Metrics
from agentd.session.commit_outcome import COMMITTED, CommitFailure, NotCommitted
from agentd.session.eventlog.writer import EventWriter
from agentd.store.db import Store


@pytest.fixture
async def store(migrated_db_url: str):
    s = await Store.open(migrated_db_url)
    await s.migrate()
    for sid in ("a", "b"):
        await s.create_session(id=sid, owner="local", cwd="/tmp", mode="default", model="m")
    yield s
    await s.close()


def _event(sid: str, seq: int | None, text: str) -> Event:
    kind = EventKind.AGENT_MESSAGE if seq is not None else EventKind.AGENT_MESSAGE_CHUNK
    return Event.stored(sid, kind, {"messageId": "m", "text": text}, seq=seq)


class RecordingStore:
    """Wraps the real store and remembers which seqs its commits returned from."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.committed: set[int] = set()

    async def commit(self, batches):  # type: ignore[no-untyped-def]
        await self.inner.commit(batches)
        self.committed.update(e.seq for b in batches for e in b.events)


async def test_events_are_published_only_after_commit_and_in_order(store: Store):
    recording = RecordingStore(store)
    writer = EventWriter(recording, flush_interval=0.005)  # type: ignore[arg-type]
    writer.start()
    seen: list[tuple[str, int | None, bool]] = []

    def publish(ev: Event) -> None:
        # At publish time a durable event's commit has already returned.
        committed = ev.seq is None or ev.seq in recording.committed
        seen.append((ev.payload["text"], ev.seq, committed))

    for i in range(1, 6):
        writer.submit("a", event=_event("a", i, f"d{i}"), publish=publish)
        writer.submit("a", event=_event("a", None, f"t{i}"), publish=publish)
    await writer.barrier()
    assert [t for t, _, _ in seen] == ["d1", "t1", "d2", "t2", "d3", "t3", "d4", "t4", "d5", "t5"]
    assert all(committed for _, _, committed in seen)
    assert [e.seq for e in await store.read_events("a")] == [1, 2, 3, 4, 5]
    # Ten items, one barrier: far fewer commits than events (group commit).
    assert writer.commits < 5
    await writer.stop()


async def test_a_refused_batch_fails_its_session_loudly_and_other_sessions_go_on(store: Store, caplog):
    writer = EventWriter(store, flush_interval=0.02)
    failures: list[str] = []
    writer.on_session_failed = lambda sid, exc: failures.append(sid)
    writer.start()
    published: list[tuple[str, int | None]] = []

    def publish(ev: Event) -> None:
        published.append((ev.session_id, ev.seq))

    writer.submit("a", event=_event("a", 1, "first"), publish=publish)
    await writer.barrier()
    # Session a reuses seq 1 (the unique constraint refuses it); b's event shares the commit.
    writer.submit("a", event=_event("a", 1, "duplicate"), publish=publish)
    writer.submit("b", event=_event("b", 1, "fine"), publish=publish)
    await writer.barrier()
    assert ("b", 1) in published
    assert published.count(("a", 1)) == 1  # the refused duplicate was never shown
    assert [e.payload["text"] for e in await store.read_events("b")] == ["fine"]
    assert [e.payload["text"] for e in await store.read_events("a")] == ["first"]
    assert writer.dropped_batches == 1
    # The session failed, loudly: the manager is told and the log says so.
    assert failures == ["a"]
    assert writer.failed("a") and not writer.failed("b")
    assert any(r.levelname == "ERROR" and "session a FAILED" in r.getMessage() for r in caplog.records)
    # Its later writes never land after the gap (nor are shown) — b's still do.
    writer.submit("a", event=_event("a", 2, "after the gap"), publish=publish)
    writer.submit("b", event=_event("b", 2, "fine too"), publish=publish)
    await writer.barrier()
    assert [e.seq for e in await store.read_events("a")] == [1]
    assert ("a", 2) not in published and ("b", 2) in published
    # Once a new actor takes over (from the store's last seq), the session writes again.
    writer.clear_failure("a")
    writer.submit("a", event=_event("a", 2, "second"), publish=publish)
    await writer.barrier()
    assert [e.payload["text"] for e in await store.read_events("a")] == ["first", "second"]
    assert failures == ["a"]
    await writer.stop()


async def test_truncate_then_rewrite_keeps_the_newest_messages(store: Store, tmp_path: Path):
    writer = EventWriter(store, flush_interval=0)
    writer.start()
    writer.submit("a", messages=[(0, {"v": "old0"}), (1, {"v": "old1"}), (2, {"v": "old2"})])
    await writer.barrier()
    writer.submit("a", truncate_from=0, messages=[(0, {"v": "summary"}), (1, {"v": "kept"})])
    await writer.barrier()
    assert await store.load_messages("a") == [{"v": "summary"}, {"v": "kept"}]
    await writer.stop()


class GatedStore:
    """The real store, whose commits wait for the test to open the gate: it holds a
    commit "in flight" and records the sessions each commit carried."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()
        self.batches: list[list[str]] = []

    async def commit(self, batches):  # type: ignore[no-untyped-def]
        self.batches.append([b.session_id for b in batches])
        self.entered.set()
        await self.gate.wait()
        await self.inner.commit(batches)


async def test_an_idle_writer_commits_at_once_whatever_the_linger(store: Store):
    # An hour of linger: if an idle writer waited for it, the delivery below would time out.
    writer = EventWriter(store, flush_interval=3600)
    writer.start()
    delivered = asyncio.Event()
    writer.submit("a", event=_event("a", 1, "only"), publish=lambda _e: delivered.set())
    async with asyncio.timeout(30):
        await delivered.wait()
    assert [e.seq for e in await store.read_events("a")] == [1]
    await writer.stop()


async def test_writes_made_while_a_commit_is_in_flight_share_the_next_commit(store: Store):
    gated = GatedStore(store)
    writer = EventWriter(gated, flush_interval=0)  # type: ignore[arg-type]
    writer.start()
    writer.submit("a", event=_event("a", 1, "first"))
    await gated.entered.wait()  # the first commit is in flight
    for seq in range(2, 12):
        writer.submit("a" if seq % 2 else "b", event=_event("a" if seq % 2 else "b", seq, f"e{seq}"))
    gated.gate.set()
    await writer.barrier()
    # One commit for the first event, one for all ten written meanwhile (both sessions).
    assert [sorted(sessions) for sessions in gated.batches] == [["a"], ["a", "b"]]
    assert writer.commits == 2
    await writer.stop()


async def test_a_transient_event_with_nothing_before_it_is_published_at_once(store: Store):
    writer = EventWriter(store, flush_interval=0)
    writer.start()
    seen: list[str] = []
    writer.submit_transient("a", _event("a", None, "t1"), lambda e: seen.append(e.payload["text"]))
    # No loop turn in between: a streamed chunk costs no wake-up of the writer task.
    assert seen == ["t1"]
    await writer.stop()


async def test_a_transient_event_published_at_once_is_a_zero_fanout_lag(store: Store):
    # Counted in the histogram's lowest bucket without an `observe` call: what observe(0.0)
    # records, bucket for bucket.
    metrics, reference = Metrics(), Metrics()
    writer = EventWriter(store, flush_interval=0, metrics=metrics)
    writer.start()
    for text in ("t1", "t2", "t3"):
        writer.submit_transient("a", _event("a", None, text), lambda _e: None)
        reference.fanout_lag_seconds.observe(0.0)
    lag = metrics.fanout_lag_seconds
    assert lag.counts == reference.fanout_lag_seconds.counts and lag.counts[0] == 3
    assert lag.sum == 0.0
    await writer.stop()


async def test_every_event_a_batch_publishes_is_one_fanout_lag_observation(store: Store):
    # Observed once per batch (`observe_many`): one count per published event, none for a
    # barrier, each lag the time from its submit to the batch's publish.
    metrics = Metrics()
    writer = EventWriter(store, flush_interval=0, metrics=metrics)
    writer.start()
    seen: list[str] = []
    for i in range(1, 4):
        writer.submit("a", event=_event("a", i, f"d{i}"), publish=lambda e: seen.append(e.payload["text"]))
    writer.submit("a", event=_event("a", None, "t"), publish=lambda e: seen.append(e.payload["text"]))
    await writer.barrier()
    lag = metrics.fanout_lag_seconds
    assert seen == ["d1", "d2", "d3", "t"]
    assert sum(lag.counts) == 4 and lag.sum > 0.0
    await writer.stop()


async def test_transient_events_never_overtake_a_durable_event_in_flight(store: Store):
    gated = GatedStore(store)
    writer = EventWriter(gated, flush_interval=0)  # type: ignore[arg-type]
    writer.start()
    seen: list[str] = []

    def publish(ev: Event) -> None:
        seen.append(ev.payload["text"])

    writer.submit_transient("a", _event("a", None, "t0"), publish)
    writer.submit("a", event=_event("a", 1, "d1"), publish=publish)
    writer.submit_transient("a", _event("a", None, "t1"), publish)  # queued: d1 is before it
    await gated.entered.wait()  # d1's commit is in flight, the queue is empty again
    writer.submit_transient("a", _event("a", None, "t2"), publish)
    assert seen == ["t0"]
    gated.gate.set()
    await writer.barrier()
    writer.submit_transient("a", _event("a", None, "t3"), publish)  # nothing before it now
    assert seen == ["t0", "d1", "t1", "t2", "t3"]
    await writer.stop()


async def test_a_transient_event_published_at_once_goes_before_what_its_publishing_submits(store: Store):
    writer = EventWriter(store, flush_interval=0)
    writer.start()
    seen: list[str] = []

    def publish(ev: Event) -> None:
        seen.append(ev.payload["text"])
        if ev.payload["text"] == "outer":
            writer.submit_transient("a", _event("a", None, "inner"), publish)
            seen.append("outer done")

    writer.submit_transient("a", _event("a", None, "outer"), publish)
    await writer.barrier()
    assert seen == ["outer", "outer done", "inner"]
    await writer.stop()


async def test_a_failed_sessions_transient_events_are_not_shown(store: Store):
    writer = EventWriter(store, flush_interval=0)
    writer.start()
    seen: list[str] = []
    writer.discard("a")
    writer.submit_transient("a", _event("a", None, "hidden"), lambda e: seen.append(e.payload["text"]))
    writer.submit_transient("b", _event("b", None, "shown"), lambda e: seen.append(e.payload["text"]))
    await writer.barrier()
    assert seen == ["shown"]
    await writer.stop()


async def test_what_is_queued_ahead_of_a_durable_write_is_through_before_its_commit(store: Store):
    # A close's acknowledgement, then in the same loop step the cancelled turn's last
    # events: the acknowledgement stands for nothing after it, so a commit that cannot
    # finish (a locked database) must not hold it — nor the chunks and barrier ahead.
    gated = GatedStore(store)
    writer = EventWriter(gated, flush_interval=0)  # type: ignore[arg-type]
    writer.start()
    seen: list[str] = []
    since = writer.mark()
    ack = writer.committed("a", since)
    writer.submit_transient("a", _event("a", None, "t1"), lambda e: seen.append(e.payload["text"]))
    ahead = writer.barrier()
    writer.submit("a", event=_event("a", 1, "d1"), publish=lambda e: seen.append(e.payload["text"]))
    after = writer.committed("a", since)
    await gated.entered.wait()  # d1's commit is in flight, and stays so
    assert ack.done() and ack.result() == COMMITTED
    assert ahead.done() and seen == ["t1"]
    assert not after.done()  # what stands for d1 waits for it
    gated.gate.set()
    assert await after == COMMITTED
    assert seen == ["t1", "d1"]
    await writer.stop()


async def test_a_failed_sessions_items_ahead_of_a_durable_write_are_dropped_as_before(store: Store):
    gated = GatedStore(store)
    writer = EventWriter(gated, flush_interval=0)  # type: ignore[arg-type]
    writer.start()
    seen: list[str] = []
    writer.discard("a")
    since = writer.mark()
    writer.submit_transient("b", _event("b", None, "shown"), lambda e: seen.append(e.payload["text"]))
    writer.submit_transient("a", _event("a", None, "hidden"), lambda e: seen.append(e.payload["text"]))
    ack = writer.committed("a", since)
    writer.submit("b", event=_event("b", 1, "d1"), publish=lambda e: seen.append(e.payload["text"]))
    await gated.entered.wait()
    assert seen == ["shown"]
    assert ack.done() and ack.result() == NotCommitted(CommitFailure.LEASE_LOST)
    gated.gate.set()
    await writer.barrier()
    assert seen == ["shown", "d1"]
    await writer.stop()


class InstantStore:
    """Commits at once, without a suspension: loop passes counted around the writer are its own."""

    def __init__(self) -> None:
        self.batches: list[list[object]] = []

    async def commit(self, batches):  # type: ignore[no-untyped-def]
        self.batches.append(batches)


async def _passes_until(fut: asyncio.Future[None]) -> int:
    passes = 0
    while not fut.done():
        await asyncio.sleep(0)
        passes += 1
    return passes


async def test_a_barrier_newest_in_the_queue_is_committed_for_without_the_linger_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An idle writer lingers one loop pass for producers woken with it, but not when the
    newest item is a barrier: its producer waits for it (issue 32: the drain barrier before
    a tool round, the turn's last flush) — one pass sooner, and still one commit."""
    from agentd.session.eventlog import writer as writer_module

    passes = {}
    for skip in (False, True):
        monkeypatch.setattr(writer_module, "LINGER_SKIP_FOR_BARRIER", skip)
        store = InstantStore()
        writer = EventWriter(store, flush_interval=0)  # type: ignore[arg-type]
        writer.start()
        await asyncio.sleep(0)  # the writer waits for work
        writer.submit("a", event=_event("a", 1, "x"), publish=lambda _e: None)
        writer.submit("a", event=_event("a", 2, "y"), publish=lambda _e: None)
        passes[skip] = await _passes_until(writer.barrier())
        assert len(store.batches) == 1  # both events in one commit either way
        await writer.stop()
    assert passes[True] == passes[False] - 1
