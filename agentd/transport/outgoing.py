"""A client's outgoing frames, in order, with two bounds.

Live frames are put without waiting and refused when `maxsize` of them are queued (the
subscriber then tells the client to resync). Replay frames (agentd/session/eventlog/replayer.py)
go through the same queue, so everything reaches the client in the order it was queued,
but they do not count against that bound: they have their own window, which
`put_replay` awaits, so a replay is paced by the client and never crowds out live frames.

`merge_chunks` is what a writer does for a client that fell behind: consecutive transient
text chunks of one message, queued for it, go out as one chunk holding their text.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import re
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
        # What is queued, for the writer to look at without a call (never changed outside).
        self.queued = self._items
        # Where the replay frames are: their positions in the stream of items ever queued
        # (`_popped` + index). A parallel flag per item cost a `deque.append` per live frame;
        # replay frames are few and come in runs, so this deque is mostly empty.
        self._replay_at: collections.deque[int] = collections.deque()
        self.replays = self._replay_at  # (non-empty: replay frames are queued; read without a call)
        self._popped = 0  # items taken so far
        self._replayed = 0  # == len(self._replay_at)
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
        if self._getters:
            _wake_next(self._getters)

    def offer(self, item: Any) -> bool:
        """`put_nowait` answering False instead of raising (a full queue, or `close`d): a
        connection's `send_encoded` itself, one call per frame the hub sends."""
        if self.closed or 0 < self.maxsize <= len(self._items) - self._replayed:
            return False
        self._items.append(item)
        getters = self._getters
        if getters:  # (`_wake_next`, written out: the writer waits here between frames)
            getter = getters.popleft()
            if getter.done():
                _wake_next(getters)
            else:
                getter.set_result(None)
        return True

    def hold(self, item: Any) -> bool:
        """`offer` without waking the writer: the caller sends or wakes once it is done
        queueing (`Connection.flush_held`), so a publish's frames go in one write."""
        if self.closed or 0 < self.maxsize <= len(self._items) - self._replayed:
            return False
        self._items.append(item)
        return True

    def wake(self) -> None:
        """Wake the writer for what was `hold`-queued (if it waits)."""
        if self._getters:
            _wake_next(self._getters)

    def close(self) -> None:
        """`offer` refuses from now on (the connection is closed)."""
        self.closed = True

    async def put(self, item: Any) -> None:
        """Queue a frame once there is room (never dropped: a response)."""
        if self.offer(item):  # room, as nearly always: queued and the writer woken in one call
            return
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
        self._replay_at.append(self._popped + len(self._items))
        self._items.append(item)
        self._replayed += 1
        if self._getters:
            _wake_next(self._getters)

    def get_nowait(self) -> Any:
        if not self._items:
            raise asyncio.QueueEmpty
        item = self._items.popleft()
        at = self._replay_at
        if at and at[0] == self._popped:
            at.popleft()
            self._replayed -= 1
            self._room.set()
        self._popped += 1
        if self._putters:
            _wake_next(self._putters)
        return item

    def take(self, limit: int) -> list[Any]:
        """Up to `limit` items from the front, in order, in one call (the writer's next
        write): as `limit` calls of `get_nowait` would leave the queue and its waiters."""
        items = self._items
        if limit <= 0 or not items:
            return []
        at = self._replay_at
        n = len(items)
        if n <= limit:
            taken = list(items)
            items.clear()
            self._popped += n
            replayed = self._replayed
            if replayed:
                at.clear()
        else:
            taken = []
            for _ in range(limit):
                taken.append(items.popleft())
            end = self._popped = self._popped + limit
            replayed = 0
            while at and at[0] < end:
                at.popleft()
                replayed += 1
        if replayed:
            self._replayed -= replayed
            self._room.set()
        putters = self._putters
        if putters:  # (rare: a response awaiting room)
            for _ in range(len(taken)):
                if not putters:
                    break
                _wake_next(putters)
        return taken

    def waiter(self) -> asyncio.Future[None]:
        """A future done once something is queued, for the one writer to await when the
        queue is empty; then it `take`s what is ready (no coroutine of its own between: a
        call less a write). A cancelled one is skipped by the next wake-up."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        getter = loop.create_future()
        self._getters.append(getter)
        return getter

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


# A transient text chunk as agentd/transport/render.py's `live_frames` encodes it, split in
# three: everything before its text, the text (JSON-escaped), everything after. The whole
# frame must match, so anything else — a durable chunk (with its own seq), a `final` one
# (it replaces a partial copy), another field, an escape in an id — is never merged.
_CHUNK = re.compile(
    rb'(\{"jsonrpc":"2\.0","method":"session/update","params":\{"sessionId":"[^"\\]*",'
    rb'"update":\{"sessionUpdate":"agent_(?:message|thought)_chunk","content":\{"type":"text","text":")'
    rb'([^"\\]*(?:\\.[^"\\]*)*)'
    rb'("\}(?:,"messageId":"[^"\\]*")?\},"_meta":\{"agentd":\{"seq":\d+,"transient":true\}\}\}\})'
)
MERGED_TEXT_MAX = 16_384  # bytes of (escaped) text in one merged chunk: frames stay small
# Frames split (or found not to be chunks) lately: the hub encodes a frame once for all of a
# session's clients, so the writers of its other clients find it here by the same object.
# Bounded in count and in size (a longer frame is never merged: little to gain), so what
# it keeps after a burst is at most ~2 MB.
_SPLITS: dict[bytes, tuple[bytes, bytes, bytes] | None] = {}
_SPLITS_MAX = 1024
MERGE_FRAME_MAX = 2048  # bytes


def _split(frame: bytes) -> tuple[bytes, bytes, bytes] | None:
    if len(frame) > MERGE_FRAME_MAX:
        return None
    if frame in _SPLITS:
        return _SPLITS[frame]
    if len(_SPLITS) >= _SPLITS_MAX:
        _SPLITS.clear()
    match = _CHUNK.fullmatch(frame)
    split = _SPLITS[frame] = None if match is None else (match[1], match[2], match[3])
    return split


def merge_chunks(frames: list[Any]) -> list[Any]:
    """`frames` with each run of consecutive transient chunks that differ only by their
    text as one chunk: their texts concatenated, every other byte as it was. JSON escapes
    one character at a time, so the escaped texts joined are the joined text escaped: the
    client assembles the same message from fewer frames. A frame merged with nothing is
    the same object; the order is kept."""
    out: list[Any] = []
    head = tail = b""  # the run's frame around its text (b"": no run)
    texts: list[bytes] = []
    size = 0
    first: Any = None  # the run's first frame, kept as it is if nothing joins it
    for frame in frames:
        match = _split(frame) if type(frame) is bytes else None
        if match is not None:
            h, text, t = match
            if h == head and t == tail and size + len(text) <= MERGED_TEXT_MAX:
                texts.append(text)
                size += len(text)
                continue
        if texts:
            out.append(first if len(texts) == 1 else head + b"".join(texts) + tail)
        if match is None:
            out.append(frame)
            head = tail = b""
            texts = []
        else:
            head, text, tail = match
            texts, size, first = [text], len(text), frame
    if texts:
        out.append(first if len(texts) == 1 else head + b"".join(texts) + tail)
    return out
