"""Paired A/B of two source trees, per thread, in nanoseconds (prints figures; no asserts).

    .venv/bin/python bench/thread_ab.py TREE_A TREE_B [--turns 200] [--rounds 3]
                                        [--db sqlite|postgres] [--tool]

bench/ab.py's set-up (both trees' `agentd serve` at once against one fake model, one
session each, turns alternating A, B, A, B…), but each thread's CPU is read from
/proc/PID/task/TID/schedstat — the scheduler's own run time in ns — instead of the
process's utime + stime, which count 10 ms clock ticks: a writer thread running ~100 µs
per commit is charged by sampling, a handful of ticks in a 200-turn run. Printed per round
and overall: µs CPU per turn of the event loop (the main thread), of the SQLite writer
(the busiest other thread) and of every other thread together, and the p50 latency of a
turn (the mean of the rounds' p50s overall), A and B side by side with B/A.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

import turnkit
from turnkit import TOOL_MARK, Server, agentd_server, model_process, pct

from tests.support.client import WsClient, text_prompt

PARTS = ("loop", "writer", "other")


def tasks_ns(pid: int) -> dict[str, int]:
    """Run time (ns) so far of each of the process's threads, by thread id."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[task.name] = int((task / "schedstat").read_text().split()[0])
        except OSError:  # the thread ended meanwhile
            continue
    return out


def parts(pid: int, spent: dict[str, int]) -> dict[str, int]:
    """The loop (the main thread), the writer (the busiest other thread: Python 3.11 gives
    threads no OS name to tell it by) and all other threads together."""
    loop = spent.pop(str(pid), 0)
    writer = max(spent.values(), default=0)
    return {"loop": loop, "writer": writer, "other": sum(spent.values()) - writer}


async def turn(client: WsClient, sid: str, text: str) -> None:
    await client.call("session/prompt", text_prompt(sid, text))
    client.frames.clear()
    while not client.notifications.empty():
        client.notifications.get_nowait()


async def round_(servers: list[Server], turns: int, text: str) -> list[dict[str, float]]:
    """µs per turn, by part, of each server (a fresh session every 10 turns, each warmed)."""
    new = {"cwd": str(servers[0].workspace), "mcpServers": []}
    clients = [await WsClient.connect(s.base) for s in servers]
    per = -(-turns // 10)
    sids = [[(await c.call("session/new", new))["sessionId"] for _ in range(per)] for c in clients]
    for i in range(len(sids[0])):
        for c, s in zip(clients, sids, strict=True):
            await turn(c, s[i], text)
    spent: list[dict[str, int]] = [{} for _ in servers]
    waited: list[list[float]] = [[] for _ in servers]
    for i in range(turns):
        for k, (srv, c, s) in enumerate(zip(servers, clients, sids, strict=True)):
            before, started = tasks_ns(srv.pid), time.perf_counter()
            await turn(c, s[i // 10], text)
            waited[k].append(time.perf_counter() - started)
            for tid, ran in tasks_ns(srv.pid).items():
                spent[k][tid] = spent[k].get(tid, 0) + ran - before.get(tid, ran)
    for c in clients:
        await c.close()
    split = [parts(srv.pid, x) for srv, x in zip(servers, spent, strict=True)]
    return [
        {**{p: v / turns / 1000 for p, v in x.items()}, "p50": pct(w, 50)}
        for x, w in zip(split, waited, strict=True)
    ]


def line(label: str, a: dict[str, float], b: dict[str, float]) -> str:
    parts = [f"{p} A {a[p]:.0f} B {b[p]:.0f}" + (f" ({b[p] / a[p]:.3f})" if a[p] else "") for p in PARTS]
    ta, tb = sum(a[p] for p in PARTS), sum(b[p] for p in PARTS)
    p50 = f"p50 ms A {a['p50']:.2f} B {b['p50']:.2f} ({b['p50'] / a['p50']:.3f})"
    every = f"all A {ta:.0f} B {tb:.0f} ({tb / ta:.3f})"
    return f"{label}: µs CPU/turn " + " | ".join([*parts, every, p50])


async def main(args: argparse.Namespace, tree_a: Path, tree_b: Path) -> None:
    text = f"{TOOL_MARK} read" if args.tool else "hi"
    totals: list[list[dict[str, float]]] = []
    with model_process() as url:
        turnkit.ROOT = tree_a
        async with agentd_server(args.db, url) as a:
            turnkit.ROOT = tree_b
            async with agentd_server(args.db, url) as b:
                for r in range(args.rounds):
                    x, y = await round_([a, b], args.turns, text)
                    totals.append([x, y])
                    print(line(f"round {r}", x, y), flush=True)
    mean = [{p: sum(t[k][p] for t in totals) / len(totals) for p in (*PARTS, "p50")} for k in (0, 1)]
    print(line(f"{args.db} {'one-tool' if args.tool else 'trivial'} mean", *mean))


if __name__ == "__main__":
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("a", help="tree A (e.g. a worktree of the base)")
    parser.add_argument("b", help="tree B")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--tool", action="store_true", help="one-tool turns instead of trivial ones")
    args = parser.parse_args()
    asyncio.run(main(args, Path(args.a).resolve(), Path(args.b).resolve()))
