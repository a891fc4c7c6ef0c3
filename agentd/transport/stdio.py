"""`agentd acp`: ACP over stdin/stdout, the way editors launch their agents (Zed, JetBrains,
Neovim plugins): newline-delimited JSON-RPC 2.0, one message per line, both directions.

The same `Connection` that serves a WebSocket client serves the editor: `StdioChannel`
gives it the two calls it uses (`receive_text`, `send_text`). Nothing but protocol may reach
stdout, so the process's file descriptor 1 is pointed at stderr before anything runs and the
protocol writes to a private duplicate of the original stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from typing import Any, BinaryIO

from starlette.websockets import WebSocketDisconnect

from agentd.infra import LOCAL_PRINCIPAL
from agentd.transport.conn_parts import _CLOSE
from agentd.transport.connection import Connection
from agentd.transport.early import (
    EarlyStart,
    LoadFailed,
    accept_initialize,
    one_line,
    protocol_stdout,
    refuse_pending,
)

log = logging.getLogger(__name__)

# A line longer than this cannot be one message within the frame limit (JSON escapes at most
# sextuple a byte); past it the reader gives up on the line instead of buffering without end.
_LINE_SLACK = 6


class StdioChannel:
    """A JSON-RPC message channel over a reader and a binary writer, one message per line."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def receive_text(self) -> str:
        while True:
            try:
                line = await self._reader.readline()
            except ValueError:  # a line over the reader's limit: answered as an invalid frame
                return "\x00oversized"
            if not line:
                raise WebSocketDisconnect(code=1000)  # end of input: the editor went away
            text = line.decode("utf-8", errors="replace").strip()
            if text:
                return text

    async def send_text(self, text: str) -> None:
        # The Connection's single writer task calls this, so lines never interleave; a slow
        # reader on the other end backs up only that task (drain), never the event loop.
        self._writer.write(text.encode() + b"\n")  # serialised JSON holds no raw newline
        await self._writer.drain()


class StdioConnection(Connection):
    """End of input is how an editor (or a shell pipe) says it is done, not a crash: requests
    already read are answered and their answers written before the connection closes
    (bounded by the shutdown grace)."""

    async def _close(self, writer: asyncio.Task[None]) -> None:
        grace = self.state.settings.shutdown_grace_s
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=grace)
        if not writer.done():
            with contextlib.suppress(asyncio.QueueFull):
                self._out.put_nowait(_CLOSE)  # the writer stops after everything queued before it
                await asyncio.wait({writer}, timeout=grace)
        await super()._close(writer)


async def stdio_pipes(
    out: BinaryIO, limit: int, unread: bytes = b""
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Non-blocking streams on stdin and the protocol's stdout; `unread` (stdin already read
    by `answer_initialize`) comes first, fed before the pipe can deliver anything after it."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    if unread:
        reader.feed_data(unread)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, out)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


async def serve_stdio(
    running: contextlib.AbstractAsyncContextManager[Any], early: EarlyStart | None = None
) -> int:
    """Serve one editor on stdin/stdout until it closes stdin (or SIGTERM/SIGINT). `running`
    yields the app's state with its lifespan running (the composition root's `running_app`,
    which may also serve HTTP: the transport does not import the server runner). `early`:
    what `answer_initialize` read and answered while the server loaded, taken over here."""
    out = early.out if early is not None else protocol_stdout()
    async with contextlib.AsyncExitStack() as stack:
        try:
            state = await stack.enter_async_context(running)
        except Exception as exc:
            if early is None:
                raise
            refuse_pending(early, one_line(exc))  # what the editor sent meanwhile: answered why
            raise LoadFailed(one_line(exc)) from exc
        unread = early.unread if early is not None else b""
        reader, writer = await stdio_pipes(out, state.settings.max_frame_bytes * _LINE_SLACK, unread)
        channel = StdioChannel(reader, writer)
        conn = StdioConnection(channel, state, state.dispatcher, principal=LOCAL_PRINCIPAL)
        if early is not None and early.initialized is not None:
            accept_initialize(conn, early.initialized)
            state.rate_limiter.allow(conn._context().rate_key, 1.0)  # charged as the dispatcher would have
        serving = asyncio.create_task(conn.serve())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, serving.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await serving
    return 0


async def bridge_stdio(url: str, token: str | None) -> int:
    """`agentd acp --connect URL`: the editor's stdio relayed to a shared server."""
    from agentd.transport.bridge import Bridge

    out = protocol_stdout()
    reader, writer = await stdio_pipes(out, 64 * 1024 * 1024)
    bridge = Bridge(url, token, StdioChannel(reader, writer))
    running = asyncio.create_task(bridge.run())
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, running.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        return await running
    return 0
