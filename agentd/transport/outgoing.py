"""A client's outgoing frames, in order, with two bounds.

Live frames are put without waiting and refused when `maxsize` of them are queued (the
subscriber then tells the client to resync). Replay frames (agentd/session/eventlog/replayer.py)
go through the same queue, so everything reaches the client in the order it was queued,
but they do not count against that bound: they have their own window, which
`put_replay` awaits, so a replay is paced by the client and never crowds out live frames.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import Any

REPLAY_WINDOW = 256  # replay frames queued ahead of the socket


class OutgoingQueue:
    """`asyncio.Queue`'s calls (`put_nowait` raising `asyncio.QueueFull`, `put` awaiting
    room, `get`, `get_nowait`, `empty`, `full`, `qsize`) on two deques and waiter futures:
    every frame goes through it, and `asyncio.Queue`'s hooks, counters and events (no one
    joins this queue) were a dozen Python calls per frame (issue 14)."""

    def __init__(self, maxsize: int, replay_window: int = REPLAY_WINDOW) -> None:
        self.maxsize = maxsize
        self._window = replay_window
        self._items: collections.deque[Any] = collections.deque()
        self._is_replay: collections.deque[bool] = collections.deque()  # parallel to the items
        self._replayed = 0
        self._getters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._putters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._room = asyncio.Event()
        self._room.set()
        # The loop, once known: 3.11's get_running_loop() is a getpid() system call, and
        # the writer waits here for every frame of a model streaming chunk by chunk.
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closed = False  # see `close`

    def qsize(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    def full(self) -> bool:
        """As many live frames queued as `maxsize` (replay frames do not count)."""
        return 0 < self.maxsize <= len(self._items) - self._replayed

    def put_nowait(self, item: Any) -> None:
        if 0 < self.maxsize <= len(self._items) - self._replayed:
            raise asyncio.QueueFull
        self._items.append(item)
        self._is_replay.append(False)
        if self._getters:
            _wake_next(self._getters)

    def offer(self, item: Any) -> bool:
        """`put_nowait` answering False instead of raising (a full queue, or `close`d): a
        connection's `send_encoded` itself, one call per frame the hub sends."""
        if self.closed or 0 < self.maxsize <= len(self._items) - self._replayed:
            return False
        self._items.append(item)
        self._is_replay.append(False)
        getters = self._getters
        if getters:  # (`_wake_next`, written out: the writer waits here between frames)
            getter = getters.popleft()
            if getter.done():
                _wake_next(getters)
            else:
                getter.set_result(None)
        return True

    def close(self) -> None:
        """`offer` refuses from now on (the connection is closed)."""
        self.closed = True

    async def put(self, item: Any) -> None:
        """Queue a frame once there is room (never dropped)."""
        while self.full():
            putter = asyncio.get_running_loop().create_future()
            self._putters.append(putter)
            try:
                await putter
            except BaseException:
                putter.cancel()  # (not done yet: the wait itself was cancelled)
                with contextlib.suppress(ValueError):
                    self._putters.remove(putter)
                if not self.full() and not putter.cancelled():
                    _wake_next(self._putters)  # the room it was given goes to the next
                raise
        self.put_nowait(item)

    async def put_replay(self, item: Any) -> None:
        """Queue a replay frame once the replay window has room."""
        while self._replayed >= self._window:
            self._room.clear()
            await self._room.wait()
        self._items.append(item)
        self._is_replay.append(True)
        self._replayed += 1
        if self._getters:
            _wake_next(self._getters)

    def get_nowait(self) -> Any:
        if not self._items:
            raise asyncio.QueueEmpty
        item = self._items.popleft()
        if self._is_replay.popleft():
            self._replayed -= 1
            self._room.set()
        if self._putters:
            _wake_next(self._putters)
        return item

    def take(self, limit: int) -> list[Any]:
        """Up to `limit` items from the front, in order, in one call (the writer's next
        write): as `limit` calls of `get_nowait` would leave the queue and its waiters."""
        items = self._items
        if limit <= 0 or not items:
            return []
        flags = self._is_replay
        if len(items) <= limit:
            taken = list(items)
            items.clear()
            replayed = self._replayed
            flags.clear()
        else:
            taken = []
            replayed = 0
            for _ in range(limit):
                taken.append(items.popleft())
                replayed += flags.popleft()
        if replayed:
            self._replayed -= replayed
            self._room.set()
        putters = self._putters
        for _ in range(len(taken)):
            if not putters:
                break
            _wake_next(putters)
        return taken

    async def get(self) -> Any:
        while not self._items:
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.get_running_loop()
            getter = loop.create_future()
            self._getters.append(getter)
            try:
                await getter
            except BaseException:
                getter.cancel()
                with contextlib.suppress(ValueError):
                    self._getters.remove(getter)
                if self._items and not getter.cancelled():
                    _wake_next(self._getters)
                raise
        return self.get_nowait()


def _wake_next(waiters: collections.deque[asyncio.Future[None]]) -> None:
    while waiters:
        waiter = waiters.popleft()
        if not waiter.done():
            waiter.set_result(None)
            return
