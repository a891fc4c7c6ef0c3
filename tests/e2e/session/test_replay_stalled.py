"""A client that stops reading mid-replay (R-E3; split from test_replay_long.py so the two
xdist workers share the long replays): the replay is held back by its socket while a turn
runs, the live events that pile up stay bounded, and it gets the whole log then live
traffic when it reads again; a client that disconnects mid-replay ends its replay."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import websockets

from agentd.core.events import Event, EventKind
from agentd.protocol.agentd import AGENTD_CLIENT
from agentd.session.eventlog import replayer
from agentd.session.eventlog.hub import Subscriber
from agentd.store.db import StoredEvent
from agentd.transport.render import acp_replay_frames
from tests.support.client import text_prompt
from tests.support.frames import ATTACH, agentd_meta, durable_seqs, message_text
from tests.support.polling import until
from tests.support.replay import BUFFER, LOAD, seeded_session
from tests.support.server import scripted
from tests.support.sse import sse
from tests.support.text import distinct_words


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
        await client.send(
            0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}, "_meta": AGENTD_CLIENT}
        )
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
    return Event.stored(session_id, EventKind(stored.kind), stored.payload, seq=stored.seq)


def _message_id(events: list[StoredEvent]) -> str:
    return next(e.payload["messageId"] for e in events if e.kind == EventKind.AGENT_MESSAGE.value)


def _replay_tasks() -> list[asyncio.Task[Any]]:
    """Tasks currently inside the store replay (agentd/session/eventlog/replayer.py)."""
    out = []
    for task in asyncio.all_tasks():
        coro: Any = task.get_coro()
        while coro is not None:
            code = getattr(coro, "cr_code", None)
            if code is not None and code.co_filename == replayer.__file__:
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
