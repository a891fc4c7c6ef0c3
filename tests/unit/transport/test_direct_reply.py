"""A request's reply written in its handler's step (agentd/transport/incoming.py
`DIRECT_REPLY`) only when the batched writer waits holding nothing and nothing is queued:
otherwise it goes through the queue, behind what is there. Same frames, same order, both ways."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentd.transport import incoming
from agentd.transport.connection import Connection
from agentd.transport.rpc import CallContext, Dispatcher, Method
from tests.support.frame_socket import RecordingSocket, socket_connection, started_writer
from tests.support.polling import until

pytestmark = pytest.mark.timeout(30)


async def echo(ctx: CallContext, params: Any) -> dict[str, Any]:
    return {"echo": params}


async def notify_first(ctx: CallContext, params: Any) -> dict[str, Any]:
    """Queues a notification in the handler's own step, just before its reply."""
    assert ctx.connection is not None
    assert ctx.connection.send_notification("n/before", {})
    return {}


def connection(socket: RecordingSocket) -> Connection:
    dispatcher = Dispatcher({"echo": Method(None, echo), "first": Method(None, notify_first)})
    return socket_connection(socket, merge=True, dispatcher=dispatcher)


def request(rid: int, method: str = "echo") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {"n": rid}}


@pytest.fixture(params=[True, False], ids=["direct", "queued"])
def direct(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(incoming, "DIRECT_REPLY", request.param)
    return bool(request.param)


async def test_an_idle_writers_reply_goes_in_the_handlers_step(direct: bool) -> None:
    socket = RecordingSocket()
    conn = connection(socket)
    writer = await started_writer(conn)
    try:
        handler = asyncio.create_task(conn._handle_one(request(1), 1))
        await handler
        await until(lambda: len(socket.writes) == 1, what="the reply written")
        assert socket.frames() == [{"jsonrpc": "2.0", "id": 1, "result": {"echo": {"n": 1}}}]
        assert (socket.writes[0][1] is handler) is direct  # written by the handler, or the writer
        assert conn._out.empty()
    finally:
        writer.cancel()


async def test_a_reply_goes_behind_what_is_queued(direct: bool) -> None:
    socket = RecordingSocket()
    conn = connection(socket)
    writer = await started_writer(conn)
    try:
        await conn._handle_one(request(2, "first"), 2)
        await until(lambda: len(socket.frames()) == 2, what="both frames")
        assert [f.get("method", f.get("id")) for f in socket.frames()] == ["n/before", 2]
    finally:
        writer.cancel()


async def test_a_paused_socket_holds_the_reply_behind_the_held_frame(direct: bool) -> None:
    socket = RecordingSocket()
    conn = connection(socket)
    writer = await started_writer(conn)
    try:
        socket.ready.clear()
        assert conn.send_notification("n/held", {})
        await until(lambda: conn._out.empty() and not conn._idle, what="the writer holding the frame")
        socket.ready.set()  # the writer has not run since: it still holds its frame
        await conn._handle_one(request(3), 3)  # (returns without a suspension: in this step)
        assert socket.writes == [] or not direct  # nothing overtook the held frame
        await until(lambda: len(socket.frames()) == 2, what="both frames")
        assert [f.get("method", f.get("id")) for f in socket.frames()] == ["n/held", 3]
    finally:
        writer.cancel()


async def test_a_closed_socket_leaves_the_reply_to_the_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A direct write refused (`ConnectionError`) queues the reply: the writer meets the
    same end, as without the fast path."""
    monkeypatch.setattr(incoming, "DIRECT_REPLY", True)
    socket = RecordingSocket()
    conn = connection(socket)
    writer = await started_writer(conn)

    socket.closed = True
    await conn._handle_one(request(4), 4)
    assert conn._out.qsize() == 1 or writer.done()  # queued, for the writer
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(writer, 10)
