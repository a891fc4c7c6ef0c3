"""A test's event loop ends within a deadline, or the test fails naming what held it.

pytest-asyncio closes each test's loop with `asyncio.Runner.close`, which cancels every task
left and then waits for all of them with no bound: one task that ignores its cancellation
hangs the test's teardown until the per-test timeout ends the whole xdist worker (and with
`--max-worker-restart=0` the run), leaving only thread stacks, where every task's
coroutine is invisible. Here that wait is bounded: the tasks still pending after
`AGENTD_TEST_LOOP_TEARDOWN_S` (default 20 s, well under the 120 s test timeout) are
reported with their coroutine stacks, and the test errors at teardown; the run goes on.
"""

from __future__ import annotations

import asyncio
import asyncio.runners
import io
import os
import traceback
from types import FrameType
from typing import Any

import pytest

DEADLINE_SETTING = "AGENTD_TEST_LOOP_TEARDOWN_S"
DEFAULT_DEADLINE_S = 20.0


class LoopTeardownHang(Exception):
    """Tasks ignored their cancellation at a test's end (not a RuntimeError: pytest-asyncio
    turns those raised by `Runner.close` into a warning)."""


def _deadline_s() -> float:
    return float(os.environ.get(DEADLINE_SETTING, DEFAULT_DEADLINE_S))


def _first(obj: Any, *names: str) -> Any:
    """A coroutine's, a generator's or an async generator's own spelling of one attribute."""
    return next((v for v in (getattr(obj, n, None) for n in names) if v is not None), None)


def await_chain(coro: Any) -> list[FrameType]:
    """The frames of `coro` and of the coroutines it awaits, outermost first:
    `Task.print_stack` shows only the outermost frame of a suspended task, and the await
    that holds it is further in."""
    frames: list[FrameType] = []
    while coro is not None:
        frame = _first(coro, "cr_frame", "gi_frame", "ag_frame")
        if frame is None:  # a future's iterator, or the end
            break
        frames.append(frame)
        coro = _first(coro, "cr_await", "gi_yieldfrom", "ag_await")
    return frames


def describe(tasks: set[asyncio.Task[Any]]) -> str:
    """Each task's name and the chain of awaits it is suspended in."""
    out = io.StringIO()
    for task in sorted(tasks, key=lambda t: t.get_name()):
        frames = await_chain(task.get_coro())
        waiting_on = getattr(task, "_fut_waiter", None)  # the future it is suspended on
        out.write(f"\n--- task {task.get_name()!r}, waiting on {waiting_on!r}:\n")
        out.writelines(traceback.StackSummary.extract((f, f.f_lineno) for f in frames).format())
    return out.getvalue()


def cancel_all_tasks_bounded(loop: asyncio.AbstractEventLoop) -> None:
    """`asyncio.runners._cancel_all_tasks` with its wait bounded (same reporting otherwise)."""
    to_cancel = asyncio.all_tasks(loop)
    if not to_cancel:
        return
    for task in to_cancel:
        task.cancel()
    deadline = _deadline_s()
    _, pending = loop.run_until_complete(asyncio.wait(to_cancel, timeout=deadline))
    if pending:
        raise LoopTeardownHang(
            f"{len(pending)} task(s) still running {deadline:g} s after the test's event loop "
            f"cancelled them (they ignore cancellation):{describe(pending)}"
        )
    for task in to_cancel:
        if task.cancelled():
            continue
        if task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "unhandled exception during asyncio.run() shutdown",
                    "exception": task.exception(),
                    "task": task,
                }
            )


def pytest_configure(config: pytest.Config) -> None:
    # `Runner.close` looks the function up in its module at each call.
    asyncio.runners._cancel_all_tasks = cancel_all_tasks_bounded  # type: ignore[attr-defined]
