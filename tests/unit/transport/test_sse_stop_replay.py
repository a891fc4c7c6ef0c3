"""An SSE response ends only once its cancelled replay has (agentd/transport/sse.py
`stop_replay`): a replay cut mid-read closes its store connection before the response —
and the server — end, even though the response itself is being cancelled (the client went
away; anyio then cancels it again at every await). Left behind, the replay outlived the
server and a second cancellation at the event loop's close hung it for ever in
aiosqlite's close (a test's teardown hung so)."""

from __future__ import annotations

import asyncio

import anyio

from agentd.transport.sse import stop_replay


def replay_with_slow_cleanup(steps: list[str]) -> asyncio.Task[None]:
    async def replay() -> None:
        try:
            await asyncio.Event().wait()  # a store read in flight
        except asyncio.CancelledError:
            steps.append("cancelled")
            for _ in range(3):  # closing its connection: several awaits
                await asyncio.sleep(0)
            steps.append("cleaned up")
            raise

    return asyncio.create_task(replay())


async def test_the_replay_has_ended_when_the_cancelled_response_stops_it() -> None:
    steps: list[str] = []
    replay = replay_with_slow_cleanup(steps)
    await asyncio.sleep(0)
    with anyio.CancelScope() as scope:
        scope.cancel()  # as Starlette's, once the client has gone
        await stop_replay(replay)
        ended_then = replay.done()
    assert ended_then and replay.cancelled()
    assert steps == ["cancelled", "cleaned up"]  # cancelled once: its cleanup ran to its end


async def test_a_replay_that_already_ended_is_left_as_it_is() -> None:
    async def replay() -> str:
        return "live"

    task = asyncio.create_task(replay())
    await task
    await stop_replay(task)
    assert task.result() == "live"
