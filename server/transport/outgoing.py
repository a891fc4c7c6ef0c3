"""A client's outgoing frames, in order, with two bounds.

Live frames are put without waiting and refused when `maxsize` of them are queued (the
subscriber then tells the client to resync). Replay frames (server/session/replay.py)
go through the same queue, so everything reaches the client in the order it was queued,
but they do not count against that bound: they have their own window, which
`put_replay` awaits, so a replay is paced by the client and never crowds out live frames.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any

REPLAY_WINDOW = 256  # replay frames queued ahead of the socket


class OutgoingQueue(asyncio.Queue[Any]):
    def __init__(self, maxsize: int, replay_window: int = REPLAY_WINDOW) -> None:
        super().__init__(maxsize)
        self._window = replay_window
        self._is_replay: collections.deque[bool] = collections.deque()  # parallel to the items
        self._replayed = 0
        self._adding_replay = False
        self._room = asyncio.Event()
        self._room.set()

    def full(self) -> bool:
        if self._adding_replay:
            return False
        return 0 < self.maxsize <= self.qsize() - self._replayed

    async def put_replay(self, item: Any) -> None:
        """Queue a replay frame once the replay window has room."""
        while self._replayed >= self._window:
            self._room.clear()
            await self._room.wait()
        self._adding_replay = True
        try:
            self.put_nowait(item)
        finally:
            self._adding_replay = False

    # asyncio.Queue's storage hooks: remember which items are replay frames.
    def _put(self, item: Any) -> None:
        super()._put(item)
        self._is_replay.append(self._adding_replay)
        if self._adding_replay:
            self._replayed += 1

    def _get(self) -> Any:
        item = super()._get()
        if self._is_replay.popleft():
            self._replayed -= 1
            self._room.set()
        return item
