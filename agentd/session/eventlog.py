"""The ordered, group-committed pipeline from session actors to the store and clients.

Actors `submit()` events (and conversation writes) in order. One writer task takes
whatever has queued up, commits every durable item of all sessions in one transaction,
and only then hands the events to each session's hub — so no client ever sees a durable
event a crash could lose (R-E2), and transient deltas never overtake the durable events
queued before them. `flushed()` waits until everything submitted so far was delivered
to the hubs (the drain barrier of R-L3h).

A batch the database refuses for good (bad data, not a lost connection) fails its
session: the batch and everything the session submits afterwards is neither committed
nor shown, so the store keeps a gap-free prefix of the session's log; the manager is
told (`on_session_failed`), stops the actor and reloads the session from the store.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import exc as sa_exc

from agentd.core import tracing
from agentd.core.events import Event
from agentd.infra.metrics import Metrics
from agentd.store.db import Batch, Store, StoredEvent
from agentd.store.queue_rows import QueueWrite

log = logging.getLogger(__name__)

Publish = Callable[[Event], None]


def _commit_attributes(batches: dict[str, Batch]) -> dict[str, Any]:
    if not tracing.enabled():
        return {}
    return {
        "agentd.session_ids": sorted(batches),
        "agentd.events": sum(len(b.events) for b in batches.values()),
        "agentd.messages": sum(len(b.messages) for b in batches.values()),
    }


SessionFailed = Callable[[str, BaseException], None]


@dataclass(slots=True)
class _Item:
    session_id: str
    event: Event | None = None
    messages: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    truncate_from: int | None = None
    session_fields: dict[str, Any] = field(default_factory=dict)
    queue: QueueWrite | None = None
    publish: Publish | None = None
    done: asyncio.Future[None] | None = None
    submitted_at: float = 0.0
    fence: int | None = None  # the session's lease token when it was submitted (R-C1)
    cause: Any = None  # the span context of the turn that submitted it (tracing on)

    @property
    def needs_commit(self) -> bool:
        return bool(
            (self.event is not None and self.event.durable)
            or self.messages
            or self.session_fields
            or self.queue is not None
            or self.truncate_from is not None
        )


class EventWriter:
    def __init__(self, store: Store, *, flush_interval: float = 0.0, metrics: Metrics | None = None) -> None:
        self._store = store
        self._metrics = metrics
        self._flush_interval = flush_interval
        # Submitted items in order, and the writer's wake-up while it waits for one: a plain
        # deque (13 items per trivial turn: an asyncio.Queue's put/get bookkeeping per item
        # cost more than the rest of handing it over).
        self._queue: collections.deque[_Item] = collections.deque()
        self._wake: asyncio.Future[None] | None = None
        # Items taken off the queue and not yet all published (the writer's batch, or a
        # transient event published at once): later transient events must queue behind them.
        self._holding = False
        self._task: asyncio.Task[None] | None = None
        self.commits = 0  # for metrics and tests
        self.dropped_batches = 0  # batches the database refused (each failed its session)
        # Sessions whose batch was refused: their later writes are discarded until
        # `clear_failure` (a new actor, loaded from the store, takes over).
        self._failed: set[str] = set()
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
        self._put(
            _Item(
                session_id,
                event=event,
                publish=publish,
                messages=messages or [],
                truncate_from=truncate_from,
                session_fields=session_fields or {},
                queue=queue,
                submitted_at=asyncio.get_running_loop().time() if self._metrics is not None else 0.0,
                fence=self.fences.get(session_id),
                cause=tracing.cause(),
            )
        )

    def submit_transient(self, session_id: str, event: Event, publish: Publish) -> None:
        """A non-durable event (a streamed chunk). With nothing queued or in flight before it,
        it is published at once — the order is the same, and a wake-up of the writer task
        per chunk is saved (issue 14: a model streaming chunk by chunk paid one each)."""
        if self._queue or self._holding:
            self.submit(session_id, event=event, publish=publish)
            return
        if session_id in self._failed:
            return  # as the writer: nothing of a failed session is shown
        self._holding = True  # whatever the publishing submits goes behind this event
        try:
            publish(event)
        except Exception:  # a broken subscriber must not stop the log
            log.exception("publishing event failed")
        finally:
            self._holding = False
        if self._metrics is not None:
            self._metrics.fanout_lag_seconds.observe(0.0)

    def failed(self, session_id: str) -> bool:
        return session_id in self._failed

    def discard(self, session_id: str) -> None:
        """The session's lease was lost: its writes not yet committed, and any it still
        submits, are dropped (never shown) until `clear_failure`."""
        self._failed.add(session_id)

    def clear_failure(self, session_id: str) -> None:
        """The failed session's actor is gone (and a barrier passed since): writes for it
        are accepted again — they come from an actor loaded from the store's last seq."""
        self._failed.discard(session_id)

    async def barrier(self) -> None:
        """Return once everything submitted before this call is committed and published."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._put(_Item("", done=fut))
        await fut

    def _put(self, item: _Item) -> None:
        self._queue.append(item)
        wake, self._wake = self._wake, None
        if wake is not None and not wake.done():
            wake.set_result(None)

    # ------------------------------------------------------------------ writer

    async def _run(self) -> None:
        busy = False  # the last batch found more queued behind it: the writer is under load
        while True:
            while not self._queue:
                wake = self._wake = asyncio.get_running_loop().create_future()
                await wake
            if self._queue[0].needs_commit:
                # Adaptive linger: an idle writer commits at once (one loop turn lets the
                # producers woken with this one add theirs); under load the batch grows by
                # itself while the previous commit is in flight, and `flush_interval` is an
                # optional extra wait for still larger batches.
                await asyncio.sleep(self._flush_interval if busy else 0)
            items = list(self._queue)
            self._queue.clear()
            self._holding = True
            try:
                dropped = await self._commit(items)
                busy = bool(self._queue)
                self._publish(items, dropped)
            finally:
                self._holding = False

    def _publish(self, items: list[_Item], dropped: set[str]) -> None:
        now = asyncio.get_running_loop().time()
        for item in items:
            if item.session_id in dropped and item.event is not None:
                continue  # not durable (or after a refused batch), so never shown
            if item.event is not None and item.publish is not None:
                try:
                    item.publish(item.event)
                except Exception:  # a broken subscriber must not stop the log
                    log.exception("publishing event failed")
                if self._metrics is not None:
                    self._metrics.fanout_lag_seconds.observe(now - item.submitted_at)
            if item.done is not None and not item.done.done():
                item.done.set_result(None)

    async def _commit(self, items: list[_Item]) -> set[str]:
        """Commit the durable items; returns the sessions whose batch had to be dropped."""
        batches: dict[str, Batch] = {}
        failed = {item.session_id for item in items if item.session_id in self._failed}
        for item in items:
            if not item.needs_commit or item.session_id in failed:
                continue
            b = batches.setdefault(item.session_id, Batch(item.session_id, fence=item.fence))
            if item.event is not None and item.event.durable:
                assert item.event.seq is not None
                b.events.append(StoredEvent(item.event.seq, item.event.kind.value, item.event.payload))
            if item.truncate_from is not None:
                # A truncation discards earlier queued writes at or after that index.
                b.messages = [(i, m) for i, m in b.messages if i < item.truncate_from]
                b.truncate_from = (
                    item.truncate_from
                    if b.truncate_from is None
                    else min(b.truncate_from, item.truncate_from)
                )
            b.messages.extend(item.messages)
            b.session_fields.update(item.session_fields)
            if item.queue is not None:
                b.queue.append(item.queue)
        if not batches:
            return failed
        delay = 0.05
        while True:
            try:
                started = asyncio.get_running_loop().time()
                causes = [i.cause for i in items if i.needs_commit and i.session_id in batches]
                with tracing.commit_span("agentd.commit", _commit_attributes(batches), causes):
                    await self._store.commit(list(batches.values()))
                self.commits += 1
                if self._metrics is not None:
                    self._metrics.flush_seconds.observe(asyncio.get_running_loop().time() - started)
                return failed
            except Exception as exc:
                if not is_transient(exc):
                    return failed | await self._commit_one_by_one(list(batches.values()))
                # Never publish what is not committed; keep trying (the DB may be restarting).
                log.warning("event log commit failed (%s); retrying in %.2fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def _commit_one_by_one(self, batches: list[Batch]) -> set[str]:
        """A permanent error (bad data) must not wedge every session: commit each
        session's batch alone; the session whose batch the database refuses fails."""
        dropped: set[str] = set()
        for batch in batches:
            delay = 0.05
            while True:
                try:
                    await self._store.commit([batch])
                    self.commits += 1
                    break
                except Exception as exc:
                    if is_transient(exc):
                        await asyncio.sleep(delay)
                        delay = min(delay * 2, 2.0)
                        continue
                    self._fail(batch, exc)
                    dropped.add(batch.session_id)
                    break
        return dropped

    def _fail(self, batch: Batch, exc: BaseException) -> None:
        seqs = [e.seq for e in batch.events]
        log.error(
            "session %s FAILED: the database refused its batch (seqs %s): %s; its later writes are "
            "discarded and it is reloaded from the store",
            batch.session_id,
            f"{seqs[0]}..{seqs[-1]}" if seqs else "none",
            exc,
        )
        self.dropped_batches += 1
        self._failed.add(batch.session_id)
        if self.on_session_failed is not None:
            try:
                self.on_session_failed(batch.session_id, exc)
            except Exception:  # the writer must go on for every other session
                log.exception("session %s: handling its failure failed", batch.session_id)


def is_transient(exc: BaseException) -> bool:
    """Errors worth retrying as they are: the connection, not the data."""
    if isinstance(
        exc,
        (
            OSError,
            ConnectionError,
            TimeoutError,
            sa_exc.TimeoutError,  # no pooled connection free in time (a flood of requests)
            sa_exc.OperationalError,
            sa_exc.InterfaceError,
        ),
    ):
        return True
    return isinstance(exc, sa_exc.DBAPIError) and bool(exc.connection_invalidated)
