"""The client processes of bench/fanout.py: n lean WebSocket clients each, attached to one session.

    python bench/fanout_client.py URL SESSION_ID N CHUNKS arrival|raw|websockets
    (bench/fanout.py starts them; stdin drives the turns, stdout answers — see client_process)

Each client attaches (`_agentd/session/attach`) and on every frame only looks for
`agent_message_chunk` (then reads the chunk's number) or the `turn_ended` event. `raw` is a
minimal RFC 6455 client parsing frames in its protocol's `data_received` (`RawWs`);
`arrival` is the same client on a plain socket, every read also stamped with the kernel's
receive time (SO_TIMESTAMPNS); `websockets` uses the library, whose reader task per
connection costs the client processes more CPU — they share the 2 cores with the server,
and a starved client shows up as spread that is not the server's.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import socket
import struct
import sys
import time
from typing import Any
from urllib.parse import urlsplit

import orjson
from turnkit import CHUNK_WIDTH

from agentd.protocol.agentd import AGENTD_CLIENT


class Counter:
    """What one client received during one turn."""

    def __init__(self, chunks: int) -> None:
        self.times = [0.0] * chunks  # the time the client read chunk i (0: not received)
        self.arrived = [0.0] * chunks  # when its bytes reached the client's socket (`--client arrival`)
        self.next = 0  # the chunk expected next
        self.received = self.duplicated = self.out_of_order = 0
        self.frames = 0  # chunk frames (a frame may carry several chunks)
        self.ended = asyncio.Event()

    def chunk(self, text: str, now: float, arrived: float = 0.0) -> None:
        self.frames += 1
        for at in range(0, len(text), CHUNK_WIDTH):  # one chunk normally; more if coalesced
            i = int(text[at : at + CHUNK_WIDTH])
            self.received += 1
            if self.times[i]:
                self.duplicated += 1
                continue
            if i != self.next:
                self.out_of_order += 1
            self.times[i] = now
            self.arrived[i] = arrived
            self.next = i + 1


async def _client(url: str, sid: str, counters: list[Counter], slot: int, ready: asyncio.Event) -> None:
    """A `websockets` client (`--client websockets`): the library's reader task per connection."""
    from websockets.asyncio.client import connect

    async with connect(url, max_size=None, compression=None) as ws:
        for i, (method, params) in enumerate(_hello(sid)):
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}))
            while '"id":' + str(i) not in (reply := str(await ws.recv())) or '"method"' in reply:
                pass  # the attach's snapshot and replay come before its response
        ready.set()
        async for text in ws:
            if '"agent_message_chunk"' in text:
                now = time.monotonic()
                msg = orjson.loads(text)
                counters[slot].chunk(msg["params"]["update"]["content"]["text"], now)
            elif '"turn_ended"' in text:
                counters[slot].ended.set()


def _hello(sid: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("initialize", {"protocolVersion": 1, "clientCapabilities": {}, "_meta": AGENTD_CLIENT}),
        ("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0}),
    ]


class RawWs(asyncio.Protocol):
    """A minimal RFC 6455 client (`--client raw`, the default): frames are parsed in
    `data_received`, stamped once per read, with no task switch per frame. The clients are
    the measuring apparatus and share the 2 cores with the server: the lighter they are, the
    less their own CPU starvation shows up as spread. Server frames are unmasked and (no
    permessage-deflate is offered) uncompressed; pings are answered."""

    def __init__(self, sid: str, counters: list[Counter], slot: int, ready: asyncio.Event) -> None:
        self.sid, self.counters, self.slot, self.ready = sid, counters, slot, ready
        self.buf = bytearray()
        self.upgraded = False
        self.pending = 0  # the id of the request whose response is awaited during the hello
        self.transport: asyncio.Transport | None = None
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def send_text(self, text: str, opcode: int = 1) -> None:
        payload = text.encode()
        mask = os.urandom(4)
        n = len(payload)
        head = bytes([0x80 | opcode]) + (
            bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big")
        )
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        assert self.transport is not None
        self.transport.write(head + mask + masked)

    def _request(self, i: int) -> None:
        method, params = _hello(self.sid)[i]
        self.pending = i
        self.send_text(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}))

    def data_received(self, data: bytes, arrived: float = 0.0) -> None:
        # (with `arrived`, the kernel's stamp in CLOCK_REALTIME: the read is stamped in it too)
        now = time.time() if arrived else time.monotonic()
        buf = self.buf
        buf += data
        if not self.upgraded:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            if not buf.startswith(b"HTTP/1.1 101"):
                raise SystemExit(f"no upgrade: {bytes(buf[:200])!r}")
            del buf[: end + 4]
            self.upgraded = True
            self._request(0)
        at = 0
        size = len(buf)
        while size - at >= 2:
            op, n = buf[at] & 0x0F, buf[at + 1] & 0x7F
            head = 2
            if n == 126:
                if size - at < 4:
                    break
                n, head = int.from_bytes(buf[at + 2 : at + 4], "big"), 4
            elif n == 127:
                if size - at < 10:
                    break
                n, head = int.from_bytes(buf[at + 2 : at + 10], "big"), 10
            if size - at < head + n:
                break
            payload = bytes(buf[at + head : at + head + n])
            at += head + n
            if op == 1:
                self._text(payload, now, arrived)
            elif op == 9:  # ping → pong with the same payload
                self.send_text(payload.decode(errors="replace"), opcode=10)
            elif op == 8 and self.transport is not None:
                self.transport.close()
        del buf[:at]

    def _text(self, payload: bytes, now: float, arrived: float) -> None:
        if b'"agent_message_chunk"' in payload:
            msg = orjson.loads(payload)
            self.counters[self.slot].chunk(msg["params"]["update"]["content"]["text"], now, arrived)
        elif b'"turn_ended"' in payload:
            self.counters[self.slot].ended.set()
        elif not self.ready.is_set() and b'"method"' not in payload and b'"id":%d' % self.pending in payload:
            if self.pending + 1 < len(_hello(self.sid)):
                self._request(self.pending + 1)
            else:
                self.ready.set()


async def _raw_client(url: str, sid: str, counters: list[Counter], slot: int, ready: asyncio.Event) -> None:
    parts = urlsplit(url)
    loop = asyncio.get_running_loop()
    transport, proto = await loop.create_connection(
        lambda: RawWs(sid, counters, slot, ready), parts.hostname, parts.port
    )
    key = base64.b64encode(os.urandom(16)).decode()
    transport.write(
        f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    try:
        await proto.closed
    finally:
        transport.close()


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux: the socket's receive time per read
ARRIVAL_READ = 4096  # bytes per read: a timestamp covers at most this much (a write of ~16 frames)


class _SockWriter:
    """The transport `RawWs` writes through, on a plain socket (the hello, pongs: small)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def write(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        self.sock.close()


async def _arrival_client(
    url: str, sid: str, counters: list[Counter], slot: int, ready: asyncio.Event
) -> None:
    """`--client arrival` (the default): the raw client, each frame stamped with the kernel's receive time
    of the bytes that carried it (SO_TIMESTAMPNS, CLOCK_REALTIME, comparable across processes)
    instead of the time this process got round to reading them: the spread then measures
    when the server delivered a chunk to each client, not how the client processes — four of
    them sharing the 2 cores with the server — were scheduled. TCP stamps a read with its last
    segment (and a segment merged into a waiting one takes the later stamp), so a lagging
    reader's frames are stamped late, never early."""
    parts = urlsplit(url)
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.setblocking(False)
    await loop.sock_connect(sock, (parts.hostname, parts.port))
    proto = RawWs(sid, counters, slot, ready)
    proto.transport = _SockWriter(sock)  # type: ignore[assignment]
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )

    def readable() -> None:
        try:
            data, anc, _, _ = sock.recvmsg(ARRIVAL_READ, 64)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, anc = b"", []
        if not data:
            loop.remove_reader(sock.fileno())
            proto.connection_lost(None)
            return
        at = time.time()
        for level, kind, cdata in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", cdata[:16])
                at = sec + nsec * 1e-9
        proto.data_received(data, at)

    loop.add_reader(sock.fileno(), readable)
    try:
        await proto.closed
    finally:
        with contextlib.suppress(ValueError, OSError):
            loop.remove_reader(sock.fileno())
        sock.close()


async def client_process(url: str, sid: str, n: int, chunks: int, kind: str) -> None:
    """Stdin: one line per turn ("turn": reset and answer "armed"; then the turn's figures
    as one JSON line once every client saw it end). EOF ends the process."""
    counters = [Counter(chunks) for _ in range(n)]
    readies = [asyncio.Event() for _ in range(n)]
    run = {"raw": _raw_client, "arrival": _arrival_client}.get(kind, _client)
    tasks = [asyncio.create_task(run(url, sid, counters, k, readies[k])) for k in range(n)]
    await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 120)
    print("ready", flush=True)
    while (await asyncio.to_thread(sys.stdin.readline)).strip() == "turn":
        counters[:] = [Counter(chunks) for _ in range(n)]
        cpu0 = time.process_time()
        print("armed", flush=True)
        await asyncio.wait_for(asyncio.gather(*(c.ended.wait() for c in counters)), 600)
        first = [min((c.times[i] for c in counters if c.times[i]), default=0.0) for i in range(chunks)]
        last = [max((c.times[i] for c in counters), default=0.0) for i in range(chunks)]
        a_first = [min((c.arrived[i] for c in counters if c.arrived[i]), default=0.0) for i in range(chunks)]
        a_last = [max((c.arrived[i] for c in counters), default=0.0) for i in range(chunks)]
        out = {
            "first": first,
            "last": last,
            "a_first": a_first,
            "a_last": a_last,
            # per chunk, the longest a client of this process left it in its socket unread
            "lag": [
                max((c.times[i] - c.arrived[i] for c in counters if c.arrived[i]), default=0.0)
                for i in range(chunks)
            ],
            "received": sum(c.received for c in counters),
            "frames": sum(c.frames for c in counters),
            "client_cpu": time.process_time() - cpu0,
            "lost": sum(chunks - sum(1 for t in c.times if t) for c in counters),
            "duplicated": sum(c.duplicated for c in counters),
            "out_of_order": sum(c.out_of_order for c in counters),
        }
        print(json.dumps(out), flush=True)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


if __name__ == "__main__":
    _, c_url, c_sid, c_n, c_chunks, c_kind = sys.argv
    asyncio.run(client_process(c_url, c_sid, int(c_n), int(c_chunks), c_kind))
