"""A publish's frames for a connection whose batched writer waits idle go out in the
publishing step, in one write (agentd/transport/connection.py `DIRECT_PUBLISH`: the hub
queues them with `send_held` and calls `flush_held` at the end of its publish); anything
else — a paused socket, an urgent frame, a closing socket — leaves them to the writer, which
is then woken. Same frames, same order, both ways."""

from __future__ import annotations

import asyncio

import pytest

from agentd.core import AgentTextChunk, cork
from agentd.core.events import Event, EventKind
from agentd.protocol import OptIn
from agentd.session.eventlog.hub import EventHub
from agentd.transport import connection as connection_module
from agentd.transport.connection import Connection
from agentd.transport.render import AcpRenderer
from tests.support.frame_socket import RecordingSocket, socket_connection, started_writer
from tests.support.polling import until

pytestmark = pytest.mark.timeout(30)

SID = "sess_1"


def texts(socket: RecordingSocket) -> list[str]:
    """Each frame's text, or its method when it has none."""
    return [
        msg["params"].get("update", {}).get("content", {}).get("text") or msg["method"]
        for msg in socket.frames()
    ]


def chunk(text: str, offset: int) -> Event:
    return Event(SID, AgentTextChunk("msg_1", text, offset))


def final(text: str, seq: int) -> Event:
    return Event.stored(SID, EventKind.AGENT_MESSAGE, {"messageId": "msg_1", "text": text}, seq=seq)


@pytest.fixture(params=[True, False], ids=["direct", "queued"])
def direct(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(connection_module, "DIRECT_PUBLISH", request.param)
    return bool(request.param)


def subscribed(conn: Connection) -> EventHub:
    hub = EventHub(render=AcpRenderer())
    hub.subscribe(conn, SID).go_live(0)
    return hub


async def test_a_publish_to_an_idle_writer_goes_in_one_write_in_the_publishing_step(direct: bool) -> None:
    socket = RecordingSocket()
    conn = socket_connection(socket)
    writer = await started_writer(conn)
    hub = subscribed(conn)
    try:
        hub.publish(chunk("Hello ", 0), chunk("world", 6))
        if direct:  # written before this task yields, all in one write, the writer not woken
            assert [len(frames) for frames, _ in socket.writes] == [2]
            assert socket.writes[0][1] is asyncio.current_task()
            assert conn._out.empty() and conn._idle
        hub.publish(chunk("!", 11))
        await until(lambda: len(texts(socket)) == 3, what="every frame")
        assert texts(socket) == ["Hello ", "world", "!"]
        assert all((task is writer) is not direct for _, task in socket.writes)
    finally:
        writer.cancel()


async def test_frames_queued_before_the_publish_go_first(direct: bool) -> None:
    socket = RecordingSocket()
    conn = socket_connection(socket)
    writer = await started_writer(conn)
    hub = subscribed(conn)
    try:
        assert conn.send_notification("session/update", {"sessionId": SID, "update": {}})  # wakes the writer
        hub.publish(chunk("after", 0))
        await until(lambda: len(texts(socket)) == 2, what="both frames")
        assert texts(socket) == ["session/update", "after"]
    finally:
        writer.cancel()


async def test_a_paused_socket_leaves_the_frames_to_the_writer(direct: bool) -> None:
    socket = RecordingSocket()
    conn = socket_connection(socket)
    writer = await started_writer(conn)
    hub = subscribed(conn)
    try:
        socket.ready.clear()
        hub.publish(chunk("held", 0), chunk(" on", 4))
        await until(lambda: not conn._idle, what="the writer woken, holding a frame")
        assert socket.writes == []
        socket.ready.set()
        await until(lambda: len(texts(socket)) == 2, what="both frames")
        assert texts(socket) == ["held", " on"]
        assert all(task is writer for _, task in socket.writes)
    finally:
        writer.cancel()


async def test_a_full_buffer_still_gets_its_resync_out(direct: bool) -> None:
    """The publish that overflows a client's queue tells it to resync: the urgent frame
    goes out ahead of the frames held before it (the flush wakes the writer for it), as
    it does when every frame wakes the writer."""
    socket = RecordingSocket()
    conn = socket_connection(socket, capacity=2)
    conn.opt_in = OptIn(notifications=["*"])
    writer = await started_writer(conn)
    hub = subscribed(conn)
    try:
        hub.publish(chunk("a", 0), chunk("b", 1), chunk("c", 2))
        await until(lambda: len(texts(socket)) == 3, what="the resync and the frames that fit")
        assert texts(socket) == ["_agentd/resync_required", "a", "b"]
        assert all(task is writer for _, task in socket.writes)
    finally:
        writer.cancel()


async def test_a_closing_socket_leaves_the_frames_to_the_writer(direct: bool) -> None:
    """A direct write refused (`ConnectionError`, nothing written): the writer is woken
    and meets the same end, as without the fast path."""
    socket = RecordingSocket()
    conn = socket_connection(socket)
    writer = await started_writer(conn)
    hub = subscribed(conn)
    socket.closed = True
    hub.publish(chunk("late", 0))
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(writer, 10)
    assert socket.writes == []


async def test_publishes_held_together_go_in_one_write(direct: bool) -> None:
    """A model read's deltas, each published on its own inside `cork.hold_writes()`/`release()`
    (agentd/core/cork.py, the sampling loop's): one write at the release, not one each."""
    socket = RecordingSocket()
    conn = socket_connection(socket)
    writer = await started_writer(conn)
    hub = subscribed(conn)
    try:
        cork.hold_writes()
        try:
            hub.publish(chunk("one ", 0))
            hub.publish(chunk("two", 4))
            assert socket.writes == []  # held (direct) or queued for the writer
        finally:
            cork.release_writes()
        if direct:
            assert [len(frames) for frames, _ in socket.writes] == [2]
        await until(lambda: len(texts(socket)) == 2, what="both frames")
        assert texts(socket) == ["one ", "two"]
        assert len(socket.writes) == 1  # the woken writer also takes both at once
    finally:
        writer.cancel()
