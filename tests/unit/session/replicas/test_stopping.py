"""The replica services' shared stop (agentd/session/replicas/stopping.py): every task is
cancelled before any is awaited, none outlives the call, and a task already finished or
already cancelled is no error."""

from __future__ import annotations

import asyncio

from agentd.session.replicas.stopping import cancel_and_wait


async def test_every_task_is_cancelled_and_awaited() -> None:
    cancelled_first: list[str] = []
    saw_other_cancelled: list[bool] = []
    tasks: list[asyncio.Task[None]] = []
    started = {"a": asyncio.Event(), "b": asyncio.Event()}

    async def forever(name: str) -> None:
        started[name].set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled_first.append(name)
            # The other task was asked to stop before this one is awaited.
            saw_other_cancelled.append(all(t.cancelling() for t in tasks))
            raise

    tasks.extend(asyncio.create_task(forever(n)) for n in ("a", "b"))
    for event in started.values():
        await event.wait()
    await cancel_and_wait(tasks)
    assert all(t.cancelled() for t in tasks)
    assert sorted(cancelled_first) == ["a", "b"]
    assert saw_other_cancelled == [True, True]


async def test_finished_and_cancelled_tasks_are_no_error() -> None:
    async def nothing() -> None:
        return None

    done = asyncio.create_task(nothing())
    await done
    never_started = asyncio.create_task(nothing())
    never_started.cancel()
    await cancel_and_wait([done, never_started])
    assert done.done() and never_started.cancelled()
    await cancel_and_wait([])
