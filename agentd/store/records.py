"""What the store hands out and takes in: plain frozen records (never ORM rows, so nothing
outside the store touches a database session) and the `Batch` of one group commit."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agentd.core import quick_init
from agentd.store.queue_rows import QueueWrite


@dataclass(frozen=True)
class SessionRecord:
    id: str
    owner: str
    cwd: str
    title: str | None
    mode: str
    model: str
    agent: str
    permission_memory: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    goal: dict[str, Any] | None = None
    retry_state: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    queue: list[dict[str, Any]] | None = None
    partial: dict[str, Any] | None = None
    plan: bool = False  # the plan gate, apart from `mode`
    running_turn: str | None = None  # the turn its last owner was running (R-C1 takeover)


@dataclass(frozen=True)
class SessionSummary:
    """One row of `session/list`: only the columns it shows (no JSON state to decode)."""

    id: str
    cwd: str
    title: str | None
    updated_at: datetime
    owner: str = ""


@dataclass(frozen=True)
class TokenRecord:
    id: str
    principal: str
    name: str | None
    created_at: datetime
    revoked_at: datetime | None
    teams: tuple[str, ...] = ()  # the teams its principal acts in (R-X2)
    expires_at: datetime | None = None  # None: it does not expire


@dataclass(frozen=True)
class StoredEvent:
    seq: int
    kind: str
    payload: dict[str, Any]


@quick_init
@dataclass(frozen=True)
class EventWrite:
    """An event to store: its payload as the codec encoded it (agentd/core/codec.py), stored
    as these bytes — never serialised a second time."""

    seq: int
    kind: str
    data: bytes


@dataclass
class Batch:
    """Everything one session wants committed together."""

    session_id: str
    events: list[EventWrite] = field(default_factory=list)
    # Conversation writes: (idx, message dict); `truncate_from` drops idx >= n first.
    messages: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    truncate_from: int | None = None
    session_fields: dict[str, Any] = field(default_factory=dict)
    queue: list[QueueWrite] = field(default_factory=list)  # queued-prompt rows, in order
    # The writer's lease token (R-C1), stamped on every row it writes; None without leases.
    fence: int | None = None

    def empty(self) -> bool:
        return not (
            self.events
            or self.messages
            or self.session_fields
            or self.queue
            or self.truncate_from is not None
        )


def utc(value: datetime) -> datetime:
    # SQLite hands back naive datetimes; everything agentd stores is UTC.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def session_record(row: Any) -> SessionRecord:
    """`row`: a sessions row (of `select(SessionRow)`), or a new one's fields as attributes."""
    return SessionRecord(
        id=row.id,
        owner=row.owner,
        cwd=row.cwd,
        title=row.title,
        mode=row.mode,
        model=row.model,
        agent=row.agent,
        permission_memory=dict(row.permission_memory or {}),
        created_at=utc(row.created_at),
        updated_at=utc(row.updated_at),
        goal=row.goal,
        retry_state=row.retry_state,
        usage=row.usage,
        partial=row.partial,
        plan=bool(row.plan),
        running_turn=row.running_turn,
    )
