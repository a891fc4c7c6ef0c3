"""A Connection's writer task (agentd/transport/connection.py): the one task draining its
bounded outgoing queue to the client — frame by frame through the library (`send_text`), or
what is ready in one write to a socket that takes several (`FrameSocket`) — and the flush
that sends a publish's frames in the publishing step when that writer waits idle
(`DIRECT_PUBLISH`). A mixin of `Connection`: its methods are the connection's own (no call
layer more per frame)."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from agentd.core import defer_flush
from agentd.transport.conn_parts import _CLOSE, _WAKE, Channel, FrameSocket, _unmarked
from agentd.transport.outgoing import OutgoingQueue, merge_chunks

if TYPE_CHECKING:
    from agentd.transport.state import AppState

# Frames a writer sends in a row before letting the other writers run: a session's burst
# then reaches its N clients within ~N × 16 sends of each other, not one whole burst apart.
WRITER_SLICE = 16


class FrameWriter:
    """The writing half of a Connection: what it reads of the connection is declared here."""

    if TYPE_CHECKING:
        ws: Channel
        socket: FrameSocket | None
        state: AppState
        _out: OutgoingQueue
        _urgent: collections.deque[bytes]
        _idle: bool

    def _writer(self) -> Coroutine[Any, Any, None]:
        """The writer task's coroutine itself (not one awaiting it: every resumption of a
        coroutine in between is one more Python call per write)."""
        return self._send_each() if self.socket is None else self._write_batched(self.socket)

    async def _send_each(self) -> None:
        """The library path: one `send_text` per frame."""
        burst = 0  # frames sent since this task last let others run
        while True:
            if self._urgent:
                frame = self._urgent.popleft()
            elif self._out.empty():
                burst = 0  # the get below waits: the other writers run meanwhile
                frame = await self._out.get()
            else:
                frame = self._out.get_nowait()
            if frame is _CLOSE:
                return
            if frame is _WAKE:
                continue
            # (decoded here: the queue holds the bytes a socket takes, `_write_batched`)
            await self.ws.send_text(frame.decode())  # returns without waiting while the socket takes it
            burst += 1
            if burst >= WRITER_SLICE:
                # Let the other clients' writers send theirs: a session's burst of frames
                # then reaches all its clients together instead of one client after another.
                burst = 0
                await asyncio.sleep(0)

    async def _write_batched(self, socket: FrameSocket) -> None:
        """What is ready goes in one write, in order, up to `WRITER_SLICE` frames (never
        waiting for more: a lone frame leaves alone). For a client that fell behind (frames
        still queued after this write's, or its socket paused) consecutive text chunks
        go as one (`merge_chunks`, unless `ws_merge_chunks` is off)."""
        out = self._out
        queued, urgent, ready = out.queued, self._urgent, socket.ready
        take, write = out.take, socket.write
        merge = self.state.settings.ws_merge_chunks
        burst = 0  # frames sent since this task last let others run
        while True:
            if not queued and not urgent:
                burst = 0  # waiting: the other writers run meanwhile
                self._idle = True
                await out.waiter()
                self._idle = False
            behind = False
            if not ready.is_set():
                # Paused: one frame held here, as `send_text` would hold it — the queue's
                # bound still counts everything else. Then what is ready goes with it.
                held = urgent.popleft() if urgent else out.get_nowait()
                if held is _CLOSE:
                    return
                await ready.wait()
                frames, closing = self._ready([] if held is _WAKE else [held])
                behind = True
            elif urgent:
                frames, closing = self._ready([])
            else:
                frames, closing = take(WRITER_SLICE), False
                if _CLOSE in frames or _WAKE in frames:  # (rare: a test's end, an urgent wake-up)
                    frames, closing = _unmarked(frames)
            burst += len(frames)
            if merge and (behind or queued) and len(frames) > 1:
                frames = merge_chunks(frames)
            if frames:
                write(frames)
            if closing:
                return
            if burst >= WRITER_SLICE:
                # Let the other clients' writers send theirs: a session's burst of frames
                # then reaches all its clients together instead of one client after another.
                burst = 0
                await asyncio.sleep(0)

    def _flush_held(self) -> None:
        """After a publish queued its frames with `send_held`: with the writer waiting idle
        (nothing held, nothing urgent), the socket taking data and no replay or end marker
        queued, they go out now in one write — what the writer would do on waking, without
        waking it; else the writer is woken for them, as `offer` would have."""
        out = self._out
        queued = out.queued
        if not queued or defer_flush(self._flush_held):
            return
        if self._idle and not self._urgent and len(queued) <= WRITER_SLICE and not out.replays:
            socket = self.socket
            assert socket is not None  # (only a connection with a socket holds: `send_held`)
            if socket.ready.is_set() and _WAKE not in queued and _CLOSE not in queued:
                frames = list(queued)
                try:
                    socket.write(frames)
                except ConnectionError:
                    pass  # closing (nothing written): the writer meets the same end
                else:
                    out.take(len(frames))
                    return
        out.wake()

    def _ready(self, frames: list[bytes]) -> tuple[list[bytes], bool]:
        """`frames` and those queued behind it, urgent first, up to `WRITER_SLICE`; and
        whether the queue's end (`_CLOSE`) was reached."""
        urgent = self._urgent
        while urgent and len(frames) < WRITER_SLICE:
            frames.append(urgent.popleft())
        more, closing = _unmarked(self._out.take(WRITER_SLICE - len(frames)))
        frames += more
        return frames, closing


__all__ = ["WRITER_SLICE", "FrameWriter"]
