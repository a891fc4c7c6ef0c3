"""The store's async engine: SQLAlchemy's Core engine driven from asyncio (issue 32 item 3).

`sqlalchemy.ext.asyncio` does this, but its package imports its ORM session with it
(`sqlalchemy.orm`, +5.8 MiB resident in every idle server, which uses only Core). This is
the part of it the store uses, over the same machinery: the sync `Engine` built with the
async dialect (`_is_async`, as `create_async_engine` builds it), each call run in a greenlet
by SQLAlchemy's own `greenlet_spawn`. Same semantics as `sqlalchemy.ext.asyncio`:
`engine.begin()` commits on success and rolls back on an error; a connection's close runs to
completion even when its task is cancelled meanwhile (then the cancellation is re-raised).

`AGENTD_STORE_ASYNC_ENGINE=sqlalchemy` makes `create_async_engine` return SQLAlchemy's own
`AsyncEngine` instead (the library path, kept switchable and tested), which has every
method used here: the store's code is written against this module's names and runs on both.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple, cast, overload

from sqlalchemy import Connection, Engine, create_engine
from sqlalchemy.util import greenlet_spawn

if TYPE_CHECKING:
    from sqlalchemy import URL, CursorResult, Executable, Pool, Result
    from sqlalchemy.engine import Dialect
    from sqlalchemy.engine.interfaces import PoolProxiedConnection
    from sqlalchemy.sql.selectable import TypedReturnsRows
    from sqlalchemy.util.typing import TupleAny

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

ENGINE_SETTING = "AGENTD_STORE_ASYNC_ENGINE"  # "agentd" (default) or "sqlalchemy"
_library = os.environ.get(ENGINE_SETTING, "agentd") == "sqlalchemy"


def use_sqlalchemy_engine(library: bool) -> None:
    """Whether engines made from now on are SQLAlchemy's own `AsyncEngine` (the app sets it
    from its settings before it opens the store; the environment's value is the default)."""
    global _library
    _library = library


async def _run_to_completion(coro: Coroutine[Any, Any, T]) -> T:
    """`coro` in a task of its own, awaited to its end even if the caller is cancelled
    meanwhile (then the cancellation is re-raised): a connection's close is never abandoned
    halfway, returning it later into a pool already disposed of."""
    task = asyncio.ensure_future(coro)
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError as err:
            if task.done():
                raise
            cancelled = err
        else:
            break
    if cancelled is not None:
        raise cancelled
    return result


class AsyncTransaction:
    """`conn.begin()`: awaited, a transaction begun; as an async context manager, committed
    at its end or rolled back on an error."""

    __slots__ = ("_conn", "_sync")

    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn
        self._sync: Any = None

    async def _start(self) -> AsyncTransaction:
        self._sync = await greenlet_spawn(self._conn.sync_connection.begin)
        return self

    def __await__(self) -> Any:
        return self._start().__await__()

    async def __aenter__(self) -> AsyncTransaction:
        await self._start()
        self._sync.__enter__()
        return self

    async def __aexit__(self, type_: Any, value: Any, traceback: Any) -> None:
        await greenlet_spawn(self._sync.__exit__, type_, value, traceback)

    async def commit(self) -> None:
        await greenlet_spawn(self._sync.commit)

    async def rollback(self) -> None:
        await greenlet_spawn(self._sync.rollback)


class AsyncConnection:
    """One pooled connection: awaited (`await engine.connect()`) or entered (`async with`)."""

    __slots__ = ("_sync", "engine")

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sync: Connection | None = None

    @property
    def sync_connection(self) -> Connection:
        if self._sync is None:
            raise RuntimeError("the connection was not started: await it or enter it first")
        return self._sync

    @property
    def dialect(self) -> Dialect:
        return self.engine.dialect

    @property
    def default_isolation_level(self) -> str | None:
        return self.sync_connection.default_isolation_level

    async def _start(self) -> AsyncConnection:
        self._sync = await greenlet_spawn(self.engine.sync_engine.connect)
        return self

    def __await__(self) -> Any:
        return self._start().__await__()

    async def __aenter__(self) -> AsyncConnection:
        return await self._start()

    async def __aexit__(self, type_: Any, value: Any, traceback: Any) -> None:
        await _run_to_completion(self.close())

    def begin(self) -> AsyncTransaction:
        return AsyncTransaction(self)

    @overload
    async def execute(
        self,
        statement: TypedReturnsRows[*Ts],
        parameters: Any = None,
        *,
        execution_options: Mapping[str, Any] | None = None,
    ) -> CursorResult[*Ts]: ...

    @overload
    async def execute(
        self,
        statement: Executable,
        parameters: Any = None,
        *,
        execution_options: Mapping[str, Any] | None = None,
    ) -> CursorResult[*TupleAny]: ...

    async def execute(
        self,
        statement: Executable,
        parameters: Any = None,
        *,
        execution_options: Mapping[str, Any] | None = None,
    ) -> CursorResult[*TupleAny]:
        # Buffered: the async dialects fetch a (non-streamed) result's rows as they execute.
        return await greenlet_spawn(
            self.sync_connection.execute, statement, parameters, execution_options=execution_options
        )

    async def scalar(self, statement: Executable, parameters: Any = None) -> Any:
        result: Result[Any] = await self.execute(statement, parameters)
        return result.scalar()

    async def exec_driver_sql(self, statement: str, parameters: Any = None) -> CursorResult[Any]:
        return await greenlet_spawn(self.sync_connection.exec_driver_sql, statement, parameters)

    async def run_sync(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        return await greenlet_spawn(fn, self.sync_connection, *args, **kw)

    async def get_raw_connection(self) -> PoolProxiedConnection:
        return await greenlet_spawn(getattr, self.sync_connection, "connection")

    async def execution_options(self, **opts: Any) -> AsyncConnection:
        await greenlet_spawn(self.sync_connection.execution_options, **opts)
        return self

    async def invalidate(self, exception: BaseException | None = None) -> None:
        await greenlet_spawn(self.sync_connection.invalidate, exception=exception)

    def in_transaction(self) -> bool:
        return self._sync is not None and self._sync.in_transaction()

    @property
    def closed(self) -> bool:
        return self._sync is None or self._sync.closed

    async def commit(self) -> None:
        await greenlet_spawn(self.sync_connection.commit)

    async def rollback(self) -> None:
        await greenlet_spawn(self.sync_connection.rollback)

    async def close(self) -> None:
        if self._sync is not None:
            await greenlet_spawn(self._sync.close)


class AsyncEngine:
    """A sync `Engine` of an async dialect, used from asyncio."""

    __slots__ = ("sync_engine",)

    def __init__(self, sync_engine: Engine) -> None:
        self.sync_engine = sync_engine

    @property
    def url(self) -> URL:
        return self.sync_engine.url

    @property
    def dialect(self) -> Dialect:
        return self.sync_engine.dialect

    @property
    def pool(self) -> Pool:
        return self.sync_engine.pool

    def connect(self) -> AsyncConnection:
        return AsyncConnection(self)

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[AsyncConnection]:
        async with self.connect() as conn, conn.begin():
            yield conn

    async def raw_connection(self) -> PoolProxiedConnection:
        """A pooled DBAPI connection, out of the pool itself (no `Connection` around it)."""
        return await greenlet_spawn(self.sync_engine.raw_connection)

    def execution_options(self, **opts: Any) -> AsyncEngine:
        return AsyncEngine(self.sync_engine.execution_options(**opts))

    async def dispose(self, close: bool = True) -> None:
        await greenlet_spawn(self.sync_engine.dispose, close=close)


def create_async_engine(url: str | URL, **kw: Any) -> AsyncEngine:
    """As `sqlalchemy.ext.asyncio.create_async_engine` (the async dialect's sync `Engine`);
    SQLAlchemy's own `AsyncEngine` under `AGENTD_STORE_ASYNC_ENGINE=sqlalchemy`."""
    if _library:
        from sqlalchemy.ext import asyncio as sa_asyncio

        # The same interface, duck-typed: every method the store calls exists on both.
        return cast(AsyncEngine, sa_asyncio.create_async_engine(url, **kw))
    if kw.get("server_side_cursors"):
        raise ValueError("server-side cursors are not supported by the store's async engine")
    return AsyncEngine(create_engine(url, _is_async=True, **kw))
