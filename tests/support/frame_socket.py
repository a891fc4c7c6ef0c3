"""A recording `FrameSocket` and a `Connection` over it, the writer started: the direct-write
fast paths' tests (tests/unit/transport/test_direct_reply.py, test_direct_publish.py) drive
a real connection's queue and writer against it, with no server and no WebSocket."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import orjson

from agentd.infra.config import AuthMode
from agentd.transport.connection import Connection
from agentd.transport.rpc import Dispatcher
from tests.support.polling import until


class RecordingSocket:
    """A `FrameSocket`: each write's frames, and the task that wrote them. `ready` cleared:
    paused, as uvicorn pauses writing; `closed`: every write refused, as a closing socket's."""

    def __init__(self) -> None:
        self.ready = asyncio.Event()
        self.ready.set()
        self.writes: list[tuple[list[bytes | str], asyncio.Task[Any] | None]] = []
        self.closed = False

    def write(self, frames: list[bytes | str], /) -> None:
        if self.closed:
            raise ConnectionResetError("the WebSocket is closed")
        self.writes.append((list(frames), asyncio.current_task()))

    def frames(self) -> list[Any]:
        """Every frame written, decoded, in order."""
        return [orjson.loads(f) for frames, _ in self.writes for f in frames]


def socket_connection(
    socket: RecordingSocket, *, capacity: int = 10, merge: bool = False, dispatcher: Dispatcher | None = None
) -> Connection:
    """An initialised connection of user "alice" writing to `socket`: no auth, no rate limit."""
    settings = SimpleNamespace(
        client_buffer_frames=capacity,
        ws_merge_chunks=merge,
        max_json_depth=64,
        max_prompt_blocks=0,
        request_deadline_s=30.0,
        rate_limit_per_s=0,
    )
    limiter = SimpleNamespace(allow=lambda key, cost=1.0: None)
    state = SimpleNamespace(settings=settings, rate_limiter=limiter, auth=SimpleNamespace(mode=AuthMode.NONE))
    conn = Connection(cast(Any, None), cast(Any, state), dispatcher or Dispatcher({}), "alice", socket=socket)
    conn.initialized = True
    return conn


async def started_writer(conn: Connection) -> asyncio.Task[None]:
    """The connection's batched writer, running and waiting idle for frames."""
    writer = asyncio.create_task(conn._writer())
    await until(lambda: conn._idle, what="the writer waiting")
    return writer


__all__ = ["RecordingSocket", "socket_connection", "started_writer"]
