"""Broken database connections are discarded, never reused (issue 26).

A connection the server closed (`pg_terminate_backend`, a failover, an idle-connection
reaper) or one left mid-operation by an error must not go back into the pool: the next
request would meet `connection was closed in the middle of operation`, or asyncpg's
`cannot switch to state 15; another operation is in progress`. SQLAlchemy's asyncpg
dialect counts an error as a disconnect only when the socket is already closed when the
error is raised, which a server's termination message often precedes. So:

- `is_disconnect` is the pure decision: an error of the connection rather than of the
  data (SQLSTATE classes 08 and 57P, asyncpg's interface errors, OS-level errors);
- `guard` makes an engine act on it: such an error invalidates that one connection
  (`handle_error`), and a checkout refuses a pooled connection whose driver connection
  already closed (a local check, no round trip), so the pool opens a fresh one instead of
  failing the next request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import event
from sqlalchemy import exc as sa_exc

if TYPE_CHECKING:  # `sqlalchemy.ext.asyncio` brings the ORM: not for `is_disconnect` (start-up)
    from sqlalchemy.engine import ExceptionContext

    from agentd.store.aio import AsyncEngine

# connection_exception (08xxx), operator intervention: admin/crash shutdown, cannot connect now.
_SQLSTATE_PREFIXES = ("08", "57P")
# asyncpg's client-side errors that leave the connection unusable.
_MESSAGES = (
    "another operation is in progress",
    "connection is closed",
    "connection was closed",
    "cannot perform operation",
    "the underlying connection is closed",
)


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(out) < 5:  # SQLAlchemy's wrapper → the DBAPI's → asyncpg's
        out.append(seen)
        seen = getattr(seen, "orig", None) or seen.__cause__
    return out


def is_disconnect(exc: BaseException) -> bool:
    """Whether `exc` says the connection (not the statement) is broken."""
    for err in _chain(exc):
        if isinstance(err, sa_exc.DBAPIError) and err.connection_invalidated:
            return True
        if isinstance(err, (OSError, ConnectionError)):
            return True
        code = getattr(err, "sqlstate", None)
        if isinstance(code, str) and code.startswith(_SQLSTATE_PREFIXES):
            return True
        if type(err).__name__ in ("InterfaceError", "ConnectionDoesNotExistError", "InternalClientError"):
            text = str(err)
            if any(m in text for m in _MESSAGES):
                return True
    return False


def _on_error(context: ExceptionContext) -> None:
    if not context.is_disconnect and is_disconnect(context.original_exception):
        context.is_disconnect = True  # this connection is invalidated: never pooled again
        context.invalidate_pool_on_disconnect = False  # the others may be fine


def driver_closed(dbapi_connection: Any) -> bool:
    """Whether the driver already knows its connection is closed (a local check)."""
    driver = getattr(dbapi_connection, "driver_connection", None)
    is_closed = getattr(driver, "is_closed", None)
    return bool(is_closed()) if callable(is_closed) else False


def _on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    if driver_closed(dbapi_connection):
        # The pool discards it and checks out (or opens) another.
        raise sa_exc.DisconnectionError("pooled connection already closed by the server")


def guard(engine: AsyncEngine) -> AsyncEngine:
    """Install both checks on `engine` (idempotent); returns it."""
    sync = engine.sync_engine
    if not event.contains(sync, "handle_error", _on_error):
        event.listen(sync, "handle_error", _on_error)
        event.listen(sync.pool, "checkout", _on_checkout)
    return engine
