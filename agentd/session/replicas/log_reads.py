"""One log read for many tails (issue 26 item 5): the reads a replica's log tails ask for
go to the store together — one statement for every tail that asked while the previous one
was in flight (agentd/session/replicas/batching.py) — instead of one statement per tail
per commit notification.

At 200 clients routed through a replica, each turn's commits wake that replica's tails
several times; each woken tail used to read its own session's new events (a pooled
checkout, a statement, a Postgres backend's execution), ~23% of the replica's CPU per
routed prompt. Each tail keeps its own cursor, lock, retries and gap check
(agentd/session/replicas/log_tail.py): a failed statement fails each of its reads, and
each tail retries by itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agentd.session.replicas.batching import MAX_BATCH, Batched
from agentd.store import StoredEvent


class ManyReader(Protocol):
    async def read_events_many(self, reads: Sequence[tuple[str, int, int]]) -> list[list[StoredEvent]]: ...


class LogReads(Batched[tuple[str, int, int], list[StoredEvent]]):
    """`read(session, after, limit)` calls coalesced into `read_events_many` statements,
    one in flight at a time."""

    def __init__(self, store: ManyReader, *, max_batch: int = MAX_BATCH) -> None:
        super().__init__(store.read_events_many, name="log-reads", max_batch=max_batch)

    @property
    def reads(self) -> int:
        """Reads answered so far."""
        return self.items

    async def read(self, session_id: str, after_seq: int, limit: int) -> list[StoredEvent]:
        return await self((session_id, after_seq, limit))
