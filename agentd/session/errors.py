"""The errors the session layer raises (and sets on the futures it answers). They say what
went wrong in the session's terms; the transport maps each kind to its JSON-RPC error
(agentd/transport/errors.py), so nothing here knows a wire code."""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class SessionErrorKind(StrEnum):
    SHUTTING_DOWN = "shutting_down"  # the server is draining: retry against its successor
    SESSION_STOPPING = "session_stopping"  # the session's actor is stopping: retry (it reloads)
    SESSION_FAILED = "session_failed"  # the database refused its events: reloaded, retry
    LIMIT = "limit"  # a queue limit (R-X3): `data` says which
    RESYNC_REQUIRED = "resync_required"  # an attach cursor beyond the log
    CONNECTION_CLOSED = "connection_closed"  # the client went away (mid-replay)
    REPLAY_DETACHED = "replay_detached"  # the subscription was replaced or detached mid-replay
    BUSY = "session_busy"  # needs an idle session (a rewind while a turn runs)
    INVALID = "invalid"  # a request the session cannot apply (an unknown turn to rewind to)
    INTERNAL = "internal"  # a bug or a store that refused the session's recovery
    OWNED_ELSEWHERE = "owned_elsewhere"  # another replica holds the session's lease (R-C1)
    ROUTE_FAILED = "route_failed"  # a command routed to the owner got no answer (R-C1): `data.reason`
    NOT_COMMITTED = "not_committed"  # the writer dropped the request's rows (issue 26): `data.reason`, retry
    REQUEST_CONFLICT = "request_id_conflict"  # a requestId reused with other content (issue 28 item 5)


class SessionError(Exception):
    def __init__(self, kind: SessionErrorKind, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.data = data


# Why a request should be retried (the `reason` in a retryable error's data).
RETRY_SESSION_STOPPING = "session_stopping"
RETRY_SESSION_FAILED = "session_failed"
RETRY_LEASE_LOST = "lease_lost"  # another replica took the session over (R-C1)


class ResyncReason(StrEnum):
    """Why a client's live stream of a session ended (`_agentd/resync_required`'s `reason`)."""

    CLIENT_TOO_SLOW = "client_too_slow"  # its outgoing buffer filled up
    SESSION_FAILED = RETRY_SESSION_FAILED  # the database refused the session's events
    LEASE_LOST = RETRY_LEASE_LOST  # another replica took the session over (R-C1)
    SERVER_SHUTTING_DOWN = "server_shutting_down"
    ACCESS_CHANGED = "access_changed"  # the owner lowered the member's access (R-X2)
    SESSION_DELETED = "session_deleted"  # re-attaching answers "not found"
    SESSION_CLOSED = "session_closed"  # a client closed it (its actor stopped); re-attaching reloads it
    # A replica watching a session owned elsewhere could not read its log for a lease time.
    LOG_UNREACHABLE = "log_unreachable"


def shutting_down(message: str) -> SessionError:
    return SessionError(SessionErrorKind.SHUTTING_DOWN, message)


def session_stopping(session_id: str, waited: float | None = None) -> SessionError:
    """The session's actor is stopping (`waited`: how long the request waited for it)."""
    data: dict[str, Any] = {
        "limit": "session_stopping",
        "reason": RETRY_SESSION_STOPPING,
        "retryable": True,
        "retryAfter": round(0.5 if waited is None else max(0.1, min(waited, 1.0)), 3),
    }
    if waited is not None:
        data["max"] = waited
    return SessionError(SessionErrorKind.SESSION_STOPPING, f"session {session_id} is stopping; retry", data)


def session_failed(session_id: str) -> SessionError:
    """The database refused the session's events for good: what the turn did after its
    last committed event is lost; the next request reloads the session from the store."""
    return SessionError(
        SessionErrorKind.SESSION_FAILED,
        f"session_failed: the database refused the events of session {session_id}; "
        "it was reloaded from its last saved event — retry",
        {"reason": RETRY_SESSION_FAILED, "retryable": True},
    )


def request_conflict(request_id: str, first_prompt_id: str) -> SessionError:
    """A submission repeating a requestId already seen, with other content: refused, not
    taken for a retry of the first (which would silently answer for another prompt)."""
    return SessionError(
        SessionErrorKind.REQUEST_CONFLICT,
        f"request_id_conflict: requestId {request_id!r} was already used for prompt {first_prompt_id} "
        "with different content; use a new requestId for a new prompt",
        {
            "reason": "request_id_conflict",
            "requestId": request_id,
            "promptId": first_prompt_id,
            "retryable": False,
        },
    )


def limit_exceeded(what: str, maximum: float, message: str, **extra: Any) -> SessionError:
    return SessionError(SessionErrorKind.LIMIT, message, {"limit": what, "max": maximum, **extra})
