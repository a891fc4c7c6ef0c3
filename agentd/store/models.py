"""Tables. The Alembic migrations in `migrations/` create exactly these (one schema for
SQLite and Postgres).

SQLAlchemy Core `Table`s, each spelled as a class whose attributes are its columns
(`SessionRow.id`, `SessionRow.__table__`; `select(SessionRow)`, `insert(EventRow)` take the
class as they take the table): nothing here is mapped, so `sqlalchemy.orm` is never
imported (+5.8 MiB resident in every idle server; issue 32 item 3). A column is NOT NULL
unless declared `nullable=True`, as the declarative models this replaced had it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.types import TypeEngine

if TYPE_CHECKING:  # for the type checker only: the ORM's typed column (never imported to run)
    from sqlalchemy.orm import Mapped

T = TypeVar("T")


def utcnow() -> datetime:
    return datetime.now(UTC)


def col(type_: TypeEngine[T], *, nullable: bool = False, **kw: Any) -> Mapped[T]:
    """A column, named after the attribute it is assigned to (`Base.__init_subclass__`).
    Typed as the ORM's `Mapped` for the checker (its SQL operators and value type, as the
    declarative models had them); at run time a Core `Column`, with the same operators."""
    return cast("Mapped[T]", Column(type_, nullable=nullable, **kw))


class Base:
    """A table as a class: its columns are class attributes; `__table__` is the `Table`."""

    metadata: ClassVar[MetaData] = MetaData()
    __tablename__: ClassVar[str]
    __table__: ClassVar[Table]
    __table_args__: ClassVar[tuple[Any, ...]] = ()

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        columns = []
        for name, value in vars(cls).items():
            if isinstance(value, Column):
                value.name = value.key = name
                columns.append(value)
        cls.__table__ = Table(cls.__tablename__, Base.metadata, *columns, *cls.__table_args__)

    @classmethod
    def __clause_element__(cls) -> Table:
        return cls.__table__


_ID = BigInteger().with_variant(Integer(), "sqlite")


class SessionRow(Base):
    __tablename__ = "sessions"

    id = col(String(64), primary_key=True)
    owner = col(String(128))
    cwd = col(Text())
    title = col(Text(), nullable=True)
    mode = col(String(32))  # the permission mode
    # The plan gate (read-only), independent of the permission mode (issue 16 item 8).
    plan = col(Boolean(), default=False, server_default=false())
    model = col(String(128))
    agent = col(String(128), default="default")
    # Tool names the user answered "always allow" / "always reject" for (R-T4).
    permission_memory = col(JSON(), default=dict)
    # The session's goal (R-L2c), retry buckets (R-R2) and usage ledger (R-R4).
    goal = col(JSON(), nullable=True)
    retry_state = col(JSON(), nullable=True)
    usage = col(JSON(), nullable=True)
    # The text of messages still streaming, checkpointed at most every second (R-E1), so
    # a crash loses at most a second of what clients were shown; NULL when none.
    partial = col(JSON(), nullable=True)
    # The lease token (R-C1) of the replica that last wrote the row (the group commit).
    fence = col(BigInteger(), nullable=True)
    # The turn running now (set with its `turn_started`, cleared with its `turn_ended`, by the
    # group commit): a session whose lease ran out while it is set is taken over (R-C1).
    running_turn = col(String(64), nullable=True)
    created_at = col(DateTime(timezone=True), default=utcnow)
    updated_at = col(DateTime(timezone=True), default=utcnow)


class EventRow(Base):
    """The append-only durable event log (R-E1); `seq` is strictly increasing per session."""

    __tablename__ = "events"
    __table_args__ = (UniqueConstraint("session_id", "seq", name="uq_events_session_seq"),)

    id = col(_ID, primary_key=True)
    session_id = col(String(64))
    seq = col(BigInteger())
    kind = col(String(64))
    payload = col(JSON())
    created_at = col(DateTime(timezone=True), default=utcnow)
    fence = col(BigInteger(), nullable=True)  # the writer's lease token


class MessageRow(Base):
    """The conversation the model sees, one row per message, in order (`idx`)."""

    __tablename__ = "messages"
    __table_args__ = (UniqueConstraint("session_id", "idx", name="uq_messages_session_idx"),)

    id = col(_ID, primary_key=True)
    session_id = col(String(64))
    idx = col(Integer())
    data = col(JSON())
    fence = col(BigInteger(), nullable=True)


class QueuedPromptRow(Base):
    """A prompt waiting to run (R-S3, R-E6), one row each so that a queue change writes
    only what changed; `position` orders a session's rows (gaps allowed)."""

    __tablename__ = "queued_prompts"

    id = col(String(64), primary_key=True)
    session_id = col(String(64))
    position = col(BigInteger())
    kind = col(String(16))
    version = col(Integer())
    owner = col(String(128))
    last_editor = col(String(128))
    send_now = col(Boolean())
    # The client's idempotency key: a retry after a restart still finds its prompt.
    request_id = col(Text(), nullable=True)
    blocks = col(JSON())
    meta = col(JSON())
    fence = col(BigInteger(), nullable=True)


class ApiTokenRow(Base):
    """A bearer token (R-X1): only its SHA-256 is stored; `principal` is who it acts as."""

    __tablename__ = "api_tokens"
    __table_args__ = (UniqueConstraint("token_hash", name="uq_api_tokens_hash"),)

    id = col(String(64), primary_key=True)
    principal = col(String(128))
    name = col(Text(), nullable=True)
    token_hash = col(String(64))
    # The teams the token's principal acts in (R-X2); NULL: none.
    teams = col(JSON(), nullable=True)
    created_at = col(DateTime(timezone=True), default=utcnow)
    revoked_at = col(DateTime(timezone=True), nullable=True)
    # When it stops being accepted (NULL: never); its streams end then (issue 28 item 3).
    expires_at = col(DateTime(timezone=True), nullable=True)


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

    id = col(_ID, primary_key=True)
    session_id = col(String(64))
    from_seq = col(BigInteger())
    to_seq = col(BigInteger())
    message_idx = col(Integer(), nullable=True)


Index("ix_turn_cuts_session", TurnCutRow.session_id)


class FileSnapshotRow(Base):
    """A file's content before a turn first changed it (R-T12, seed 003 "变更类工具执行前留底"):
    `state` is `present` (content kept), `absent` (the turn created it) or `too_large` (over
    the cap: recorded, not restorable)."""

    __tablename__ = "file_snapshots"

    session_id = col(String(64), primary_key=True)
    turn_id = col(String(64), primary_key=True)
    path = col(Text(), primary_key=True)  # relative to the session's cwd
    state = col(String(16))
    size = col(BigInteger())
    content = col(LargeBinary(), nullable=True)
    created_at = col(DateTime(timezone=True), default=utcnow)


class SessionShareRow(Base):
    """A session its owner shared with a team (R-X2): `access` is `watch` or `drive`."""

    __tablename__ = "session_shares"

    session_id = col(String(64), primary_key=True)
    team = col(String(128), primary_key=True)
    access = col(String(16))


Index("ix_session_shares_team", SessionShareRow.team, SessionShareRow.session_id)


class SessionLeaseRow(Base):
    """Which replica owns a session (R-C1): `token` (the fencing token) grows by one on
    every acquisition; `expires_at` is on the database's clock. Events, messages and queued
    prompts carry the token they were written under (`fence`); on Postgres a trigger
    rejects a stale one (migration 0010)."""

    __tablename__ = "session_leases"

    session_id = col(String(64), primary_key=True)
    owner = col(String(128))
    token = col(BigInteger())
    expires_at = col(DateTime(timezone=True))


Index("ix_session_leases_owner", SessionLeaseRow.owner)


class RoutedCommandRow(Base):
    """A command for a session another replica owns (R-C1), from `caller` to `target` and
    its `outcome` back (agentd/store/routed.py). Deleted once the caller has read it."""

    __tablename__ = "routed_commands"

    id = col(_ID, primary_key=True)
    session_id = col(String(64))
    target = col(String(128))
    caller = col(String(128))
    method = col(String(100))
    principal = col(String(200))
    teams = col(JSON())
    params = col(JSON())
    state = col(String(16))  # pending → running → done
    runner = col(String(64), nullable=True)  # the owner process's incarnation
    outcome = col(JSON(), nullable=True)
    created_at = col(DateTime(timezone=True), default=utcnow)


Index("ix_routed_commands_target", RoutedCommandRow.target, RoutedCommandRow.state)
Index("ix_routed_commands_caller", RoutedCommandRow.caller)
