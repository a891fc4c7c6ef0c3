"""What became of a write the event writer took: committed, or not — and why (issue 26).

An acknowledgement (an enqueue, a queue operation, a permission answer) is sent only once
the rows it stands for are in the database. The writer resolves each waiter with a typed
outcome instead of a bare "done": `Committed`, or `NotCommitted(reason)` when it dropped or
discarded the session's writes — the database could not be reached in time, refused the
session's lease token, refused the data, or deadlocked past its retries, or the lease was
lost before the commit. The session layer turns a `NotCommitted` into a retryable
`not_committed` error; the client's retry with the same `requestId` joins what did reach
the store or submits again. `classify` is the pure decision of which reason a database
error is.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import exc as sa_exc

from agentd.session.errors import SessionError, SessionErrorKind
from agentd.store import is_stale_fence

# Postgres SQLSTATEs that roll the whole statement back and are worth retrying as they are.
DEADLOCK_SQLSTATES = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure


class CommitFailure(StrEnum):
    """Why the writer did not commit a session's writes (`data.reason` of the error)."""

    CONNECTION_LOST = "connection_lost"  # the database stayed unreachable past the writer's deadline
    FENCE_REFUSED = "fence_refused"  # the database refused the session's lease token (taken over)
    SESSION_FAILED = "session_failed"  # the database refused the data: the session reloads
    DEADLOCK = "deadlock"  # deadlocked (or serialization failure) on every retry
    LEASE_LOST = "lease_lost"  # the lease was lost before the writes were committed: discarded


@dataclass(frozen=True, slots=True)
class Committed:
    pass


@dataclass(frozen=True, slots=True)
class NotCommitted:
    reason: CommitFailure

    @property
    def retryable(self) -> bool:
        # Every drop leaves the store as it was before the request: sending it again is
        # safe, and with the same requestId never runs anything twice.
        return True


CommitOutcome = Committed | NotCommitted
COMMITTED = Committed()


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE behind SQLAlchemy's wrapper (None for other errors)."""
    seen: BaseException | None = exc
    for _ in range(4):  # SQLAlchemy's wrapper → the driver's error → asyncpg's
        if seen is None:
            return None
        code = getattr(seen, "sqlstate", None) or getattr(seen, "pgcode", None)
        if isinstance(code, str):
            return code
        seen = getattr(seen, "orig", None) or seen.__cause__
    return None


def is_deadlock(exc: BaseException) -> bool:
    return sqlstate(exc) in DEADLOCK_SQLSTATES or "deadlock detected" in str(exc)


def classify(exc: BaseException) -> CommitFailure:
    """The reason a batch the database refused for good is dropped."""
    if is_stale_fence(exc):
        return CommitFailure.FENCE_REFUSED
    if is_deadlock(exc):
        return CommitFailure.DEADLOCK
    if isinstance(exc, (OSError, TimeoutError, sa_exc.OperationalError, sa_exc.InterfaceError)):
        return CommitFailure.CONNECTION_LOST
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return CommitFailure.CONNECTION_LOST
    return CommitFailure.SESSION_FAILED


def not_committed(session_id: str, reason: CommitFailure) -> SessionError:
    """The error of an acknowledgement whose rows never reached the database."""
    return SessionError(
        SessionErrorKind.NOT_COMMITTED,
        f"not_committed: the request's changes to session {session_id} could not be saved "
        f"({reason.value}); retry — with the same requestId it is never run twice",
        {"reason": reason.value, "retryable": True, "retryAfter": 0.5},
    )
