"""The actor's mailbox (issue 32): one future, completed by a command or by a turn's end,
replaces `asyncio.Queue.get` in a task plus `asyncio.wait` — same FIRST_COMPLETED meaning."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from agentd.session.actor.mailbox import Mailbox
from agentd.session.commands import SessionCommand


def command(name: str) -> SessionCommand:
    return cast(SessionCommand, name)  # the mailbox never looks inside a command


async def test_a_command_put_wakes_the_waiting_actor_and_order_is_kept() -> None:
    box = Mailbox()
    waiter = box.wait()
    assert not waiter.done()
    box.put_nowait(command("a"))
    box.put_nowait(command("b"))
    assert waiter.done()
    assert [box.get_nowait(), box.get_nowait()] == ["a", "b"]
    assert box.empty()
    with pytest.raises(asyncio.QueueEmpty):
        box.get_nowait()


async def test_waiting_with_a_command_already_there_returns_at_once() -> None:
    box = Mailbox()
    box.put_nowait(command("a"))
    assert box.wait().done()
    assert box.qsize() == 1


async def test_a_turns_task_completing_wakes_the_actor_without_a_command() -> None:
    box = Mailbox()
    release = asyncio.Event()

    async def turn() -> None:
        await release.wait()

    task = asyncio.create_task(turn())
    task.add_done_callback(box.wake)
    waiter = box.wait()
    release.set()
    await waiter  # completed by the task's end: hangs (the test times out) if it were not
    assert task.done()
    assert box.empty()


async def test_a_cancelled_wait_does_not_break_a_later_put() -> None:
    box = Mailbox()
    waiter = box.wait()
    waiter.cancel()
    box.put_nowait(command("a"))  # the cancelled waiter is skipped, not set
    assert box.get_nowait() == "a"
    box.forget_waiter()
    box.wake()  # nobody waits: nothing happens
    fresh: Any = box.wait()
    assert not fresh.done()
