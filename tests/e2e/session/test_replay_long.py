"""Replaying long sessions (R-E3): `session/load`, `_agentd/session/attach` from 0 and SSE
from 0 of a 50,000-event session each deliver every event exactly once, in order, then
(WebSocket) their response — with a live buffer of only 64 frames, so the replay is
provably not bounded by it. A client that stops reading mid-replay holds the replay
back (paced by its socket) while a turn runs: the live events that pile up meanwhile stay
bounded, and when it reads again it gets the whole log, the turn, then the response and
live traffic. A client that disconnects mid-replay ends its replay."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import websockets

from server.auth import LOCAL_PRINCIPAL
from server.session.events import Event, EventKind
from server.session.hub import Subscriber
from server.store.db import Batch, Store, StoredEvent
from server.transport.outgoing import OutgoingQueue
from server.transport.render import ACP_RENDERER, acp_replay_frames
from tests.conftest import scripted
from tests.support.client import WsClient, text_prompt
from tests.support.frames import ATTACH, SNAPSHOT, agentd_meta, durable_seqs, message_text, response_index
from tests.support.polling import until
from tests.support.sse import durable_ids, sse
from tests.support.text import distinct_words

BUFFER = 64  # the live buffer (client_buffer_frames) of every server here
LOAD = "session/load"


def history(session_id: str, n: int, pad: int) -> list[StoredEvent]:
    """`n` durable events, each with exactly one frame in both replay forms; answers of
    `pad` characters."""
    out: list[StoredEvent] = []
    for seq in range(1, n + 1):
        turn, step = divmod(seq - 1, 5)
        call = f"call_{turn}"
        kind, payload = [
            (
                "user_message",
                {"messageId": f"u{turn}", "content": [{"type": "text", "text": f"prompt {turn}"}]},
            ),
            ("agent_message", {"messageId": f"m{turn}", "text": f"answer {turn} " + "x" * pad}),
            ("tool_call", {"sessionUpdate": "tool_call", "toolCallId": call, "title": "ls", "kind": "read"}),
            (
                "tool_call_update",
                {"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "completed"},
            ),
            ("usage", {"used": seq, "size": 128000}),
        ][step]
        out.append(StoredEvent(seq, kind, payload))
    return out


async def seeded_session(store: Store, cwd: Path, n: int, pad: int = 100) -> str:
    """A session with `n` events, written straight through the store (as the event
    writer's group commits do) instead of running thousands of turns."""
    sid = f"sess_{uuid.uuid4().hex}"
    await store.create_session(id=sid, owner=LOCAL_PRINCIPAL, cwd=str(cwd), mode="default", model="scripted")
    events = history(sid, n, pad)
    for i in range(0, n, 5000):
        await store.commit([Batch(sid, events=events[i : i + 5000])])
    return sid


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


# ------------------------------------------------------------------ a client that stops reading


class PausedClient:
    """A WebSocket client whose reading the test controls: while it does not read, the
    library stops reading the socket (small queue) and the tiny kernel receive buffer
    fills, so the server's writes back up (uncompressed, so the replay's bytes are real)."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.frames: list[dict[str, Any]] = []

    @classmethod
    async def connect(cls, base_url: str) -> PausedClient:
        host, port = base_url.removeprefix("http://").split(":")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
        ws = await websockets.connect(
            f"ws://{host}:{port}/acp", sock=sock, max_size=None, max_queue=4, compression=None
        )
        client = cls(ws)
        await client.send(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        await client.read_until(lambda f: f.get("id") == 0)
        return client

    async def send(self, req_id: int, method: str, params: dict[str, Any]) -> None:
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params}))

    async def read_until(
        self, predicate: Callable[[dict[str, Any]], bool], within: float = 120
    ) -> dict[str, Any]:
        async with asyncio.timeout(within):
            while True:
                frame = json.loads(await self.ws.recv())
                self.frames.append(frame)
                if predicate(frame):
                    return frame


async def replaying_subscriber(server: Any, session_id: str) -> Subscriber:
    actor = server.app.state.agentd.manager.live_actor(session_id)
    subs: list[Subscriber] = []

    def found() -> bool:
        subs[:] = [s for sink in actor.hub.sinks if (s := actor.hub.get(sink.id)) is not None and s.replaying]
        return bool(subs)

    await until(found)
    return subs[0]


@pytest.mark.parametrize("method", [LOAD, ATTACH])
async def test_a_stalled_replay_keeps_live_events_bounded_then_delivers_all(
    server_factory: Any, workspace: Path, tmp_path: Path, method: str
) -> None:
    n = 30_000  # with 1 kB answers ~11 MB of frames: far more than the socket buffers hold
    text = distinct_words(9300)  # ~9 kB streamed while the replaying client was not reading
    provider = scripted(
        {"text": text, "chunk_size": 20, "chunk_delay": 0.001}, {"text": "And live afterwards."}
    )
    url = f"sqlite+aiosqlite:///{tmp_path / 'long.db'}"
    async with server_factory(provider, database_url=url, client_buffer_frames=BUFFER) as server:
        store = server.app.state.agentd.store
        sid = await seeded_session(store, workspace, n, pad=1000)
        slow = await PausedClient.connect(server.base_url)
        params = {"sessionId": sid, "afterSeq": 0} if method == ATTACH else {"sessionId": sid, "cwd": "/"}
        await slow.send(1, method, {**params, "mcpServers": []} if method == LOAD else params)
        await slow.read_until(lambda f: agentd_meta(f).get("seq") == 1)
        sub = await replaying_subscriber(server, sid)

        # The client reads nothing more; a turn of far more than BUFFER events runs meanwhile.
        alice = await server.client()
        result = await alice.call("session/prompt", text_prompt(sid, "go"))
        assert result["stopReason"] == "end_turn"
        turn = await store.read_events(sid, after_seq=n)
        assert len(turn) + len(text) // 20 > BUFFER
        assert sub.replaying, "the replay should still be held back by the client's socket"
        assert sub.buffered <= BUFFER, "live events held during a replay must stay bounded"

        resp = await slow.read_until(lambda f: f.get("id") == 1, within=240)
        assert "result" in resp, resp
        assert slow.frames[-1] is resp
        stored = await store.read_events(sid)
        # `session/load` replays the conversation in ACP form only; attach every durable event.
        want = [e.seq for e in stored if method == ATTACH or acp_replay_frames(_event(sid, e))]
        assert durable_seqs(slow.frames, sid) == want, "a gap or a duplicate"
        assert message_text(slow.frames, sid, _message_id(turn)) == text

        # Live from there, with no gap.
        await alice.call("session/prompt", text_prompt(sid, "again"))
        second = await store.read_events(sid, after_seq=stored[-1].seq)
        await slow.read_until(lambda f: agentd_meta(f).get("seq") == second[-1].seq)
        assert durable_seqs(slow.frames, sid) == want + [e.seq for e in second]
        assert message_text(slow.frames, sid, _message_id(second)) == "And live afterwards."
        await slow.ws.close()
        await alice.close()


def _event(session_id: str, stored: StoredEvent) -> Event:
    return Event(session_id, EventKind(stored.kind), stored.payload, seq=stored.seq)


def _message_id(events: list[StoredEvent]) -> str:
    return next(e.payload["messageId"] for e in events if e.kind == EventKind.AGENT_MESSAGE.value)


def _replay_tasks() -> list[asyncio.Task[Any]]:
    """Tasks currently inside the store replay (server/session/replay.py)."""
    out = []
    for task in asyncio.all_tasks():
        coro: Any = task.get_coro()
        while coro is not None:
            code = getattr(coro, "cr_code", None)
            if code is not None and code.co_filename.endswith("replay.py"):
                out.append(task)
                break
            coro = getattr(coro, "cr_await", None)
    return out


async def test_a_client_leaving_mid_replay_ends_the_replay(
    server_factory: Any, workspace: Path, tmp_path: Path
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'long.db'}"
    async with server_factory(
        scripted({"text": "ok"}), database_url=url, client_buffer_frames=BUFFER
    ) as server:
        sid = await seeded_session(server.app.state.agentd.store, workspace, 20_000, pad=1000)
        loader = await PausedClient.connect(server.base_url)
        await loader.send(1, LOAD, {"sessionId": sid, "cwd": "/", "mcpServers": []})
        await loader.read_until(lambda f: agentd_meta(f).get("seq") == 1)
        await replaying_subscriber(server, sid)
        assert _replay_tasks(), "the replay should be under way"

        async with sse(server.base_url, sid, params={"after": 0}) as stream:
            await stream.next()
        loader.ws.transport.abort()  # gone without a closing handshake
        actor = server.app.state.agentd.manager.live_actor(sid)
        await until(lambda: not _replay_tasks() and len(actor.hub) == 0)


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
        return Event("s1", EventKind.AGENT_MESSAGE_CHUNK, {"messageId": "m1", "text": text, "offset": offset})

    whole = "Hello world, this is it!"
    sub.deliver(chunk(" wor", 5))
    sub.deliver(chunk("this ", 13))  # "ld, " (offsets 9..12) never reached this client
    sub.deliver(chunk("is it!", 18))
    sub.deliver(Event("s1", EventKind.AGENT_MESSAGE, {"messageId": "m1", "text": whole}, seq=1))
    updates = [p for m, p in sink.frames if m == "session/update"]
    assert [u["update"]["content"]["text"] for u in updates] == ["Hello", " wor", whole]
    assert updates[-1]["_meta"]["agentd"].get("final") is True
