"""What a Connection (agentd/transport/connection.py) writes to and reads from: the channel
and frame-socket protocols, its outgoing queue's markers, and the attribute that clears its
per-kind answers."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentd.transport.connection import Connection

_CLOSE = object()  # the end of the outgoing queue: the writer stops there
_WAKE = object()  # wakes an idle writer for an urgent frame


class Channel(Protocol):
    """What a transport gives a Connection: a starlette WebSocket, or an adapter with the same
    two calls (stdio lines, Streamable HTTP). `receive_text` raises `WebSocketDisconnect` at
    the end, and `KeyError` for a frame that is not text."""

    async def receive_text(self) -> str: ...

    async def send_text(self, data: str, /) -> None: ...


class FrameSocket(Protocol):
    """A socket that takes several frames in one write (agentd/transport/socket_write.py)."""

    ready: asyncio.Event  # set while it takes data; cleared while the server paused writing

    def write(self, frames: list[bytes], /) -> None: ...


class _ClearsAnswers:
    """A connection attribute whose every assignment clears its per-kind answers
    (`supports_update`). Setting goes through `__set__`; with no `__get__`, reading it finds
    the value in the instance's `__dict__`, so a read is no call."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __set__(self, conn: Connection, value: object) -> None:
        conn.__dict__[self.name] = value
        conn._supports.clear()


def _unmarked(frames: list[Any]) -> tuple[list[bytes], bool]:
    """`frames` without the queue's markers, up to its end (`_CLOSE`); whether it was reached."""
    for i, frame in enumerate(frames):
        if frame is _CLOSE:
            return [f for f in frames[:i] if f is not _WAKE], True
    return [f for f in frames if f is not _WAKE], False
