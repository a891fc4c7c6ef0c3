"""Tables. The Alembic migrations in `migrations/` create exactly these (one schema for
SQLite and Postgres)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    pass


class SessionRow(Base):
    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(128))
    cwd: Mapped[str] = mapped_column(Text)
    title: Mapped[str | None] = mapped_column(Text, nullable=True)
    mode: Mapped[str] = mapped_column(String(32))  # the permission mode
    # The plan gate (read-only), independent of the permission mode (issue 16 item 8).
    plan: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    model: Mapped[str] = mapped_column(String(128))
    agent: Mapped[str] = mapped_column(String(128), default="default")
    # Tool names the user answered "always allow" / "always reject" for (R-T4).
    permission_memory: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # The session's goal (R-L2c), retry buckets (R-R2) and usage ledger (R-R4).
    goal: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    retry_state: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    usage: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # The text of messages still streaming, checkpointed at most every second (R-E1), so
    # a crash loses at most a second of what clients were shown; NULL when none.
    partial: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # The lease token (R-C1) of the replica that last wrote the row (the group commit).
    fence: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # The turn running now (set with its `turn_started`, cleared with its `turn_ended`, by the
    # group commit): a session whose lease ran out while it is set is taken over (R-C1).
    running_turn: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class EventRow(Base):
    """The append-only durable event log (R-E1); `seq` is strictly increasing per session."""

    __tablename__ = "events"
    __table_args__ = (UniqueConstraint("session_id", "seq", name="uq_events_session_seq"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(64))
    seq: Mapped[int] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    fence: Mapped[int | None] = mapped_column(BigInteger, nullable=True)  # the writer's lease token


class MessageRow(Base):
    """The conversation the model sees, one row per message, in order (`idx`)."""

    __tablename__ = "messages"
    __table_args__ = (UniqueConstraint("session_id", "idx", name="uq_messages_session_idx"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(64))
    idx: Mapped[int] = mapped_column(Integer)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    fence: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class QueuedPromptRow(Base):
    """A prompt waiting to run (R-S3, R-E6), one row each so that a queue change writes
    only what changed; `position` orders a session's rows (gaps allowed)."""

    __tablename__ = "queued_prompts"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(64))
    position: Mapped[int] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String(16))
    version: Mapped[int] = mapped_column(Integer)
    owner: Mapped[str] = mapped_column(String(128))
    last_editor: Mapped[str] = mapped_column(String(128))
    send_now: Mapped[bool] = mapped_column(Boolean)
    # The client's idempotency key: a retry after a restart still finds its prompt.
    request_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    blocks: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    meta: Mapped[dict[str, Any]] = mapped_column(JSON)
    fence: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class ApiTokenRow(Base):
    """A bearer token (R-X1): only its SHA-256 is stored; `principal` is who it acts as."""

    __tablename__ = "api_tokens"
    __table_args__ = (UniqueConstraint("token_hash", name="uq_api_tokens_hash"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    principal: Mapped[str] = mapped_column(String(128))
    name: Mapped[str | None] = mapped_column(Text, nullable=True)
    token_hash: Mapped[str] = mapped_column(String(64))
    # The teams the token's principal acts in (R-X2); NULL: none.
    teams: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # When it stops being accepted (NULL: never); its streams end then (issue 28 item 3).
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


# `session/list` pages (migration 0007): newest first, the id breaking ties, optionally one cwd.
Index("ix_sessions_owner_updated_id", SessionRow.owner, SessionRow.updated_at, SessionRow.id)
Index(
    "ix_sessions_owner_cwd_updated_id", SessionRow.owner, SessionRow.cwd, SessionRow.updated_at, SessionRow.id
)
# `ix_sessions_running_turn` (the takeover sweep's candidates: only sessions running a turn)
# is a partial index made by migration 0012 alone: declaring its dialect-specific `where`
# here would load both SQLAlchemy dialects at import (+2.4 MiB idle RSS, issue 14 item 5).
Index("ix_queued_prompts_session", QueuedPromptRow.session_id, QueuedPromptRow.position)


class TurnCutRow(Base):
    """A rare change to which turns a rewind can reach (R-T12). Turn marks themselves are the
    `turn_started` events (`messageIndex`), written by the group commit: a turn costs no write
    here. A row covers the turns whose `turn_started` seq is in [`from_seq`, `to_seq`]:
    `message_idx` None — they were undone by a rewind (or copied into a fork, which has no
    snapshots); a number — the conversation was cut (`/clear` → 0), none of them starts later."""

    __tablename__ = "turn_cuts"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(64))
    from_seq: Mapped[int] = mapped_column(BigInteger)
    to_seq: Mapped[int] = mapped_column(BigInteger)
    message_idx: Mapped[int | None] = mapped_column(Integer, nullable=True)


Index("ix_turn_cuts_session", TurnCutRow.session_id)


class FileSnapshotRow(Base):
    """A file's content before a turn first changed it (R-T12, seed 003 "变更类工具执行前留底"):
    `state` is `present` (content kept), `absent` (the turn created it) or `too_large` (over
    the cap: recorded, not restorable)."""

    __tablename__ = "file_snapshots"

    session_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    turn_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    path: Mapped[str] = mapped_column(Text, primary_key=True)  # relative to the session's cwd
    state: Mapped[str] = mapped_column(String(16))
    size: Mapped[int] = mapped_column(BigInteger)
    content: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SessionShareRow(Base):
    """A session its owner shared with a team (R-X2): `access` is `watch` or `drive`."""

    __tablename__ = "session_shares"

    session_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    team: Mapped[str] = mapped_column(String(128), primary_key=True)
    access: Mapped[str] = mapped_column(String(16))


Index("ix_session_shares_team", SessionShareRow.team, SessionShareRow.session_id)


class SessionLeaseRow(Base):
    """Which replica owns a session (R-C1): `token` (the fencing token) grows by one on
    every acquisition; `expires_at` is on the database's clock. Events, messages and queued
    prompts carry the token they were written under (`fence`); on Postgres a trigger
    rejects a stale one (migration 0010)."""

    __tablename__ = "session_leases"

    session_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(128))
    token: Mapped[int] = mapped_column(BigInteger)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


Index("ix_session_leases_owner", SessionLeaseRow.owner)


class RoutedCommandRow(Base):
    """A command for a session another replica owns (R-C1), from `caller` to `target` and
    its `outcome` back (agentd/store/routed.py). Deleted once the caller has read it."""

    __tablename__ = "routed_commands"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(64))
    target: Mapped[str] = mapped_column(String(128))
    caller: Mapped[str] = mapped_column(String(128))
    method: Mapped[str] = mapped_column(String(100))
    principal: Mapped[str] = mapped_column(String(200))
    teams: Mapped[list[str]] = mapped_column(JSON)
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16))  # pending → running → done
    runner: Mapped[str | None] = mapped_column(String(64), nullable=True)  # the owner process's incarnation
    outcome: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


Index("ix_routed_commands_target", RoutedCommandRow.target, RoutedCommandRow.state)
Index("ix_routed_commands_caller", RoutedCommandRow.caller)
