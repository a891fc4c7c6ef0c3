"""The ordered, group-committed pipeline from session actors to the store and clients.

Actors `submit()` events (and conversation writes) in order. One writer task takes
whatever has queued up, commits every durable item of all sessions in one transaction,
and only then hands the events to each session's hub — so no client ever sees a durable
event a crash could lose (R-E2), and transient deltas never overtake the durable events
queued before them. `flushed()` waits until everything submitted so far was delivered
to the hubs (the drain barrier of R-L3h).

A batch the database refuses for good (bad data, a stale lease token, a deadlock on every
retry, or a database unreachable past `give_up_after_s`) fails its session: the batch and
everything the session submits afterwards is neither committed nor shown, so the store
keeps a gap-free prefix of the session's log; the manager is told (`on_session_failed`),
stops the actor and reloads the session from the store.

Acknowledgements wait on `committed(session_id, since)`, not on a bare barrier: it
resolves `Committed` only if none of the session's writes submitted since the `mark()`
`since` was dropped or discarded, else `NotCommitted(reason)` (commit_outcome.py) — so
"committed" is never answered for rows that did not reach the database (issue 26). A
commit whose answer was lost with its connection is checked against the store before it
is sent again (`Store.landed`): it may have committed.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import types
from collections.abc import Callable, Generator
from time import monotonic
from typing import Any

from agentd.core import Event, EventKind, hold_writes, release_writes, tracing
from agentd.infra import Metrics
from agentd.session.commit_outcome import (
    COMMITTED,
    CommitFailure,
    CommitOutcome,
    NotCommitted,
    classify,
    not_committed,
)
from agentd.session.eventlog.commit_retry import GaveUp, commit_attributes, commit_retrying
from agentd.session.eventlog.publishing import Histogram, publish_items
from agentd.session.eventlog.refusals import restated
from agentd.session.eventlog.write_item import Publish, WriteItem
from agentd.store import Batch, EventWrite, QueueWrite, Store

log = logging.getLogger(__name__)

# An event's kind as its column's text (without an enum `.value` lookup per event).
_KIND_VALUES = {kind: kind.value for kind in EventKind}


SessionFailed = Callable[[str, BaseException], None]

# Sessions whose last dropped write is remembered for acknowledgements still waiting.
MAX_REMEMBERED_DROPS = 10_000
# An idle writer commits at once, without its loop pass of linger, when the newest queued
# item is a barrier (issue 32). False: it always lingers (tests run both).
LINGER_SKIP_FOR_BARRIER = True


@types.coroutine
def _one_loop_turn() -> Generator[None, None, None]:
    """`asyncio.sleep(0)` without its two Python calls: a bare yield, which the task
    answers by running again on the loop's next turn."""
    yield


class EventWriter:
    def __init__(
        self,
        store: Store,
        *,
        flush_interval: float = 0.0,
        metrics: Metrics | None = None,
        give_up_after_s: float = 30.0,
    ) -> None:
        self._store = store
        # How long a commit is retried while the database is unreachable before its
        # sessions fail (and their waiting acknowledgements with them): never forever.
        self.give_up_after_s = give_up_after_s
        self._metrics = metrics
        # The fan-out lag histogram, looked up once (it is observed per published event).
        # (looked up at the first publish, not here: metrics load prometheus on first use)
        self._lag: Histogram | None = None
        self._flush: Histogram | None = None  # the flush latency histogram, likewise
        self._flush_interval = flush_interval
        # Submitted items in order, and the writer's wake-up while it waits for one: a plain
        # deque (13 items per trivial turn: an asyncio.Queue's put/get bookkeeping per item
        # cost more than the rest of handing it over).
        self._queue: collections.deque[WriteItem] = collections.deque()
        self._wake: asyncio.Future[None] | None = None
        # Items taken off the queue and not yet all published (the writer's batch, or a
        # transient event published at once): later transient events must queue behind them.
        self._holding = False
        self._task: asyncio.Task[None] | None = None
        # The writer task's loop while it runs: `barrier` and `committed` make their futures
        # there without `get_running_loop()` (a getpid() system call in 3.11) per call.
        self._loop: asyncio.AbstractEventLoop | None = None
        self.commits = 0  # for metrics and tests
        self.dropped_batches = 0  # batches the database refused (each failed its session)
        # Sessions whose batch was refused (and why): their later writes are discarded until
        # `clear_failure` (a new actor, loaded from the store, takes over).
        self._failed: dict[str, CommitFailure] = {}
        self._tickets = 0  # the last ticket handed out
        # Session id → (the last ticket of its writes dropped, why), oldest first.
        self._dropped: collections.OrderedDict[str, tuple[int, CommitFailure]] = collections.OrderedDict()
        # The database as the writer sees it (for /readyz): commits failing in a row, since when.
        self.failing_since: float | None = None
        self.last_error: str = ""
        self.on_session_failed: SessionFailed | None = None
        # Session id → its lease's fencing token (R-C1), kept by `SessionLeases`: every
        # write is stamped with the token current when it was submitted, and the database
        # refuses it if the session was taken over since. Empty without leases (SQLite).
        self.fences: dict[str, int] = {}

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="event-writer")

    async def stop(self) -> None:
        """Flush what is queued, then stop."""
        await self.barrier()
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._loop = None

    # ------------------------------------------------------------------ producers

    def submit(
        self,
        session_id: str,
        *,
        event: Event | None = None,
        publish: Publish | None = None,
        messages: list[tuple[int, dict[str, Any]]] | None = None,
        truncate_from: int | None = None,
        session_fields: dict[str, Any] | None = None,
        queue: QueueWrite | None = None,
    ) -> None:
        self._put(session_id, event, publish, session_fields or None, messages or None, truncate_from, queue)

    def _put(
        self,
        session_id: str,
        event: Event | None = None,
        publish: Publish | None = None,
        session_fields: dict[str, Any] | None = None,
        messages: list[tuple[int, dict[str, Any]]] | None = None,
        truncate_from: int | None = None,
        queue: QueueWrite | None = None,
        done: asyncio.Future[None] | None = None,
        outcome: asyncio.Future[CommitOutcome] | None = None,
        since: int = 0,
    ) -> None:
        """Make the write's item (the one place that does: see `WriteItem`), give it its
        ticket, queue it and wake the writer."""
        item = WriteItem()
        item.session_id, item.event, item.publish = session_id, event, publish
        item.session_fields, item.messages, item.truncate_from = session_fields, messages, truncate_from
        item.queue, item.done, item.outcome, item.since = queue, done, outcome, since
        if (
            (event is not None and event.seq is not None)
            or messages
            or session_fields
            or queue is not None
            or truncate_from is not None
        ):
            item.needs_commit = True
            fences = self.fences  # empty without leases (SQLite): no look-up
            item.fence = fences.get(session_id) if fences else None
            item.cause = tracing.cause()
        else:
            item.needs_commit, item.fence, item.cause = False, None, None
        item.submitted_at = monotonic() if event is not None and self._metrics is not None else 0.0
        self._tickets += 1
        item.ticket = self._tickets
        self._queue.append(item)
        wake = self._wake
        if wake is not None:
            self._wake = None
            if not wake.done():
                wake.set_result(None)

    # The journal's every event, `(session_id, event, publish, session_fields=None)`: the
    # session row's fields written in the event's own commit. `_put` itself: one call
    # (also the journal's message writes: `(session_id, None, None, None, messages)`).
    submit_event = _put

    def submit_transient(self, session_id: str, event: Event, publish: Publish) -> None:
        """A non-durable event (a streamed chunk). With nothing queued or in flight before it,
        it is published at once — the order is the same, and a wake-up of the writer task
        per chunk is saved (issue 14: a model streaming chunk by chunk paid one each);
        else it queues as one small item (nothing to commit) behind what is before it."""
        if self._queue or self._holding:
            self._put(session_id, event, publish)
            return
        if session_id in self._failed:
            self._tickets += 1
            self._note_drop(session_id, self._tickets, self._failed[session_id])
            return  # as the writer: nothing of a failed session is shown
        self._holding = True  # whatever the publishing submits goes behind this event
        try:
            publish(event)
        except Exception:  # a broken subscriber must not stop the log
            log.exception("publishing event failed")
        finally:
            self._holding = False
        if self._metrics is not None:
            # `observe(0.0)` without its call (once per streamed chunk): its bucket's count
            # (a zero adds nothing to the sum).
            (self._lag or self._fanout_lag()).counts[0] += 1

    def failed(self, session_id: str) -> bool:
        return session_id in self._failed

    def discard(self, session_id: str) -> None:
        """The session's lease was lost: its writes not yet committed, and any it still
        submits, are dropped (never shown) until `clear_failure`."""
        self._failed.setdefault(session_id, CommitFailure.LEASE_LOST)

    def clear_failure(self, session_id: str) -> None:
        """The failed session's actor is gone (and a barrier passed since): writes for it
        are accepted again — they come from an actor loaded from the store's last seq."""
        self._failed.pop(session_id, None)

    def barrier(self) -> asyncio.Future[None]:
        """Resolves once everything submitted before this call is committed (or dropped)
        and published. It says nothing of which: an acknowledgement waits on `committed`.
        Queued at once (a future, not a coroutine: one frame fewer per barrier)."""
        fut: asyncio.Future[None] = (self._loop or asyncio.get_running_loop()).create_future()
        self._put("", done=fut)
        return fut

    def mark(self) -> int:
        """The ticket of the next write submitted: `committed(session, mark)` covers it and
        everything after it."""
        return self._tickets + 1

    def committed(self, session_id: str, since: int) -> asyncio.Future[CommitOutcome]:
        """Resolves once everything submitted so far is through the writer: `Committed`
        if none of the session's writes from ticket `since` on was dropped or discarded,
        else `NotCommitted(reason)`. Queued at once (not when first awaited), so it is
        after every write submitted before the call."""
        fut: asyncio.Future[CommitOutcome] = (self._loop or asyncio.get_running_loop()).create_future()
        self._put(session_id, outcome=fut, since=since)
        return fut

    async def require_committed(self, session_id: str, since: int) -> None:
        """`committed`, raising a retryable `not_committed` error for a `NotCommitted`:
        what a handler awaits before acknowledging the session's writes since `since`."""
        outcome = await self.committed(session_id, since)
        if isinstance(outcome, NotCommitted):
            raise not_committed(session_id, outcome.reason)

    def outcome_since(self, session_id: str, since: int) -> CommitOutcome:
        dropped = self._dropped.get(session_id)
        if dropped is not None and dropped[0] >= since:
            return NotCommitted(dropped[1])
        return COMMITTED

    def _note_drop(self, session_id: str, ticket: int, reason: CommitFailure) -> None:
        last = self._dropped.pop(session_id, None)
        self._dropped[session_id] = (max(ticket, last[0] if last else 0), reason)
        while len(self._dropped) > MAX_REMEMBERED_DROPS:
            self._dropped.popitem(last=False)

    # ------------------------------------------------------------------ writer

    async def _run(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        busy = False  # the last batch found more queued behind it: the writer is under load
        while True:
            while not self._queue:
                wake = self._wake = loop.create_future()
                await wake
            if self._queue[0].needs_commit:
                # Adaptive linger: an idle writer commits at once (one loop turn lets the
                # producers woken with this one add theirs); under load the batch grows by
                # itself while the previous commit is in flight, and `flush_interval` is an
                # optional extra wait for still larger batches.
                if busy and self._flush_interval:
                    await asyncio.sleep(self._flush_interval)
                elif not (LINGER_SKIP_FOR_BARRIER and self._queue[-1].done is not None):
                    # (not when the newest item is a barrier: its producer now waits for
                    # the commit and adds nothing more; the loop pass would only delay it —
                    # the drain barrier before a tool round, the turn's last flush)
                    await _one_loop_turn()
            items, self._queue = self._queue, collections.deque()  # taken whole, no copy
            self._holding = True
            try:
                if not items[0].needs_commit and len(items) > 1:
                    items = self._through_ahead(items)
                batches, dropped = self._batches(items)
                if batches:
                    listed = list(batches.values())
                    if tracing.enabled():
                        exc = await self._traced_attempt(items, batches, listed)
                    else:
                        # The first try inline (no coroutine of ours to resume per commit);
                        # a failure goes on in `_attempt`, which retries it as its own.
                        try:
                            started = monotonic()
                            await self._store.commit(listed)
                        except Exception as first:
                            exc = await self._attempt(listed, first)
                        else:
                            exc = None
                            if self._metrics is not None:
                                (self._flush or self._flush_histogram()).observe(monotonic() - started)
                            self.commits += 1
                    if exc is not None:
                        dropped = await self._refused(listed, exc, dropped)
                if dropped:  # every one of their items remembered as dropped (the common
                    # batch drops nothing: no second pass over it)
                    for item in items:
                        reason = dropped.get(item.session_id)
                        if reason is not None:
                            self._note_drop(item.session_id, item.ticket, reason)
                busy = bool(self._queue)
                lag = None if self._metrics is None else self._lag or self._fanout_lag()
                # The batch's publishes (a run per session, split by waiters answered between):
                # each client's direct write once, after them all (agentd/core/cork.py).
                hold_writes()
                try:
                    publish_items(items, dropped, lag, self.outcome_since)
                finally:
                    release_writes()
            finally:
                self._holding = False

    def _through_ahead(self, items: collections.deque[WriteItem]) -> collections.deque[WriteItem]:
        """Publish and resolve the items ahead of the batch's first durable write now; the
        rest is returned. An acknowledgement waits for what was submitted before it, not for
        the commit of writes submitted after it in the same loop step (a `session/close`
        must not wait out a locked database its cancelled turn's last events wait for)."""
        ahead: collections.deque[WriteItem] = collections.deque()
        while not items[0].needs_commit:
            ahead.append(items.popleft())
            if not items:
                return ahead  # nothing to commit: the usual path
        known = self._failed
        dropped = {i.session_id: known[i.session_id] for i in ahead if i.session_id in known} if known else {}
        for item in ahead:
            if item.session_id in dropped:
                self._note_drop(item.session_id, item.ticket, dropped[item.session_id])
        lag = None if self._metrics is None else self._lag or self._fanout_lag()
        publish_items(ahead, dropped, lag, self.outcome_since)
        return items

    def _batches(
        self, items: collections.deque[WriteItem]
    ) -> tuple[dict[str, Batch], dict[str, CommitFailure]]:
        """The durable items as one batch per session, and the failed sessions whose items
        are dropped (and why)."""
        batches: dict[str, Batch] = {}
        known = self._failed
        failed = {i.session_id: known[i.session_id] for i in items if i.session_id in known} if known else {}
        for item in items:
            if not item.needs_commit:
                continue
            sid = item.session_id
            if failed and sid in failed:
                continue
            if sid in batches:
                b = batches[sid]
            else:
                b = batches[sid] = Batch(sid, fence=item.fence)
            event = item.event
            if event is not None and event.seq is not None:
                b.events.append(EventWrite(event.seq, _KIND_VALUES[event.kind], event.data))
            if item.truncate_from is not None:
                # A truncation discards earlier queued writes at or after that index.
                b.messages = [(i, m) for i, m in b.messages if i < item.truncate_from]
                b.truncate_from = (
                    item.truncate_from
                    if b.truncate_from is None
                    else min(b.truncate_from, item.truncate_from)
                )
            if item.messages:
                b.messages.extend(item.messages)
            if item.session_fields:
                b.session_fields.update(item.session_fields)
            if item.queue is not None:
                b.queue.append(item.queue)
        return batches, failed

    async def _traced_attempt(
        self, items: collections.deque[WriteItem], batches: dict[str, Batch], listed: list[Batch]
    ) -> BaseException | None:
        # Under the turn that caused it (linked to each, when a batch carries several turns').
        causes = [i.cause for i in items if i.needs_commit and i.session_id in batches]
        with tracing.commit_span("agentd.commit", commit_attributes(batches), causes):
            return await self._attempt(listed)

    async def _refused(
        self, listed: list[Batch], exc: BaseException, failed: dict[str, CommitFailure]
    ) -> dict[str, CommitFailure]:
        """The batches were refused for good (`exc`): every session fails when the database
        is unreachable or the batch was one session's; else each is tried alone."""
        if isinstance(exc, GaveUp) or len(listed) == 1:
            for batch in listed:
                failed[batch.session_id] = self._fail(batch, await restated(self._store, batch, exc))
            return failed
        return failed | await self._commit_one_by_one(listed)

    def _fanout_lag(self) -> Histogram:
        assert self._metrics is not None
        self._lag = self._metrics.fanout_lag_seconds
        return self._lag

    def _flush_histogram(self) -> Histogram:
        assert self._metrics is not None
        self._flush = self._metrics.flush_seconds
        return self._flush

    def _committed(self, started: float | None) -> None:
        """A commit went through (`started`: when it was sent; None: it had landed already)."""
        if started is not None and self._metrics is not None:
            (self._flush or self._flush_histogram()).observe(monotonic() - started)
        self.commits += 1

    async def _attempt(self, batches: list[Batch], first: Exception | None = None) -> BaseException | None:
        """Commit `batches` together: None once committed; else the error that refused
        them for good (`GaveUp`: the database stayed unreachable for `give_up_after_s`).
        A connection error or a deadlock is retried (a deadlock at most
        `MAX_DEADLOCK_RETRIES` times); a commit whose answer was lost with its connection
        is first looked for in the store — it may have committed. `first`: what the
        caller's own first try raised."""
        try:
            return await commit_retrying(
                self._store,
                batches,
                first,
                give_up_after_s=self.give_up_after_s,
                health=self,
                committed=self._committed,
            )
        finally:
            # Failing only while a commit is being retried: once it went through or was
            # given up, /readyz no longer reports it (nothing may be written for a while).
            self.failing_since, self.last_error = None, ""

    async def _commit_one_by_one(self, batches: list[Batch]) -> dict[str, CommitFailure]:
        """A permanent error (bad data) must not wedge every session: commit each
        session's batch alone; the session whose batch the database refuses fails."""
        dropped: dict[str, CommitFailure] = {}
        for batch in batches:
            exc = await self._attempt([batch])
            if exc is not None:
                dropped[batch.session_id] = self._fail(batch, await restated(self._store, batch, exc))
        return dropped

    def database_health(self) -> str:
        """Empty while commits go through; else what has been failing, and for how long."""
        if self.failing_since is None:
            return ""
        age = asyncio.get_running_loop().time() - self.failing_since
        return f"event log commits failing for {age:.1f}s: {self.last_error}"

    def _fail(self, batch: Batch, exc: BaseException) -> CommitFailure:
        seqs = [e.seq for e in batch.events]
        log.error(
            "session %s FAILED: the database refused its batch (seqs %s): %s; its later writes are "
            "discarded and it is reloaded from the store",
            batch.session_id,
            f"{seqs[0]}..{seqs[-1]}" if seqs else "none",
            exc,
        )
        self.dropped_batches += 1
        reason = CommitFailure.CONNECTION_LOST if isinstance(exc, GaveUp) else classify(exc)
        self._failed[batch.session_id] = reason
        if self.on_session_failed is not None:
            try:
                self.on_session_failed(batch.session_id, exc)
            except Exception:  # the writer must go on for every other session
                log.exception("session %s: handling its failure failed", batch.session_id)
        return reason
