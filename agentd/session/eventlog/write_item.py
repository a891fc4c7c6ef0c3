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
    slotted class: a dataclass's field defaults built a list and a dict per item, and a
    property answered `needs_commit` each of the three times it was asked."""

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

    def __init__(
        self,
        session_id: str,
        event: Event | None = None,
        publish: Publish | None = None,
        *,
        messages: list[tuple[int, dict[str, Any]]] | None = None,
        truncate_from: int | None = None,
        session_fields: dict[str, Any] | None = None,
        queue: QueueWrite | None = None,
        done: asyncio.Future[None] | None = None,
        outcome: asyncio.Future[CommitOutcome] | None = None,
        since: int = 0,
    ) -> None:
        self.session_id = session_id
        self.event = event
        self.publish = publish
        self.messages = messages  # None or non-empty
        self.truncate_from = truncate_from
        self.session_fields = session_fields  # None or non-empty
        self.queue = queue
        self.done = done
        # An acknowledgement's waiter: were the session's writes from ticket `since` on committed?
        self.outcome = outcome
        self.since = since
        self.ticket = 0  # the order of submission (`EventWriter.mark`)
        self.submitted_at = 0.0  # (time.monotonic) for the fan-out lag, when metrics are on
        self.fence: int | None = None  # the session's lease token when it was submitted (R-C1)
        self.cause: Any = None  # the span context of the turn that submitted it (tracing on)
        self.needs_commit = bool(
            (event is not None and event.seq is not None)
            or messages
            or session_fields
            or queue is not None
            or truncate_from is not None
        )
