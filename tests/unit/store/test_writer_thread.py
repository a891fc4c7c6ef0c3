"""The SQLite writer's thread (agentd/store/sqlite_writer.py `WriterThread`): calls run on
its own thread in the order given, results and exceptions reach the awaiting caller, a
cancelled caller does not stop the thread, and `shutdown` ends it."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agentd.store.sqlite_writer import WriterThread


async def test_calls_run_in_order_on_the_thread_and_return_their_results() -> None:
    thread = WriterThread("test-writer")
    seen: list[tuple[int, str]] = []

    def record(n: int) -> int:
        seen.append((n, threading.current_thread().name))
        return n * 10

    try:
        results = await asyncio.gather(*(thread.run(record, n) for n in range(20)))
        assert results == [n * 10 for n in range(20)]
        assert seen == [(n, "test-writer") for n in range(20)]
    finally:
        thread.shutdown()


async def test_an_exception_reaches_the_caller_and_the_thread_goes_on() -> None:
    thread = WriterThread("test-writer")

    def fail() -> None:
        raise ValueError("refused")

    try:
        with pytest.raises(ValueError, match="refused"):
            await thread.run(fail)
        assert await thread.run(lambda: "still serving") == "still serving"
    finally:
        thread.shutdown()


async def test_a_cancelled_caller_leaves_the_thread_serving_and_shutdown_ends_it() -> None:
    thread = WriterThread("test-writer")
    started, gate = threading.Event(), threading.Event()

    def hold() -> bool:
        started.set()
        return gate.wait(30)

    slow = asyncio.create_task(thread.run(hold))
    assert await asyncio.to_thread(started.wait, 10)  # running on the thread
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
    gate.set()  # the started call ends; its result finds nobody waiting
    assert await thread.run(lambda: 7) == 7
    thread.shutdown()
    await asyncio.to_thread(thread._thread.join, 10)
    assert not thread._thread.is_alive()
