"""Fan-out (R-E4): three WebSocket clients on one session, one of which stops reading.
The stalled client's bounded buffer (`client_buffer_frames`) overflows; the turn still
completes for the others, and the stalled client, when it finally reads, finds
`_agentd/resync_required` with `lastSeq` and can re-attach from there consistently."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import struct
from pathlib import Path
from typing import Any

from agentd.protocol.agentd import AGENTD_CLIENT
from tests.support.client import text_prompt
from tests.support.frames import ATTACH, durable_seqs, has_turn_ended, is_durable, message_text, stored_seqs
from tests.support.polling import until
from tests.support.server import scripted
from tests.support.session import new_session

RESYNC = "_agentd/resync_required"
BIG = "".join(f"<{i:05d}:{'x' * 250}>" for i in range(24000))  # ~6 MB


class RawWs:
    """A minimal WebSocket client on a raw socket with a tiny receive buffer: when the
    test does not read, nothing is read at all (the kernel window closes and the server's
    writes back up)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    @classmethod
    async def connect(cls, base_url: str) -> RawWs:
        host, port = base_url.removeprefix("http://").split(":")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        await loop.sock_connect(sock, (host, int(port)))
        key = base64.b64encode(os.urandom(16)).decode()
        hello = (
            f"GET /acp HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        await loop.sock_sendall(sock, hello.encode())
        ws = cls(sock)
        while b"\r\n\r\n" not in ws.buf:
            ws.buf += await loop.sock_recv(sock, 4096)
        head, ws.buf = ws.buf.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head
        return ws

    async def send(self, msg: dict[str, Any]) -> None:
        payload = json.dumps(msg).encode()
        mask = os.urandom(4)
        n = len(payload)
        header = bytes([0x81])
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        await asyncio.get_running_loop().sock_sendall(self.sock, header + mask + masked)

    async def _need(self, n: int) -> None:
        while len(self.buf) < n:
            data = await asyncio.get_running_loop().sock_recv(self.sock, 1 << 20)
            if not data:
                raise EOFError
            self.buf += data

    async def recv(self) -> dict[str, Any]:
        message = b""
        while True:
            await self._need(2)
            fin, opcode, n = self.buf[0] & 0x80, self.buf[0] & 0x0F, self.buf[1] & 0x7F
            at = 2
            if n == 126:
                await self._need(4)
                n, at = struct.unpack("!H", self.buf[2:4])[0], 4
            elif n == 127:
                await self._need(10)
                n, at = struct.unpack("!Q", self.buf[2:10])[0], 10
            await self._need(at + n)
            data, self.buf = self.buf[at : at + n], self.buf[at + n :]
            if opcode in (0x1, 0x0):
                message += data
                if fin:
                    return json.loads(message)
            # control frames (ping) are ignored: the test is far shorter than keepalive

    def close(self) -> None:
        self.sock.close()


async def stalled_client(base_url: str, session_id: str) -> RawWs:
    """Initialises and attaches; after the attach response the test stops reading."""
    ws = await RawWs.connect(base_url)
    await ws.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": 1, "_meta": AGENTD_CLIENT},
        }
    )
    assert (await ws.recv())["id"] == 1
    await ws.send(
        {"jsonrpc": "2.0", "id": 2, "method": ATTACH, "params": {"sessionId": session_id, "afterSeq": 0}}
    )
    while True:
        msg = await ws.recv()
        if msg.get("id") == 2:
            assert "result" in msg, msg
            return ws


async def read_through(ws: RawWs, request_id: int, method: str = "session/list") -> list[dict[str, Any]]:
    """Everything the server sent before its answer to a marker request sent now: the
    answer is queued behind every frame already queued for this client, so reading up to
    it is a deterministic "read all" (no waiting for silence). Bounded, never a hang."""
    await ws.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {}})
    out: list[dict[str, Any]] = []
    async with asyncio.timeout(60):
        while True:
            msg = await ws.recv()
            if msg.get("id") == request_id and "method" not in msg:
                assert "result" in msg, msg
                return out
            out.append(msg)


async def read_until_answer(ws: RawWs, request_id: int) -> list[dict[str, Any]]:
    """Frames up to and including the answer to `request_id` (sent by the caller)."""
    out: list[dict[str, Any]] = []
    async with asyncio.timeout(60):
        while True:
            msg = await ws.recv()
            out.append(msg)
            if msg.get("id") == request_id and "method" not in msg:
                return out


async def test_stalled_client_does_not_slow_others_and_resyncs(server_factory: Any, workspace: Path) -> None:
    provider = scripted(
        # Paced so a healthy client on a loaded machine (CI runs tests in parallel) stays
        # within its 20-frame buffer; the stalled one never reads, so it overflows whatever the pace.
        {"text": BIG, "chunk_size": 20000, "chunk_delay": 0.01},
        {"text": "After the resync."},
    )
    async with server_factory(provider, client_buffer_frames=20) as server:
        alice = await server.client()
        bob = await server.client()
        stalled: RawWs | None = None
        try:
            sid = await new_session(alice, workspace)
            await bob.call(ATTACH, {"sessionId": sid, "afterSeq": 0})
            stalled = await stalled_client(server.base_url, sid)
            await _exercise(server, alice, bob, stalled, sid)
        finally:
            # A raw socket left open would keep the server's writer blocked at shutdown.
            if stalled is not None:
                stalled.close()
            await alice.close()
            await bob.close()


async def _exercise(server: Any, alice: Any, bob: Any, stalled: RawWs, sid: str) -> None:
    result = await asyncio.wait_for(alice.call("session/prompt", text_prompt(sid, "a lot")), 60)
    assert result["stopReason"] == "end_turn"
    await until(has_turn_ended(bob, sid))
    mid = next(
        f["params"]["update"]["messageId"]
        for f in alice.frames
        if isinstance(f, dict)
        and f.get("method") == "session/update"
        and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )
    for c in (alice, bob):
        assert message_text(c.frames, sid, mid) == BIG, "a healthy client lost text"
    seqs = await stored_seqs(server, sid)
    assert durable_seqs(bob.frames, sid) == seqs

    # The stalled client finally reads (everything queued for it, up to a marker's answer).
    frames = await read_through(stalled, 10)
    resyncs = [f for f in frames if f.get("method") == RESYNC]
    assert len(resyncs) == 1, "the stalled client must be told to resync"
    last = resyncs[0]["params"]["lastSeq"]
    assert resyncs[0]["params"]["sessionId"] == sid
    assert 0 <= last < seqs[-1]
    got = durable_seqs(frames, sid)
    # Everything up to lastSeq reached it (before or after the notice), nothing beyond.
    assert got == [s for s in seqs if s <= last], "lastSeq does not match what was delivered"

    # Re-attach from lastSeq: the continuation is exactly the rest, then live traffic.
    start = len(frames)
    req = {"jsonrpc": "2.0", "id": 3, "method": ATTACH, "params": {"sessionId": sid, "afterSeq": last}}
    await stalled.send(req)
    frames += await read_until_answer(stalled, 3)
    assert "result" in frames[-1], frames[-1]
    rest = durable_seqs(frames[start:], sid)
    assert rest == [s for s in seqs if s > last]
    # The stalled client's reconstruction of the big message equals the final text.
    assert message_text(frames, sid, mid) == BIG

    await alice.call("session/prompt", text_prompt(sid, "more"))
    # The turn's events were delivered before alice's answer (the drain barrier), so a
    # marker sent now is answered after them.
    frames += await read_through(stalled, 11)
    assert durable_seqs(frames[start:], sid) == [s for s in await stored_seqs(server, sid) if s > last]
    assert not any(f.get("method") == RESYNC for f in frames[start:])
    assert all(is_durable(f) or "seq" not in (f.get("params") or {}) for f in frames)


async def _watch_raw(base_url: str, session_id: str, attached: asyncio.Event) -> list[str]:
    """A client attached to the session that keeps the raw text of every frame it gets
    after the attach's answer, up to the end of the turn."""
    from websockets.asyncio.client import connect

    async with connect(base_url.replace("http://", "ws://") + "/acp", max_size=None) as ws:
        await ws.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"protocolVersion": 1, "_meta": AGENTD_CLIENT},
                }
            )
        )
        params = {"sessionId": session_id, "afterSeq": 0}
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": ATTACH, "params": params}))
        while (msg := json.loads(await ws.recv())).get("id") != 2 or "method" in msg:
            pass
        attached.set()
        texts: list[str] = []
        async with asyncio.timeout(60):
            while '"turn_ended"' not in (text := str(await ws.recv())):
                texts.append(text)
        return texts


async def test_two_clients_of_one_session_receive_identical_frames(
    server_factory: Any, workspace: Path
) -> None:
    """Each event is encoded once for all clients: both watchers get the same text, frame
    for frame (the streamed chunks and everything else of the turn). Chunks not merged: a
    writer merges a backlog's (transport/outgoing.py), and how much queues up is timing."""
    answer = "".join(f"[{i:03d}]" for i in range(60))
    provider = scripted({"text": answer, "chunk_size": 5})
    async with server_factory(provider, ws_merge_chunks=False) as server:
        alice = await server.client()
        try:
            sid = await new_session(alice, workspace)
            ready = [asyncio.Event(), asyncio.Event()]
            watchers = [asyncio.create_task(_watch_raw(server.base_url, sid, r)) for r in ready]
            async with asyncio.timeout(30):
                await asyncio.gather(*(r.wait() for r in ready))
            result = await asyncio.wait_for(alice.call("session/prompt", text_prompt(sid, "go")), 60)
            assert result["stopReason"] == "end_turn"
            first, second = await asyncio.gather(*watchers)
        finally:
            await alice.close()
    live = [t for t in first if '"available_commands_update"' not in t]  # sent per attach
    chunks = [json.loads(t) for t in live if '"agent_message_chunk"' in t]
    assert "".join(c["params"]["update"]["content"]["text"] for c in chunks) == answer
    assert len(chunks) == len(answer) // 5
    assert [t for t in second if '"available_commands_update"' not in t] == live
