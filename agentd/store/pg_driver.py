"""Statements sent on a pooled connection's asyncpg connection itself (Postgres only).

SQLAlchemy's path for one statement — a greenlet, a cursor, a result, the compiled
statement's parameter processing — costs about as much CPU as the round trip on an idle
host. The few statements a routed command waits on (agentd/store/routed.py: submit, claim,
finish; issue 26 item 5), the log reads of the tails that publish its turn's events
(`Store.read_events`) and the group commit (agentd/store/pg_commit.py) go to asyncpg
directly, still through the engine's pool (its limits, its wait within the request's
deadline, its discarding of broken connections), autocommitted: one statement is one
round trip and one implicit transaction. Their errors reach the caller as SQLAlchemy's
would (`sqlalchemy.exc.DBAPIError` over the driver's: SQLSTATE and disconnects included),
and a connection such an error broke is invalidated, never pooled again.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import Dialect
from sqlalchemy import exc as sa_exc
from sqlalchemy.util import greenlet_spawn

from agentd.store.aio import AsyncEngine
from agentd.store.disconnects import is_disconnect


def translated(adapted: Any, dialect: Dialect, sql: str, params: Any, exc: Exception) -> Exception:
    """`exc` (asyncpg's) as SQLAlchemy's cursor would have raised it on `adapted` (its
    DBAPI adapter of the connection); `exc` itself when it is not the driver's."""
    try:
        adapted._handle_exception(exc)
    except dialect.loaded_dbapi.Error as dbapi_error:
        # The server's termination message often comes before the socket closes.
        invalidated = bool(dialect.is_disconnect(dbapi_error, adapted, None)) or is_disconnect(exc)
        error: Exception = sa_exc.DBAPIError.instance(
            sql, params, dbapi_error, dialect.loaded_dbapi.Error, connection_invalidated=invalidated
        )
        return error
    except Exception as other:
        return other
    return exc


class Driver:
    """One pooled connection's asyncpg connection, for statements in autocommit."""

    def __init__(self, adapted: Any, dialect: Dialect) -> None:
        self._adapted = adapted
        self._dialect = dialect
        self.broken = False

    async def fetchrow(self, sql: str, *params: Any) -> Any:
        try:
            return await self._adapted.driver_connection.fetchrow(sql, *params)
        except Exception as exc:
            raise self._fail(sql, params, exc) from exc

    async def fetch(self, sql: str, *params: Any) -> list[Any]:
        try:
            return list(await self._adapted.driver_connection.fetch(sql, *params))
        except Exception as exc:
            raise self._fail(sql, params, exc) from exc

    async def fetchval(self, sql: str, *params: Any) -> Any:
        try:
            return await self._adapted.driver_connection.fetchval(sql, *params)
        except Exception as exc:
            raise self._fail(sql, params, exc) from exc

    async def execute(self, sql: str, *params: Any) -> None:
        try:
            await self._adapted.driver_connection.execute(sql, *params)
        except Exception as exc:
            raise self._fail(sql, params, exc) from exc

    def _fail(self, sql: str, params: Any, exc: Exception) -> Exception:
        error = translated(self._adapted, self._dialect, sql, params, exc)
        if is_disconnect(error):
            self.broken = True
        return error


@contextlib.asynccontextmanager
async def driver(engine: AsyncEngine) -> AsyncIterator[Driver]:
    """A pooled connection's driver for a few autocommitted statements: checked out of the
    pool itself (its limits, its deadline, its check of a closed connection; no
    SQLAlchemy `Connection` around it), put back with no round trip (no transaction was
    begun on it) — or invalidated when an error broke it, or when the task was cancelled
    in the middle of a statement (the connection's state is then unknown)."""
    fairy = await engine.raw_connection()
    direct = Driver(fairy.dbapi_connection, engine.dialect)
    try:
        yield direct
    except BaseException as exc:
        if not isinstance(exc, Exception):
            direct.broken = True
        raise
    finally:
        await greenlet_spawn(fairy.invalidate if direct.broken else fairy.close)
