"""An urgent frame (`_agentd/resync_required`) leaves a connection at once, whether the
client is idle or its buffer is full (issue 26 item 2: a resync to an idle client — its
session's lease lost — waited in the connection for other traffic that never came)."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any, cast

import pytest

from agentd.protocol.agentd import OptIn
from agentd.transport.connection import Connection
from tests.support.polling import until

pytestmark = pytest.mark.timeout(30)


class Channel:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.gate = asyncio.Event()  # cleared: the socket takes nothing (a slow client)
        self.gate.set()

    async def receive_text(self) -> str:
        await asyncio.Event().wait()
        return ""

    async def send_text(self, data: str, /) -> None:
        await self.gate.wait()
        self.sent.append(json.loads(data))


def connection(channel: Channel, capacity: int = 10) -> Connection:
    state = SimpleNamespace(settings=SimpleNamespace(client_buffer_frames=capacity))
    conn = Connection(channel, cast(Any, state), cast(Any, None), "alice")
    conn.opt_in = OptIn(notifications=["*"])  # agentd's own notifications: an agentd client
    return conn


async def test_an_urgent_frame_reaches_an_idle_client_at_once() -> None:
    channel = Channel()
    conn = connection(channel)
    writer = asyncio.create_task(conn._writer())
    try:
        assert conn.send_notification("n/first", {"i": 1})
        await until(lambda: len(channel.sent) == 1, what="the first frame")
        conn.send_urgent("_agentd/resync_required", {"sessionId": "s", "lastSeq": 1, "reason": "lease_lost"})
        await until(
            lambda: len(channel.sent) == 2, within=5, what="the urgent frame with nothing else queued"
        )
        assert channel.sent[1]["method"] == "_agentd/resync_required"
        assert conn.send_notification("n/after", {"i": 2})  # the writer goes on as before
        await until(lambda: [m["method"] for m in channel.sent][-1] == "n/after", what="later frames")
    finally:
        writer.cancel()


async def test_an_urgent_frame_goes_ahead_of_a_full_buffer() -> None:
    channel = Channel()
    conn = connection(channel, capacity=3)
    writer = asyncio.create_task(conn._writer())
    try:
        channel.gate.clear()
        assert conn.send_notification("n/stuck", {})
        await until(lambda: conn._out.empty(), what="the writer holding the first frame")
        for i in range(3):
            assert conn.send_notification("n/queued", {"i": i})
        assert not conn.send_notification("n/over", {})  # full
        conn.send_urgent(
            "_agentd/resync_required", {"sessionId": "s", "lastSeq": 0, "reason": "client_too_slow"}
        )
        channel.gate.set()
        await until(lambda: len(channel.sent) == 5, what="everything out")
        assert [m["method"] for m in channel.sent][:2] == ["n/stuck", "_agentd/resync_required"]
    finally:
        writer.cancel()
