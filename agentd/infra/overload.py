"""Retryable "not now" errors: the database is saturated or a session's previous actor is
still stopping. Both answer `-32019 limit_exceeded` with `data.retryable = true` (see
docs/protocol.md), never a bare `-32603`, so clients back off and retry."""

from __future__ import annotations

from enum import StrEnum

from sqlalchemy import exc as sa_exc

from agentd.protocol import ErrorCode, RpcError
from agentd.store import is_disconnect


class RetryReason(StrEnum):
    OVERLOADED = "overloaded"  # no database connection free in time, or the database is busy
    DATABASE_UNAVAILABLE = "database_unavailable"  # the connection was lost (reset, failover)
    SESSION_STOPPING = "session_stopping"  # the session's previous actor has not ended yet
    SESSION_FAILED = "session_failed"  # the database refused its events: reloaded from the store


class LimitKind(StrEnum):
    DB_POOL = "db_pool"
    DB_BUSY = "db_busy"
    DB_UNAVAILABLE = "db_unavailable"
    SESSION_STOPPING = "session_stopping"


def retry_later(
    limit: LimitKind, reason: RetryReason, message: str, *, retry_after: float, maximum: float | None = None
) -> RpcError:
    data: dict[str, object] = {
        "limit": limit.value,
        "reason": reason.value,
        "retryable": True,
        "retryAfter": round(retry_after, 3),
    }
    if maximum is not None:
        data["max"] = maximum
    return RpcError(ErrorCode.LIMIT_EXCEEDED, message, data)


def session_stopping(session_id: str, waited: float | None = None) -> RpcError:
    """The session's actor is stopping (`waited`: how long the request waited for it)."""
    return retry_later(
        LimitKind.SESSION_STOPPING,
        RetryReason.SESSION_STOPPING,
        f"session {session_id} is stopping; retry",
        retry_after=0.5 if waited is None else max(0.1, min(waited, 1.0)),
        maximum=waited,
    )


def session_failed(session_id: str) -> RpcError:
    """The database refused the session's events for good: what the turn did after its
    last committed event is lost; the next request reloads the session from the store."""
    return RpcError(
        ErrorCode.INTERNAL_ERROR,
        f"session_failed: the database refused the events of session {session_id}; "
        "it was reloaded from its last saved event — retry",
        {"reason": RetryReason.SESSION_FAILED.value, "retryable": True},
    )


def overload_error(exc: BaseException) -> RpcError | None:
    """The retryable error for a database that could not serve in time, or whose
    connection was lost under the request (issue 26: never a bare `-32603` for a database
    fault; the broken connection is discarded, so a retry gets a fresh one); None for others."""
    if not isinstance(exc, sa_exc.TimeoutError) and is_disconnect(exc) and _from_database(exc):
        return retry_later(
            LimitKind.DB_UNAVAILABLE,
            RetryReason.DATABASE_UNAVAILABLE,
            "database unavailable: the connection to it was lost; retry shortly",
            retry_after=0.5,
        )
    if isinstance(exc, sa_exc.TimeoutError):  # the pool had no free connection within pool_timeout
        return retry_later(
            LimitKind.DB_POOL,
            RetryReason.OVERLOADED,
            "server overloaded: no database connection free; retry shortly",
            retry_after=1.0,
        )
    if isinstance(exc, sa_exc.OperationalError) or (isinstance(exc, TimeoutError) and _from_database(exc)):
        # A lock or statement timeout: SQLite's "database is locked" after busy_timeout,
        # asyncpg's command_timeout (a plain TimeoutError).
        return retry_later(
            LimitKind.DB_BUSY,
            RetryReason.OVERLOADED,
            "server overloaded: the database is busy; retry shortly",
            retry_after=1.0,
        )
    return None


_DB_MODULES = ("sqlalchemy", "asyncpg", "aiosqlite")


def _from_database(exc: BaseException) -> bool:
    """Whether the exception was raised inside the database layer (not some other wait)."""
    tb = exc.__traceback__
    while tb is not None:
        if str(tb.tb_frame.f_globals.get("__name__", "")).startswith(_DB_MODULES):
            return True
        tb = tb.tb_next
    return False
