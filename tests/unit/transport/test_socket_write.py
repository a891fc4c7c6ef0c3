"""Frames written straight to uvicorn's WebSocket protocol (agentd/transport/socket_write.py)
are the bytes uvicorn's own `websocket.send` writes, in order, in one socket write; the
connection's writer batches only what is already queued and keeps the queue's bound."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any, cast

import orjson
import pytest
from uvicorn.config import Config
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState
from websockets.protocol import State

from agentd.protocol.agentd import OptIn
from agentd.transport import socket_write
from agentd.transport.conn_parts import _CLOSE
from agentd.transport.connection import Connection
from agentd.transport.frame_writer import WRITER_SLICE
from agentd.transport.socket_write import RAW_SEND, SocketWriter, socket_for
from tests.support.polling import until

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(autouse=True, params=[True, False], ids=["fields", "library-calls"])
def read_fields(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Every test here runs with websockets' fields read directly and with its own calls."""
    monkeypatch.setattr(socket_write, "READ_FIELDS", request.param)
    return bool(request.param)


class Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return False


async def _noop_app(scope: Any, receive: Any, send: Any) -> None:
    return None


def uvicorn_protocol() -> WebSocketsSansIOProtocol:
    """uvicorn's protocol for one accepted WebSocket, its socket a list of writes."""
    config = Config(_noop_app, ws="websockets-sansio", ws_per_message_deflate=False)
    config.load()
    proto = WebSocketsSansIOProtocol(config, ServerState(), app_state={})
    proto.transport = cast(Any, Transport())
    proto.handshake_complete = True
    proto.conn.state = State.OPEN
    return proto


PAYLOADS = ["", "x", "a" * 125, "b" * 126, "é" * 63, "c" * 65535, "d" * 65536, '{"jsonrpc":"2.0"}']


async def test_the_bytes_are_those_uvicorns_own_send_writes() -> None:
    ours, theirs = uvicorn_protocol(), uvicorn_protocol()
    writer = socket_for({RAW_SEND: ours.send})
    assert isinstance(writer, SocketWriter)
    writer.write([text.encode() for text in PAYLOADS])  # (the queue holds UTF-8 bytes)
    for text in PAYLOADS:
        await theirs.send({"type": "websocket.send", "text": text})
    ours_out = cast(Transport, ours.transport).writes
    assert len(ours_out) == 1  # one socket write for the batch
    assert ours_out[0] == b"".join(cast(Transport, theirs.transport).writes)


async def test_what_websockets_queued_itself_goes_first_and_only_once(read_fields: bool) -> None:
    ours, theirs = uvicorn_protocol(), uvicorn_protocol()
    writer = socket_for({RAW_SEND: ours.send})
    assert writer is not None and writer._fields is read_fields
    for proto in (ours, theirs):
        proto.conn.send_ping(b"p")  # queued by websockets, not yet written
    writer.write([b"a"])
    writer.write([b"b"])
    await theirs.send({"type": "websocket.send", "text": "a"})  # flushes its ping first
    await theirs.send({"type": "websocket.send", "text": "b"})
    ours_out, theirs_out = cast(Transport, ours.transport).writes, cast(Transport, theirs.transport).writes
    assert b"".join(ours_out) == b"".join(theirs_out)  # the ping first, then "a", then "b"
    assert ours.conn.data_to_send() == []


async def test_a_closed_or_gone_client_gets_nothing() -> None:
    for close in ("close_sent", "disconnected"):
        proto = uvicorn_protocol()
        setattr(proto, close, True)
        writer = socket_for({RAW_SEND: proto.send})
        assert writer is not None
        with pytest.raises(ConnectionError):
            writer.write([b"x"])
        assert cast(Transport, proto.transport).writes == []
    proto = uvicorn_protocol()
    proto.conn.state = State.CLOSING
    with pytest.raises(ConnectionError):
        SocketWriter(proto).write([b"x"])


async def test_only_uvicorns_unwrapped_send_is_written_to_directly() -> None:
    proto = uvicorn_protocol()

    async def wrapped(message: Any) -> None:
        await proto.send(message)

    assert socket_for({}) is None
    assert socket_for({RAW_SEND: wrapped}) is None
    assert socket_for({RAW_SEND: Transport().write}) is None
    assert socket_for({RAW_SEND: proto.send}) is not None


class Socket:
    """A FrameSocket recording each write; `ready` cleared: paused, as uvicorn pauses writing."""

    def __init__(self) -> None:
        self.writes: list[list[str]] = []
        self.ready = asyncio.Event()
        self.ready.set()

    def write(self, frames: list[bytes], /) -> None:
        self.writes.append([json.loads(f)["method"] for f in frames])


def connection(socket: Socket, capacity: int = 100, merge: bool = True) -> Connection:
    settings = SimpleNamespace(client_buffer_frames=capacity, ws_merge_chunks=merge)
    state = SimpleNamespace(settings=settings)
    return Connection(cast(Any, None), cast(Any, state), cast(Any, None), "alice", socket=socket)


async def test_what_is_queued_goes_in_one_write_in_order_and_a_lone_frame_alone() -> None:
    socket = Socket()
    conn = connection(socket)
    for i in range(5):
        assert conn.send_notification(f"n/{i}", {})
    writer = asyncio.create_task(conn._writer())
    try:
        await until(lambda: socket.writes, what="the first write")
        assert socket.writes == [[f"n/{i}" for i in range(5)]]
        assert conn.send_notification("n/lone", {})  # the writer waits for nothing more
        await until(lambda: len(socket.writes) == 2, what="the lone frame")
        assert socket.writes[1] == ["n/lone"]
    finally:
        writer.cancel()


async def test_a_write_holds_at_most_a_slice_and_urgent_frames_go_first() -> None:
    socket = Socket()
    conn = connection(socket)
    for i in range(WRITER_SLICE + 3):
        assert conn.send_notification(f"n/{i}", {})
    conn.opt_in = OptIn(notifications=["*"])  # agentd's own notifications: an agentd client
    conn.send_urgent("_agentd/resync_required", {"sessionId": "s", "lastSeq": 0, "reason": "x"})
    writer = asyncio.create_task(conn._writer())
    try:
        await until(lambda: sum(map(len, socket.writes)) == WRITER_SLICE + 4, what="everything out")
        assert socket.writes[0][0] == "_agentd/resync_required"
        assert [len(w) for w in socket.writes] == [WRITER_SLICE, 4]
        assert [m for w in socket.writes for m in w][1:] == [f"n/{i}" for i in range(WRITER_SLICE + 3)]
    finally:
        writer.cancel()


async def test_a_paused_socket_holds_one_frame_and_the_queue_keeps_its_bound() -> None:
    socket = Socket()
    socket.ready.clear()
    conn = connection(socket, capacity=3)
    writer = asyncio.create_task(conn._writer())
    try:
        assert conn.send_notification("n/held", {})
        await until(lambda: conn._out.empty(), what="the writer holding the first frame")
        assert all(conn.send_notification("n/queued", {}) for _ in range(3))
        assert not conn.send_notification("n/over", {})  # full, as with one frame per send
        socket.ready.set()
        await until(lambda: socket.writes, what="the write once resumed")
        assert socket.writes == [["n/held", "n/queued", "n/queued", "n/queued"]]
    finally:
        writer.cancel()


async def test_the_queue_end_stops_the_writer_after_what_came_before() -> None:
    socket = Socket()
    conn = connection(socket)
    assert conn.send_notification("n/a", {})
    assert conn.send_notification("n/b", {})
    conn._out.put_nowait(_CLOSE)
    assert conn.send_notification("n/after", {})
    await asyncio.wait_for(conn._writer(), 10)
    assert socket.writes == [["n/a", "n/b"]]


class TextSocket(Socket):
    """A Socket keeping what a client reads: each write's frames, as sent."""

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[list[bytes]] = []

    def write(self, frames: list[bytes], /) -> None:
        self.frames.append(list(frames))


def chunk_frame(text: str) -> bytes:
    body = {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": text},
        "messageId": "m",
    }
    params = {"sessionId": "s", "update": body, "_meta": {"agentd": {"seq": 1, "transient": True}}}
    return orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params})


def texts(frames: list[bytes]) -> str:
    return "".join(orjson.loads(f)["params"]["update"]["content"]["text"] for f in frames)


@pytest.mark.parametrize("merge", [True, False])
async def test_a_backlog_of_chunks_goes_out_merged_unless_switched_off(merge: bool) -> None:
    socket = TextSocket()
    conn = connection(socket, merge=merge)
    sent = [f"<{i}>" for i in range(3 * WRITER_SLICE + 1)]
    assert all(conn.send_encoded(chunk_frame(t)) for t in sent)
    writer = asyncio.create_task(conn._writer())
    try:
        await until(lambda: conn._out.empty() and len(socket.frames) == 4, what="everything out")
        assert texts([f for w in socket.frames for f in w]) == "".join(sent)  # in order, nothing lost
        if merge:  # a write with more queued behind it: its chunks as one
            assert [len(w) for w in socket.frames] == [1, 1, 1, 1]
            assert socket.frames[0] == [chunk_frame("".join(sent[:WRITER_SLICE]))]
        else:
            assert [len(w) for w in socket.frames] == [WRITER_SLICE] * 3 + [1]
    finally:
        writer.cancel()


async def test_a_client_that_keeps_up_gets_every_chunk_as_sent() -> None:
    socket = TextSocket()
    conn = connection(socket)
    writer = asyncio.create_task(conn._writer())
    try:
        for round_ in range(3):  # a slice's worth at a time, each written before the next
            batch = [chunk_frame(f"<{round_}.{i}>") for i in range(WRITER_SLICE)]
            assert all(conn.send_encoded(f) for f in batch)
            await until(lambda n=round_: len(socket.frames) == n + 1, what="the write")
            assert socket.frames[round_] == batch
    finally:
        writer.cancel()


async def test_a_paused_socket_gets_its_held_frame_and_the_chunks_behind_it_merged() -> None:
    socket = TextSocket()
    socket.ready.clear()
    conn = connection(socket, capacity=3)
    writer = asyncio.create_task(conn._writer())
    try:
        assert conn.send_encoded(chunk_frame("a"))
        await until(lambda: conn._out.empty(), what="the writer holding the first frame")
        assert all(conn.send_encoded(chunk_frame(t)) for t in "bcd")
        assert not conn.send_encoded(chunk_frame("e"))  # the bound: one held, three queued
        socket.ready.set()
        await until(lambda: socket.frames, what="the write once resumed")
        assert socket.frames == [[chunk_frame("abcd")]]
    finally:
        writer.cancel()
