"""Fan-out: one session streaming a long answer to N WebSocket clients (prints figures; no asserts).

    .venv/bin/python bench/fanout.py [--clients 1,10,50,200] [--chunks 2000] [--turns 2]
                                     [--procs 4] [--db sqlite,postgres] [--client raw|websockets]
                                     [--smoke]

A real `agentd serve` subprocess (SQLite, then a fresh Postgres database when reachable)
with the OpenAI provider pointed at a fake model in its own process that streams a
`--chunks`-chunk answer (chunk i is the number i: turnkit.numbered_answer). N WebSocket
clients run in `--procs` client processes of their own (neither the server nor the prompting
process), each a lean client that attaches to the session (`_agentd/session/attach`), and on
every frame only looks for `agent_message_chunk` (then reads the chunk's number) or the
`turn_ended` event. `--client raw` (the default) is a minimal RFC 6455 client parsing frames
in its protocol's `data_received` (`RawWs`); `--client websockets` uses the `websockets`
library, whose reader task per connection costs the client processes more CPU — they share
the 2 cores with the server, and a starved client shows up as spread that is not the server's.
`--client arrival` (the default) is the raw client on a plain socket that also stamps every
read with the kernel's receive time (SO_TIMESTAMPNS). The prompt goes over `POST /rpc` from
this process, which is not attached: every delivery counted is one to a measured client.
`--direct-write false` runs the server with AGENTD_WS_DIRECT_WRITE=false (the library path).

Reported per N (over `--turns` turns after a warm-up turn; the figures of all turns together):
- deliveries/s: chunk frames received by all clients / (last delivery − first delivery);
- spread p50/p99 (as read): per chunk, the last client's read − the first client's read
  (time.monotonic() is CLOCK_MONOTONIC, comparable across processes on Linux);
- at arrival (`--client arrival`): the same from the kernel's receive stamps — when the bytes
  reached each client's socket, whenever its process got round to reading them; and the
  clients' read lag: per chunk, the longest any client left it unread in its socket. A read
  spread with a read lag as large is the client processes queueing (they share the 2 cores
  with the server and the model), not the server sending one client's chunk later;
- the clients' CPU per delivery and the chunks per frame (1.00: no frame carried two);
- server CPU per delivery (user + system time of the server process over the turns /
  deliveries; includes the turn itself, which is small beside N × chunks);
- lost / duplicated / out-of-order chunks over all clients (must all be 0).
Targets: ≥ 50,000 deliveries/s at 50 clients, spread p99 ≤ 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
from turnkit import CHUNK_WIDTH, CLK_TCK, Server, agentd_server, backends, free_port, model_process, pct

from agentd.protocol.agentd import AGENTD_CLIENT

HERE = Path(__file__).resolve().parent
RATE_TARGET = 50_000  # deliveries/s at 50 clients
FLOOR_TARGET = 1.5  # server CPU per delivery, agentd / the bare broadcast (bench/fanout_floor.py)
FLOOR_SID = "sess_00000000000000000000000000000000"  # the bare broadcast's (as long as agentd's)
SPREAD_TARGET_MS = 50.0


# -- a client process: n lean WebSocket clients ---------------------------------------------


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


# -- the driver ----------------------------------------------------------------------------


def loadavg() -> str:
    """The 1-minute load average (the machine may be shared: figures go with it)."""
    return Path("/proc/loadavg").read_text().split()[0]


def sys_cpu_s(server: Server) -> float:
    """The server's system (kernel) CPU so far: the socket writes, one per frame per client."""
    return int(Path(f"/proc/{server.pid}/stat").read_text().rsplit(")", 1)[1].split()[12]) / CLK_TCK


def _spawn(url: str, sid: str, n: int, chunks: int, kind: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, str(Path(__file__)), "--client-process", url, sid, str(n), str(chunks), kind]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


async def _line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = await asyncio.to_thread(proc.stdout.readline)
    if not line:
        raise SystemExit(f"a client process ended (exit {proc.wait()})")
    return line


async def rpc(http: Any, method: str, params: dict[str, Any]) -> Any:
    resp = await http.post("/rpc", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    body = resp.json()
    if "result" not in body:
        raise SystemExit(f"{method} failed: {body}")
    return body["result"]


async def one_count(
    server: Server, n: int, args: argparse.Namespace, sid: str, prompt: Callable[[], Awaitable[None]]
) -> tuple[str, float]:
    """(the figures line, server CPU µs per delivery) of `args.turns` turns to `n` clients."""
    procs = min(args.procs, n)
    url = server.base.replace("http://", "ws://") + "/acp"
    workers = [_spawn(url, sid, n // procs + (k < n % procs), args.chunks, args.client) for k in range(procs)]
    try:
        for w in workers:
            if (await _line(w)).strip() != "ready":
                raise SystemExit("a client process did not get ready")
        spreads: list[float] = []
        arrival: list[float] = []  # the same, stamped when the bytes reached each socket
        lags: list[float] = []  # per chunk, the longest any client left it unread in its socket
        totals = {
            "received": 0,
            "lost": 0,
            "duplicated": 0,
            "out_of_order": 0,
            "frames": 0,
            "client_cpu": 0.0,
        }
        cpu = sys_cpu = elapsed = 0.0
        for turn in range(args.turns + 1):  # the first warms up (loads the session, connects the model)
            for w in workers:
                assert w.stdin is not None
                w.stdin.write("turn\n")
                w.stdin.flush()
            for w in workers:
                if (await _line(w)).strip() != "armed":
                    raise SystemExit("a client process did not arm")
            cpu0, sys0 = server.cpu_s(), sys_cpu_s(server)
            await prompt()
            outs = [json.loads(await _line(w)) for w in workers]
            if turn == 0:
                continue
            cpu += server.cpu_s() - cpu0
            sys_cpu += sys_cpu_s(server) - sys0
            for key in totals:
                totals[key] += sum(o[key] for o in outs)
            firsts = [min((t for o in outs if (t := o["first"][i])), default=0.0) for i in range(args.chunks)]
            lasts = [max(o["last"][i] for o in outs) for i in range(args.chunks)]
            spreads += [b - a for a, b in zip(firsts, lasts, strict=True) if a]
            a_firsts = [
                min((t for o in outs if (t := o["a_first"][i])), default=0.0) for i in range(args.chunks)
            ]
            a_lasts = [max(o["a_last"][i] for o in outs) for i in range(args.chunks)]
            arrival += [b - a for a, b in zip(a_firsts, a_lasts, strict=True) if a]
            lags += [max(o["lag"][i] for o in outs) for i in range(args.chunks) if a_firsts[i]]
            seen = [t for t in firsts if t]
            elapsed += max(lasts) - min(seen) if seen else 0.0
    finally:
        for w in workers:
            if w.stdin:
                w.stdin.close()
        for w in workers:
            try:
                await asyncio.to_thread(w.wait, 10)
            except subprocess.TimeoutExpired:
                w.kill()
    got = int(totals["received"])
    rate = got / elapsed if elapsed else 0.0
    target = f" (target ≥ {RATE_TARGET:,})" if n == 50 else ""
    spread_target = f" (target ≤ {SPREAD_TARGET_MS:.0f})" if n == 50 else ""
    per = cpu * 1e6 / max(got, 1)
    parts = [
        f"clients={n:<4} procs={procs} deliveries={got} deliveries/s={rate:,.0f}{target}",
        f"spread p50={pct(spreads, 50):.2f} ms p99={pct(spreads, 99):.2f} ms{spread_target} (as read)",
    ]
    if arrival:  # `--client arrival`: the same at the clients' sockets, and how far behind they read
        parts.append(f"at arrival p50={pct(arrival, 50):.2f} ms p99={pct(arrival, 99):.2f} ms")
        parts.append(f"clients' read lag p50={pct(lags, 50):.2f} ms p99={pct(lags, 99):.2f} ms")
    parts += [
        f"server CPU/delivery={per:.1f} µs (system {sys_cpu * 1e6 / max(got, 1):.1f})",
        f"clients' CPU/delivery={totals['client_cpu'] * 1e6 / max(got, 1):.1f} µs",
        f"chunks/frame={got / max(totals['frames'], 1):.2f}",
        f"lost={totals['lost']:.0f} duplicated={totals['duplicated']:.0f}",
        f"out_of_order={totals['out_of_order']:.0f}",
    ]
    return " ".join(parts), per


@asynccontextmanager
async def broadcast_floor(chunks: int) -> AsyncIterator[tuple[Server, Callable[[], Awaitable[None]]]]:
    """bench/fanout_floor.py in a process of its own; (it as a Server, its turn)."""
    port = free_port()
    cmd = [sys.executable, str(HERE / "fanout_floor.py"), str(port), str(chunks), FLOOR_SID]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # noqa: ASYNC220

    async def turn() -> None:
        assert proc.stdin is not None
        proc.stdin.write("turn\n")
        proc.stdin.flush()
        if (await _line(proc)).strip() != "done":
            raise SystemExit("the bare broadcast did not finish its turn")

    try:
        if (await _line(proc)).strip() != "ready":
            raise SystemExit("the bare broadcast did not start")
        yield Server(f"http://127.0.0.1:{port}", proc.pid, HERE), turn
    finally:
        if proc.stdin:
            proc.stdin.close()
        try:
            await asyncio.to_thread(proc.wait, 10)
        except subprocess.TimeoutExpired:
            proc.kill()


async def bench(kind: str, model_url: str, args: argparse.Namespace) -> None:
    import httpx

    prelude = f"import os; os.environ['AGENTD_WS_DIRECT_WRITE'] = {args.direct_write!r}"
    async with (
        agentd_server(kind, model_url, prelude=prelude) as server,
        broadcast_floor(args.chunks) as (floor, floor_turn),
    ):
        async with httpx.AsyncClient(base_url=server.base, timeout=600) as http:
            for n in args.clients:
                new = {"cwd": str(server.workspace), "mcpServers": []}
                sid = (await rpc(http, "session/new", new))["sessionId"]

                async def turn(sid: str = sid) -> None:
                    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
                    result = await rpc(http, "session/prompt", prompt)
                    if result.get("stopReason") != "end_turn":
                        raise SystemExit(f"turn ended with {result}")

                # Side by side: agentd's turns, then the bare broadcast's to as many clients.
                line, per = await one_count(server, n, args, sid, turn)
                print(f"{kind:<8} {line} load={loadavg()}", flush=True)
                line, floor_per = await one_count(floor, n, args, FLOOR_SID, floor_turn)
                print(f"{'floor':<8} {line} load={loadavg()}", flush=True)
                ratio = f"{per / floor_per:.2f}" if floor_per > 0 else "n/a"
                print(f"{kind:<8} clients={n:<4} server CPU/delivery agentd/floor = {ratio} "
                      f"(target ≤ {FLOOR_TARGET} at 50 clients)", flush=True)  # fmt: skip


async def main(args: argparse.Namespace) -> None:
    kinds = [k for k in await backends() if k in args.db]
    with model_process(args.chunks) as model_url:
        print(f"chunks/turn={args.chunks} turns={args.turns}", flush=True)
        for kind in kinds:
            await bench(kind, model_url, args)
    if "postgres" in args.db and "postgres" not in kinds:
        print("postgres skipped (not reachable)")


if __name__ == "__main__" and "--client-process" in sys.argv:
    _, _, c_url, c_sid, c_n, c_chunks, c_kind = sys.argv
    asyncio.run(client_process(c_url, c_sid, int(c_n), int(c_chunks), c_kind))
elif __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", default="1,10,50,200", help="client counts, comma-separated")
    parser.add_argument("--chunks", type=int, default=2000, help="chunks per answer")
    parser.add_argument("--turns", type=int, default=2, help="turns per client count")
    parser.add_argument("--procs", type=int, default=4, help="client processes (at most one per client)")
    parser.add_argument("--db", default="sqlite,postgres", help="backends to run (postgres if reachable)")
    parser.add_argument(
        "--client",
        choices=("arrival", "raw", "websockets"),
        default="arrival",
        help="the clients' WebSocket code (arrival: raw, also stamping when bytes reached the socket)",
    )
    parser.add_argument(
        "--direct-write", choices=("true", "false"), default="true",
        help="the server's AGENTD_WS_DIRECT_WRITE (false: every frame through ASGI's send)",
    )  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="a tiny run (a few seconds)")
    ns = parser.parse_args()
    if ns.smoke:
        ns.clients, ns.chunks, ns.turns, ns.procs = "1,3", 200, 1, 2
    ns.clients = [int(c) for c in ns.clients.split(",")]
    ns.db = ns.db.split(",")
    asyncio.run(main(ns))
