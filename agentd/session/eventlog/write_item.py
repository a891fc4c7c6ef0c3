"""One write submitted to the `EventWriter` (writer.py), in order: an event, conversation
and session row writes, a queue row — or a barrier, or an acknowledgement's waiter."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agentd.core import Event
from agentd.session.commit_outcome import CommitOutcome
from agentd.store import QueueWrite

Publish = Callable[[Event], None]


class WriteItem:
    """One submitted write (or a barrier, or an acknowledgement's waiter), in order. A plain
    slotted class with no `__init__`: `EventWriter._put` (writer.py), the one place that
    makes items, sets every field — one Python call per write instead of three (issue 32:
    13 writes per trivial turn); a dataclass's defaults built a list and a dict per item."""

    __slots__ = (
        "cause",
        "done",
        "event",
        "fence",
        "messages",
        "needs_commit",
        "outcome",
        "publish",
        "queue",
        "session_fields",
        "session_id",
        "since",
        "submitted_at",
        "ticket",
        "truncate_from",
    )

    session_id: str
    event: Event | None
    publish: Publish | None
    messages: list[tuple[int, dict[str, Any]]] | None  # None or non-empty
    truncate_from: int | None
    session_fields: dict[str, Any] | None  # None or non-empty
    queue: QueueWrite | None
    done: asyncio.Future[None] | None  # a barrier's
    # An acknowledgement's waiter: were the session's writes from ticket `since` on committed?
    outcome: asyncio.Future[CommitOutcome] | None
    since: int
    ticket: int  # the order of submission (`EventWriter.mark`)
    submitted_at: float  # (time.monotonic) for the fan-out lag, when metrics are on
    fence: int | None  # the session's lease token when it was submitted (R-C1)
    cause: Any  # the span context of the turn that submitted it (tracing on)
    needs_commit: bool
