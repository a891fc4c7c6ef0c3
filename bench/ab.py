"""Paired A/B of two source trees under the same load (prints figures; no asserts).

    .venv/bin/python bench/ab.py TREE_A TREE_B [--turns 200] [--rounds 3] [--sessions 1]
                                 [--db sqlite|postgres] [--tool] [--chunk-gap-ms 0]

e.g. `git archive <base> | tar -x -C /tmp/base` then `bench/ab.py /tmp/base .`. Both trees'
`agentd serve` run at the same time against one fake model (bench/turnkit.py's set-up).
One session: turns alternate A, B, A, B… and each server's CPU is read around its own
turns, so a busy machine slows both alike (and each turn's latency, request to response, is
timed around its own turn: p50 A and B side by side). `--sessions N`: N sessions prompt at once on
one server, then on the other, round after round. Printed: CPU per turn of each, B/A per
round and overall (and turns/s with `--sessions`).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

import turnkit
from turnkit import TOOL_MARK, Server, agentd_server, model_process

from tests.support.client import WsClient, text_prompt


async def turn(client: WsClient, sid: str, text: str) -> None:
    await client.call("session/prompt", text_prompt(sid, text))
    client.frames.clear()
    while not client.notifications.empty():
        client.notifications.get_nowait()


async def sessions(server: Server, n: int) -> tuple[WsClient, list[str]]:
    client = await WsClient.connect(server.base)
    new = {"cwd": str(server.workspace), "mcpServers": []}
    return client, [(await client.call("session/new", new))["sessionId"] for _ in range(n)]


async def alternating(
    a: Server, b: Server, args: argparse.Namespace, text: str, latency: tuple[list[float], list[float]]
) -> tuple[float, float]:
    """CPU ms per turn of A and of B, turns alternating (10 per fresh session, each warmed);
    each turn's latency (ms) is appended to A's or B's list of `latency`."""
    n = -(-args.turns // 10)
    (ca, sa), (cb, sb) = await sessions(a, n), await sessions(b, n)
    for x, y in zip(sa, sb, strict=True):
        await turn(ca, x, text)
        await turn(cb, y, text)
    cpu = [0.0, 0.0]
    for i in range(args.turns):
        for k, (srv, client, sids) in enumerate(((a, ca, sa), (b, cb, sb))):
            before, started = srv.cpu_s(), time.perf_counter()
            await turn(client, sids[i // 10], text)
            latency[k].append((time.perf_counter() - started) * 1000)
            cpu[k] += srv.cpu_s() - before
    await ca.close()
    await cb.close()
    return cpu[0] * 1000 / args.turns, cpu[1] * 1000 / args.turns


async def concurrent(server: Server, args: argparse.Namespace, text: str) -> tuple[float, float]:
    """(CPU ms per turn, turns/s) with `args.sessions` sessions prompting at once."""
    clients = [await WsClient.connect(server.base) for _ in range(args.sessions)]
    new = {"cwd": str(server.workspace), "mcpServers": []}
    sids = [(await c.call("session/new", new))["sessionId"] for c in clients]
    pairs = list(zip(clients, sids, strict=True))
    await asyncio.gather(*(turn(c, s, text) for c, s in pairs))
    per = -(-args.turns // args.sessions)

    async def run(client: WsClient, sid: str) -> None:
        for _ in range(per):
            await turn(client, sid, text)

    before, started = server.cpu_s(), time.perf_counter()
    await asyncio.gather(*(run(c, s) for c, s in pairs))
    cpu, wall = server.cpu_s() - before, time.perf_counter() - started
    for c in clients:
        await c.close()
    return cpu * 1000 / (per * args.sessions), per * args.sessions / wall


async def main(args: argparse.Namespace, tree_a: Path, tree_b: Path) -> None:
    text = f"{TOOL_MARK} read" if args.tool else "hi"
    ra: list[float] = []
    rb: list[float] = []
    la: list[float] = []
    lb: list[float] = []
    with model_process(chunk_gap_ms=args.chunk_gap_ms) as url:
        turnkit.ROOT = tree_a  # whose `agentd serve` (read as each one starts)
        async with agentd_server(args.db, url) as a:
            turnkit.ROOT = tree_b
            async with agentd_server(args.db, url) as b:
                for r in range(args.rounds):
                    if args.sessions == 1:
                        start = len(la)
                        x, y = await alternating(a, b, args, text, (la, lb))
                        pa, pb = statistics.median(la[start:]), statistics.median(lb[start:])
                        rate = f"  p50 A {pa:.2f} ms  B {pb:.2f} ms  B/A {pb / pa:.3f}"
                    else:
                        (x, xr), (y, yr) = await concurrent(a, args, text), await concurrent(b, args, text)
                        rate = f"  turns/s A {xr:.0f} B {yr:.0f}"
                    ra.append(x)
                    rb.append(y)
                    print(f"round {r}: CPU/turn A {x:.2f} ms  B {y:.2f} ms  B/A {y / x:.3f}{rate}")
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    kind = "one-tool" if args.tool else "trivial"
    print(f"{args.db} {kind} sessions={args.sessions}: A {ma:.2f} ms/turn, B {mb:.2f} ms/turn", end="")
    print(f", B/A {mb / ma:.3f}")
    if la:
        pa, pb = statistics.median(la), statistics.median(lb)
        print(f"  latency p50: A {pa:.2f} ms, B {pb:.2f} ms, B/A {pb / pa:.3f}")


if __name__ == "__main__":
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("a", help="tree A (e.g. a `git archive` of the base)")
    parser.add_argument("b", help="tree B")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=1, help="> 1: that many sessions at once")
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--tool", action="store_true", help="one-tool turns instead of trivial ones")
    parser.add_argument("--chunk-gap-ms", type=float, default=0.0, help="the fake's pause between chunks")
    parsed = parser.parse_args()
    asyncio.run(main(parsed, Path(parsed.a).resolve(), Path(parsed.b).resolve()))
