"""`stop_runners` (agentd/core/task_notice.py): how background shells and sub-agents end with
their session — wait up to a grace for the runners that were told to stop, then cancel the
stragglers and wait until they ended; nothing a runner raises escapes."""

from __future__ import annotations

import asyncio

from agentd.core.task_notice import stop_runners

BOUND_S = 10.0  # a deadline for each test's wait, never reached when the feature works
STEPS = 20  # loop iterations a runner takes to end once told to (or to clean up once cancelled)


async def steps(n: int = STEPS) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_runners_that_end_within_the_grace_are_not_cancelled() -> None:
    stop = asyncio.Event()

    async def obedient(value: int) -> int:
        await stop.wait()
        await steps()  # winding down takes a while: the grace covers it
        return value

    runners = [asyncio.ensure_future(obedient(i)) for i in range(3)]
    asyncio.get_running_loop().call_soon(stop.set)  # told to stop once the close has begun
    await stop_runners(runners, grace_s=BOUND_S)
    assert [r.result() for r in runners] == [0, 1, 2]
    assert not any(r.cancelled() for r in runners)


async def test_stragglers_are_cancelled_after_the_grace_and_awaited() -> None:
    stop = asyncio.Event()
    cleaned: list[str] = []

    async def obedient() -> str:
        await stop.wait()
        return "done"

    async def straggler() -> None:
        try:
            await asyncio.Event().wait()  # ignores the stop
        finally:
            await steps()  # its clean-up takes a while after the cancel
            cleaned.append("straggler")

    good = asyncio.ensure_future(obedient())
    late = asyncio.ensure_future(straggler())
    stop.set()
    await stop_runners([good, late], grace_s=0.01)
    assert good.result() == "done"
    assert late.cancelled()
    assert cleaned == ["straggler"]  # stop_runners returned only after its clean-up ran


async def test_a_straggler_raising_on_cancel_does_not_escape() -> None:
    async def stubborn() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await steps()
            raise RuntimeError("failed while stopping") from None

    runner = asyncio.ensure_future(stubborn())
    await asyncio.sleep(0)  # it is waiting
    await stop_runners([runner], grace_s=0.01)
    assert runner.done()
    assert isinstance(runner.exception(), RuntimeError)


async def test_finished_runners_and_no_runners_return_at_once() -> None:
    async def fails() -> None:
        raise ValueError("already failed")

    finished = asyncio.ensure_future(fails())
    await asyncio.wait([finished])
    # A huge grace: returning at all shows nothing was waited on.
    await asyncio.wait_for(stop_runners([finished], grace_s=3600), BOUND_S)
    await asyncio.wait_for(stop_runners([], grace_s=3600), BOUND_S)
    assert isinstance(finished.exception(), ValueError)


async def test_a_set_that_shrinks_as_runners_end_can_be_passed() -> None:
    """Sub-agents pass their live set, from which a done callback removes each runner."""
    stop = asyncio.Event()

    async def obedient() -> None:
        await stop.wait()

    live: set[asyncio.Task[None]] = set()
    for _ in range(3):
        task = asyncio.create_task(obedient())
        live.add(task)
        task.add_done_callback(live.discard)
    asyncio.get_running_loop().call_soon(stop.set)
    await asyncio.wait_for(stop_runners(live, grace_s=BOUND_S), BOUND_S * 2)
    assert not live
