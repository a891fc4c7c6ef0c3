"""A request waits for a pooled database connection until its own deadline, not for a
fixed time (issue 32, item 4: a burst of requests queues instead of failing).

The transport sets the deadline of each request it runs (`until`); the request pool's
checkout waits for what is left of it. The deadline belongs to the task that set it: a task
started while a request ran (a session's actor, spawned by `session/new`) inherits the
context variable but is not that request, so its waits keep the pool's own timeout."""

from __future__ import annotations

import asyncio
import time
from contextvars import ContextVar
from typing import Any

from sqlalchemy.pool import AsyncAdaptedQueuePool

# (the task the deadline is for, its time.monotonic() deadline)
_DEADLINE: ContextVar[tuple[asyncio.Task[Any], float] | None] = ContextVar("agentd_deadline", default=None)
MIN_WAIT_S = 0.001  # a passed deadline still tries a free connection once, without waiting


class until:  # lower case: used as the function it was, `with until(deadline):`
    """Run the block of the current task with `deadline` (time.monotonic()) on its pool waits.
    A class, not a `@contextmanager`: that costs ~8 calls per request (its helper, a
    generator resumed twice), this 3 of its own."""

    __slots__ = ("_deadline", "_token")

    def __init__(self, deadline: float) -> None:
        self._deadline = deadline

    def __enter__(self) -> None:
        task = asyncio.current_task()
        self._token = _DEADLINE.set((task, self._deadline) if task is not None else None)

    def __exit__(self, *exc_info: object) -> None:
        _DEADLINE.reset(self._token)


def pool_wait(default_s: float) -> float:
    """How long a checkout may wait now: what is left of the current request's deadline,
    else `default_s` (the pool's own timeout)."""
    held = _DEADLINE.get()
    if held is None:
        return default_s
    try:
        current = asyncio.current_task()
    except RuntimeError:  # no running loop (a thread): not a request
        return default_s
    if held[0] is not current:
        return default_s
    return max(MIN_WAIT_S, held[1] - time.monotonic())


class DeadlinePool(AsyncAdaptedQueuePool):
    """SQLAlchemy's asyncio queue pool whose checkout timeout is `pool_wait()`: SQLAlchemy
    runs the checkout in a greenlet of the calling task, with that task's context."""

    # Its log lines stay SQLAlchemy's (`sqlalchemy.pool…`, quiet unless asked), not agentd's.
    _sqla_logger_namespace = "sqlalchemy.pool.impl.AsyncAdaptedQueuePool"

    @property
    def _timeout(self) -> float:
        return pool_wait(self._base_timeout)

    @_timeout.setter
    def _timeout(self, value: float) -> None:
        self._base_timeout = value

    def recreate(self) -> DeadlinePool:
        token = _DEADLINE.set(None)  # the new pool takes the base timeout, not what is left
        try:
            return super().recreate()  # type: ignore[return-value]
        finally:
            _DEADLINE.reset(token)
