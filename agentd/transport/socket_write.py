"""A WebSocket client's frames written straight to uvicorn's socket, several in one write.

Through ASGI every frame is one `websocket.send`: Starlette's state checks, its exception
wrapper, uvicorn's `send` (a flow-control wait, websockets' `Frame` and its `serialize`) and
one socket write, ~45 µs of Python per frame on a loaded host (issue 32 item 1). The
connection's writer (agentd/transport/connection.py) often holds several frames at once — a
turn's updates land together — so under uvicorn's `websockets-sansio` protocol it writes
what is ready in one `transport.write`. The bytes are the same: without a negotiated
extension the header is framed here as websockets frames it (server side: FIN, text, no
mask); with one (permessage-deflate) websockets still frames and compresses each message.

uvicorn hands the application its own `send`, a bound method of the connection's protocol;
`KeepRawSend` (the innermost middleware) keeps it in the scope before Starlette wraps it.
Any other server, or a `send` someone wrapped, keeps the ASGI path (`socket_for` → None).
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send
from websockets.protocol import Protocol, Side, State

RAW_SEND = "agentd.raw_send"  # the scope key holding the server's own `send`
_UVICORN_SANSIO = "uvicorn.protocols.websockets.websockets_sansio_impl"
_TEXT_FIN = 0x81  # FIN + opcode 1 (text); a server's frames are never masked (RFC 6455 5.1)
_SHORT = [bytes((_TEXT_FIN, n)) for n in range(126)]  # the header of every frame under 126 bytes
_MID = struct.Struct("!BBH")  # the header of a frame of 126 to 65535 bytes
# Read websockets' own fields (`_state`, `writes`) instead of calling its `state` property
# and `data_to_send()`: two Python calls per write fewer. Off: the library's calls (tests
# run both; a websockets without these fields gets the calls anyway).
READ_FIELDS = True


class KeepRawSend:
    """ASGI middleware: a WebSocket scope keeps the server's own `send` under `RAW_SEND`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            scope[RAW_SEND] = send
        await self.app(scope, receive, send)


def text_frame_header(length: int) -> bytes:
    """The header websockets writes ahead of an unmasked, unfragmented text payload."""
    if length < 126:
        return _SHORT[length]
    if length < 65536:
        return _MID.pack(_TEXT_FIN, 126, length)
    return struct.pack("!BBQ", _TEXT_FIN, 127, length)


class SocketWriter:
    """Writes frames to one uvicorn WebSocket connection, as its `websocket.send` would:
    after its flow-control wait, refused once the client left or a close was sent."""

    __slots__ = ("_conn", "_fields", "_plain", "_proto", "ready")

    def __init__(self, proto: Any) -> None:
        self._proto = proto
        # uvicorn's flow control: set while the socket takes data, cleared while it paused
        # writing (the writer then holds one frame and waits on it, as `send` would).
        self.ready: asyncio.Event = proto.writable
        self._conn: Protocol = proto.conn
        # Fixed at the handshake: no extension and not debugging, the frame is framed here.
        self._plain = not self._conn.extensions and self._conn.side is Side.SERVER and not self._conn.debug
        conn = self._conn
        self._fields = READ_FIELDS and type(getattr(conn, "writes", None)) is list and hasattr(conn, "_state")

    def write(self, frames: list[bytes]) -> None:
        """All of `frames`, in order, in one socket write. Raises `ConnectionError` once the
        client is gone or the connection is closing (nothing written)."""
        proto = self._proto
        conn = self._conn
        fields = self._fields  # (the property and `data_to_send`, read as they read them)
        state = conn._state if fields else conn.state
        if (
            proto.disconnected
            or proto.close_sent
            or state is not State.OPEN
            or conn.expect_continuation_frame
        ):
            raise ConnectionResetError("the WebSocket is closed")
        # Whatever websockets queued itself goes first (normally nothing).
        if not fields:
            out = conn.data_to_send()
        elif conn.writes:
            out, conn.writes = conn.writes, []
        else:
            out = []
        if self._plain:
            short, pack_mid = _SHORT, _MID.pack
            for data in frames:  # (UTF-8 already: the queue holds bytes)
                n = len(data)
                if n < 126:
                    out.append(short[n])
                elif n < 65536:  # (`text_frame_header`, written out: most frames are this long)
                    out.append(pack_mid(_TEXT_FIN, 126, n))
                else:
                    out.append(text_frame_header(n))
                out.append(data)
        else:
            for frame in frames:
                conn.send_text(frame)
            out += conn.data_to_send()
        proto.transport.write(b"".join(out))


def socket_for(scope: Scope) -> SocketWriter | None:
    """A writer straight to the socket when uvicorn's sansio protocol serves this WebSocket
    and its `send` reached us unwrapped; None otherwise (the ASGI path)."""
    proto = getattr(scope.get(RAW_SEND), "__self__", None)
    if proto is None or type(proto).__module__ != _UVICORN_SANSIO:
        return None
    if not isinstance(getattr(proto, "conn", None), Protocol) or not hasattr(proto, "transport"):
        return None
    if not isinstance(getattr(proto, "writable", None), asyncio.Event):
        return None
    return SocketWriter(proto)
