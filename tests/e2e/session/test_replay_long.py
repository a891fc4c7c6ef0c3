"""Replaying long sessions (R-E3): `session/load`, `_agentd/session/attach` from 0 and SSE
from 0 of a 50,000-event session each deliver every event exactly once, in order, then
(WebSocket) their response — with a live buffer of only 64 frames, so the replay is
provably not bounded by it. Clients that stop reading or leave mid-replay:
test_replay_stalled.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentd.core.events import Event, EventKind
from agentd.session.eventlog.hub import Subscriber
from agentd.transport.outgoing import OutgoingQueue
from agentd.transport.render import ACP_RENDERER
from tests.support.client import WsClient
from tests.support.frames import ATTACH, SNAPSHOT, agentd_meta, durable_seqs, response_index
from tests.support.replay import BUFFER, LOAD, seeded_session
from tests.support.server import scripted
from tests.support.sse import durable_ids, sse


def notifications_of(frames: list[Any], session_id: str) -> list[dict[str, Any]]:
    return [
        f
        for f in frames
        if isinstance(f, dict) and "method" in f and (f.get("params") or {}).get("sessionId") == session_id
    ]


async def request(client: WsClient, method: str, params: dict[str, Any], within: float) -> int:
    """A request whose answer may take longer than `WsClient.request` waits (a long
    replay on a busy machine); returns the index of the response in `client.frames`."""
    req_id = next(client.ids)
    answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    client._waiters[req_id] = answer
    await client.ws.send(json.dumps({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params}))
    resp = await asyncio.wait_for(answer, within)
    assert "error" not in resp, resp
    return response_index(client, req_id)


async def load_all(client: WsClient, session_id: str, within: float) -> int:
    return await request(client, LOAD, {"sessionId": session_id, "cwd": "/", "mcpServers": []}, within)


async def attach_all(client: WsClient, session_id: str, within: float) -> int:
    return await request(client, ATTACH, {"sessionId": session_id, "afterSeq": 0}, within)


async def sse_all(base_url: str, session_id: str, last: int) -> list[dict[str, Any]]:
    async with sse(base_url, session_id, params={"after": 0}) as stream:
        assert (await stream.next())["event"] == SNAPSHOT
        while not stream.frames or stream.frames[-1].get("id") != str(last):
            await stream.next(within=60)
        return stream.frames


async def check_three_replays(server: Any, session_id: str, n: int, within: float = 60) -> None:
    """Load, attach and SSE at once: each gets 1..n exactly once, in order; the WebSocket
    ones then their response (nothing of the replay after it)."""
    loader, attacher = await server.client(), await server.client()
    try:
        at_load, at_attach, sse_frames = await asyncio.gather(
            load_all(loader, session_id, within),
            attach_all(attacher, session_id, within),
            sse_all(server.base_url, session_id, n),
        )
        want = list(range(1, n + 1))
        assert durable_seqs(loader.frames[:at_load], session_id) == want
        assert len(notifications_of(loader.frames[:at_load], session_id)) >= n
        before = notifications_of(attacher.frames[:at_attach], session_id)
        assert before[0]["method"] == SNAPSHOT and before[0]["params"]["lastSeq"] == n
        assert durable_seqs(before, session_id) == want
        # Every frame once: no seq arrives twice in any stream (an event is one frame here).
        for frames in (loader.frames[:at_load], before):
            seqs = [
                agentd_meta(f)["seq"]
                for f in frames
                if "seq" in agentd_meta(f) and not agentd_meta(f).get("transient")
            ]
            assert seqs == want
        for client, at in ((loader, at_load), (attacher, at_attach)):
            late = [
                f
                for f in client.frames[at + 1 :]
                if "seq" in agentd_meta(f) and not agentd_meta(f).get("transient")
            ]
            assert late == [], "replayed frames after the response"
        assert [int(f["id"]) for f in sse_frames if "id" in f] == want
        assert durable_ids(sse_frames) == want
    finally:
        await loader.close()
        await attacher.close()


@pytest.mark.timeout(300)  # 150,000 frames through real sockets on a shared machine
async def test_a_50000_event_session_replays_whole_over_websocket_and_sse(
    server_factory: Any, workspace: Path, tmp_path: Path
) -> None:
    n = 50_000
    url = f"sqlite+aiosqlite:///{tmp_path / 'long.db'}"
    async with server_factory(
        scripted({"text": "ok"}), database_url=url, client_buffer_frames=BUFFER
    ) as server:
        sid = await seeded_session(server.app.state.agentd.store, workspace, n)
        await check_three_replays(server, sid, n, within=240)


async def test_replays_longer_than_the_live_buffer_on_both_databases(
    server_factory: Any, workspace: Path, db_url: str
) -> None:
    n = 3_000
    async with server_factory(
        scripted({"text": "ok"}), database_url=db_url, client_buffer_frames=BUFFER
    ) as server:
        sid = await seeded_session(server.app.state.agentd.store, workspace, n)
        await check_three_replays(server, sid, n)


async def test_replay_frames_keep_order_and_do_not_use_the_live_bound() -> None:
    queue = OutgoingQueue(maxsize=2, replay_window=3)
    queue.put_nowait("live 1")
    for i in range(3):
        await queue.put_replay(f"replay {i}")
    queue.put_nowait("live 2")  # replay frames leave the live bound alone
    with pytest.raises(asyncio.QueueFull):
        queue.put_nowait("live 3")
    blocked = asyncio.create_task(queue.put_replay("replay 3"))
    await asyncio.sleep(0)  # let it run up to its wait (no timing involved)
    assert not blocked.done(), "a full replay window must make the replay wait"
    assert queue.get_nowait() == "live 1"
    assert queue.get_nowait() == "replay 0"  # frees a slot of the window
    await asyncio.wait_for(blocked, 5)
    got = [queue.get_nowait() for _ in range(queue.qsize())]
    assert got == ["replay 1", "replay 2", "live 2", "replay 3"]


class ListSink:
    id = "sink-1"

    def __init__(self) -> None:
        self.frames: list[tuple[str, dict[str, Any]]] = []

    def send_notification(self, method: str, params: dict[str, Any]) -> bool:
        self.frames.append((method, params))
        return True


def test_text_after_discarded_chunks_waits_for_the_final_text() -> None:
    """Chunks a replay's overflowing buffer discarded leave a gap: what follows it is
    held back and the final event brings the whole text, so no client assembles text
    with a hole in it."""
    sink = ListSink()
    sub = Subscriber(sink, "s1", render=ACP_RENDERER)
    sub.partials = [(EventKind.AGENT_MESSAGE_CHUNK, "m1", "Hello")]
    sub.go_live(0)  # seeds "Hello"

    def chunk(text: str, offset: int) -> Event:
        return Event.stored(
            "s1", EventKind.AGENT_MESSAGE_CHUNK, {"messageId": "m1", "text": text, "offset": offset}
        )

    whole = "Hello world, this is it!"
    sub.deliver(chunk(" wor", 5))
    sub.deliver(chunk("this ", 13))  # "ld, " (offsets 9..12) never reached this client
    sub.deliver(chunk("is it!", 18))
    sub.deliver(Event.stored("s1", EventKind.AGENT_MESSAGE, {"messageId": "m1", "text": whole}, seq=1))
    updates = [p for m, p in sink.frames if m == "session/update"]
    assert [u["update"]["content"]["text"] for u in updates] == ["Hello", " wor", whole]
    assert updates[-1]["_meta"]["agentd"].get("final") is True
