"""The session actor's mailbox (R-S1): a FIFO of commands, and one future the actor awaits
until either a command arrives or its running turn's task completes (issue 27 item 3: the
actor awaits "its mailbox or the running turn, FIRST_COMPLETED").

Why not `asyncio.Queue` + `asyncio.wait`: while a turn runs, that took a task reading the
queue, a waiter future inside the queue, and `asyncio.wait`'s own future and callbacks —
per turn (issue 32). Here both sides complete the same plain future: a `put_nowait` wakes
the actor directly, and so does the done-callback the actor adds once to each turn's task.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from agentd.session.commands import SessionCommand


class Mailbox:
    """What the actor reads, in order. `wait` returns a future done as soon as a command is
    put (or `wake` is called, e.g. by a turn's task completing); the actor then looks again."""

    def __init__(self) -> None:
        # (the actor's loop reads this deque directly: no call per look)
        self.items: deque[SessionCommand] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, command: SessionCommand) -> None:
        self.items.append(command)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():  # (cancelled with the actor)
                waiter.set_result(None)

    def wake(self, _: Any = None) -> None:
        """Wake the actor if it waits (a done-callback: the argument is the completed task)."""
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def wait(self) -> asyncio.Future[None]:
        """A future done at the next `put_nowait` or `wake` (at once if a command waits)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.items:
            waiter.set_result(None)
        else:
            self._waiter = waiter
        return waiter

    @property
    def parked(self) -> bool:
        """The actor waits here with nothing to read: it is between steps, and its next step
        would only look at its state again (what the shortcuts of session_actor.py rely on)."""
        waiter = self._waiter
        return waiter is not None and not waiter.done()

    def forget_waiter(self) -> None:
        """The actor stops waiting (it is cancelled or it exits)."""
        self._waiter = None

    def empty(self) -> bool:
        return not self.items

    def qsize(self) -> int:
        return len(self.items)

    def get_nowait(self) -> SessionCommand:
        if not self.items:
            raise asyncio.QueueEmpty
        return self.items.popleft()
