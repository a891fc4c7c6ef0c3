"""One log read for many tails (issue 26 item 5): the reads a replica's log tails ask for
go to the store together — one statement for every tail that asked while the previous one
was in flight — instead of one statement per tail per commit notification.

At 200 clients routed through a replica, each turn's commits wake that replica's tails
several times; each woken tail used to read its own session's new events (a pooled
checkout, a statement, a Postgres backend's parse and plan), ~23% of the replica's CPU
per routed prompt. Batched like a group commit: a read asked while none is in flight
goes out at once (one client waits for nothing); those asked meanwhile wait for it to
end and go out as the next statement. Each tail keeps its own cursor, lock, retries and
gap check (agentd/session/replicas/log_tail.py): a failed statement fails each of its
reads, and each tail retries by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Protocol

from agentd.store import StoredEvent

MAX_BATCH = 256  # reads per statement (more wait for the next one)


class ManyReader(Protocol):
    async def read_events_many(self, reads: Sequence[tuple[str, int, int]]) -> list[list[StoredEvent]]: ...


class LogReads:
    """Coalesces `read(session, after, limit)` calls into `read_events_many` statements,
    one in flight at a time."""

    def __init__(self, store: ManyReader, *, max_batch: int = MAX_BATCH) -> None:
        self._store = store
        self._max = max_batch
        self._asked: list[tuple[tuple[str, int, int], asyncio.Future[list[StoredEvent]]]] = []
        self._task: asyncio.Task[None] | None = None
        self.statements = 0  # statements sent so far (tests, benches)
        self.reads = 0  # reads they answered

    @property
    def waiting(self) -> int:
        """Reads asked and not sent yet (waiting for the statement in flight)."""
        return len(self._asked)

    async def read(self, session_id: str, after_seq: int, limit: int) -> list[StoredEvent]:
        future: asyncio.Future[list[StoredEvent]] = asyncio.get_running_loop().create_future()
        self._asked.append(((session_id, after_seq, limit), future))
        if self._task is None:
            self._task = asyncio.create_task(self._send(), name="log-reads")
        return await future

    async def _send(self) -> None:
        batch: list[tuple[tuple[str, int, int], asyncio.Future[list[StoredEvent]]]] = []
        try:
            while self._asked:
                batch, self._asked = self._asked[: self._max], self._asked[self._max :]
                batch = [(read, future) for read, future in batch if not future.done()]  # (cancelled)
                if not batch:
                    continue
                self.statements += 1
                self.reads += len(batch)
                try:
                    pages = await self._store.read_events_many([read for read, _ in batch])
                except Exception as exc:  # each tail retries (or gives up) by itself
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (_, future), page in zip(batch, pages, strict=True):
                    if not future.done():
                        future.set_result(page)
        finally:  # stopped: nobody is left waiting on a statement that will not be sent
            self._task = None
            for _, future in batch + self._asked:
                future.cancel()

    async def stop(self) -> None:
        task = self._task
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
