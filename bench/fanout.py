"""Fan-out: one session streaming a long answer to N WebSocket clients (prints figures; no asserts).

    .venv/bin/python bench/fanout.py [--clients 1,10,50,200] [--chunks 2000] [--turns 2]
                                     [--procs 4] [--db sqlite,postgres]
                                     [--client arrival|raw|websockets] [--direct-write true|false]
                                     [--merge-chunks true|false] [--smoke]

A real `agentd serve` subprocess (SQLite, then a fresh Postgres database when reachable)
with the OpenAI provider pointed at a fake model in its own process that streams a
`--chunks`-chunk answer (chunk i is the number i: turnkit.numbered_answer). N WebSocket
clients run in `--procs` client processes of their own (bench/fanout_client.py: neither the
server nor the prompting process), lean clients attached to the session. `--client arrival`
(the default) is a minimal RFC 6455 client that also stamps every read with the kernel's
receive time; `raw` the same without; `websockets` the library's client. The prompt goes over
`POST /rpc` from this process, which is not attached: every delivery counted is one to a
measured client. `--direct-write false` runs the server with AGENTD_WS_DIRECT_WRITE=false
(every frame through ASGI's `websocket.send`, the library path; the bench's server gets no
`AGENTD_` variable from this environment). `--merge-chunks false` runs it with
AGENTD_WS_MERGE_CHUNKS=false: a client behind gets every chunk in a frame of its own
(on, the default: its writer merges the queued chunks of one message, chunks/frame > 1).

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
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from turnkit import CLK_TCK, Server, agentd_server, backends, free_port, model_process, pct

HERE = Path(__file__).resolve().parent
RATE_TARGET = 50_000  # deliveries/s at 50 clients
FLOOR_TARGET = 1.5  # server CPU per delivery, agentd / the bare broadcast (bench/fanout_floor.py)
FLOOR_SID = "sess_00000000000000000000000000000000"  # the bare broadcast's (as long as agentd's)
SPREAD_TARGET_MS = 50.0


# -- the driver ----------------------------------------------------------------------------


def loadavg() -> str:
    """The 1-minute load average (the machine may be shared: figures go with it)."""
    return Path("/proc/loadavg").read_text().split()[0]


def sys_cpu_s(server: Server) -> float:
    """The server's system (kernel) CPU so far: the socket writes, one per frame per client."""
    return int(Path(f"/proc/{server.pid}/stat").read_text().rsplit(")", 1)[1].split()[12]) / CLK_TCK


def _spawn(url: str, sid: str, n: int, chunks: int, kind: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, str(HERE / "fanout_client.py"), url, sid, str(n), str(chunks), kind]
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

    prelude = (
        f"import os; os.environ['AGENTD_WS_DIRECT_WRITE'] = {args.direct_write!r}; "
        f"os.environ['AGENTD_WS_MERGE_CHUNKS'] = {args.merge_chunks!r}"
    )
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


if __name__ == "__main__":
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
    parser.add_argument(
        "--merge-chunks", choices=("true", "false"), default="true",
        help="the server's AGENTD_WS_MERGE_CHUNKS (false: every chunk its own frame)",
    )  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="a tiny run (a few seconds)")
    ns = parser.parse_args()
    if ns.smoke:
        ns.clients, ns.chunks, ns.turns, ns.procs = "1,3", 200, 1, 2
    ns.clients = [int(c) for c in ns.clients.split(",")]
    ns.db = ns.db.split(",")
    asyncio.run(main(ns))
