"""The ordered, group-committed pipeline from session actors to the store and clients.

Actors `submit()` events (and conversation writes) in order. One writer task takes
whatever has queued up, commits every durable item of all sessions in one transaction,
and only then hands the events to each session's hub — so no client ever sees a durable
event a crash could lose (R-E2), and transient deltas never overtake the durable events
queued before them. `flushed()` waits until everything submitted so far was delivered
to the hubs (the drain barrier of R-L3h).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import exc as sa_exc

from server.metrics import Metrics
from server.session.events import Event
from server.store.db import Batch, Store, StoredEvent
from server.store.queue_rows import QueueWrite

log = logging.getLogger(__name__)

Publish = Callable[[Event], None]


@dataclass
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
    def __init__(
        self, store: Store, *, flush_interval: float = 0.005, metrics: Metrics | None = None
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._flush_interval = flush_interval
        self._queue: asyncio.Queue[_Item] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self.commits = 0  # for metrics and tests
        self.dropped_batches = 0

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
        self._queue.put_nowait(
            _Item(
                session_id,
                event=event,
                publish=publish,
                messages=messages or [],
                truncate_from=truncate_from,
                session_fields=session_fields or {},
                queue=queue,
                submitted_at=asyncio.get_running_loop().time() if self._metrics is not None else 0.0,
            )
        )

    async def barrier(self) -> None:
        """Return once everything submitted before this call is committed and published."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Item("", done=fut))
        await fut

    # ------------------------------------------------------------------ writer

    async def _run(self) -> None:
        while True:
            items = [await self._queue.get()]
            if items[0].needs_commit and self._flush_interval > 0:
                # Linger briefly so concurrent sessions share one commit.
                await asyncio.sleep(self._flush_interval)
            while not self._queue.empty():
                items.append(self._queue.get_nowait())
            dropped = await self._commit(items)
            now = asyncio.get_running_loop().time()
            for item in items:
                if item.session_id in dropped and item.needs_commit:
                    continue  # not durable, so never shown
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
        for item in items:
            if not item.needs_commit:
                continue
            b = batches.setdefault(item.session_id, Batch(item.session_id))
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
            return set()
        delay = 0.05
        while True:
            try:
                started = asyncio.get_running_loop().time()
                await self._store.commit(list(batches.values()))
                self.commits += 1
                if self._metrics is not None:
                    self._metrics.flush_seconds.observe(asyncio.get_running_loop().time() - started)
                return set()
            except Exception as exc:
                if not is_transient(exc):
                    return await self._commit_one_by_one(list(batches.values()))
                # Never publish what is not committed; keep trying (the DB may be restarting).
                log.warning("event log commit failed (%s); retrying in %.2fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def _commit_one_by_one(self, batches: list[Batch]) -> set[str]:
        """A permanent error (bad data) must not wedge every session: commit each
        session's batch alone and drop only the one the database refuses."""
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
                    log.error("session %s: the database refused a batch, dropped: %s", batch.session_id, exc)
                    self.dropped_batches += 1
                    dropped.add(batch.session_id)
                    break
        return dropped


def is_transient(exc: BaseException) -> bool:
    """Errors worth retrying as they are: the connection, not the data."""
    if isinstance(
        exc, (OSError, ConnectionError, TimeoutError, sa_exc.OperationalError, sa_exc.InterfaceError)
    ):
        return True
    return isinstance(exc, sa_exc.DBAPIError) and bool(exc.connection_invalidated)
