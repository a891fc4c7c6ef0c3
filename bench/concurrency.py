"""Many sessions prompting at once (prints figures; no asserts).

    .venv/bin/python bench/concurrency.py [--sessions 8,32,200] [--turns-per-session 10] [--smoke]

Same set-up as bench/turn.py (a real `agentd serve` subprocess, SQLite then a fresh Postgres
database when reachable, the OpenAI provider against a fake streaming model in its own
process, no model delay). For each count N: N sessions, each on its own WebSocket, all
prompting trivial turns back to back at the same time. Reported: per-turn latency p50/p99,
trivial turns/s over the whole run, server CPU per turn, errors by kind (a failed set-up or
call, a stop reason other than end_turn) and the refusals retried by kind: agentd's
"retry after" refusals (an overloaded database, the rate limit) are retried after the wait
they name, as agentd's own clients do. A session whose set-up fails is counted and the run
goes on with the others. Targets: 8 concurrent p50 ≤ 25 ms; ≥ 300 turns/s; 0 errors.

The clients run in this one process: at 200 sessions its own CPU (JSON, WebSockets) is part
of what is measured, on a small machine it competes with the server for cores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections import Counter
from dataclasses import dataclass, field

from turnkit import Server, agentd_server, backends, model_process, pct

from tests.support.client import WsClient, error_kind, text_prompt

P50_TARGET_MS = 25.0  # at 8 sessions
RATE_TARGET = 300.0


@dataclass
class Tally:
    lat: list[float] = field(default_factory=list)  # seconds per completed turn
    errors: Counter[str] = field(default_factory=Counter)  # by kind
    retried: Counter[str] = field(default_factory=Counter)  # refusals retried, by kind


async def one_session(server: Server, start: asyncio.Barrier, turns: int, tally: Tally) -> None:
    """Prompt `turns` times once every session is ready; failures go into the tally by kind."""
    lat, errors, retried = tally.lat, tally.errors, tally.retried
    client: WsClient | None = None
    try:
        client = await WsClient.connect(server.base)
        new = {"cwd": str(server.workspace), "mcpServers": []}
        sid = (await client.call_retrying("session/new", new, retried=retried))["sessionId"]
        await client.call_retrying("session/prompt", text_prompt(sid, "warm up"), retried=retried)
    except Exception as exc:  # counted; the others run on (one failed set-up aborts nothing)
        errors[f"set-up: {error_kind(exc)}"] += 1
        await start.wait()
        if client is not None:
            await client.close()
        return
    await start.wait()
    for _ in range(turns):
        t0 = time.perf_counter()
        try:
            result = await client.call_retrying("session/prompt", text_prompt(sid, "hi"), retried=retried)
        except Exception as exc:
            errors[f"turn: {error_kind(exc)}"] += 1
            continue
        if result.get("stopReason") != "end_turn":
            errors[f"stop: {result.get('stopReason')}"] += 1
            continue
        lat.append(time.perf_counter() - t0)
        while not client.notifications.empty():  # bounded: the figures need no updates
            client.notifications.get_nowait()
        client.frames.clear()
    await client.close()


def by_kind(counts: Counter[str]) -> str:
    return ", ".join(f"{kind}: {n}" for kind, n in counts.most_common()) or "none"


async def bench(kind: str, model_url: str, counts: list[int], turns: int) -> None:
    async with agentd_server(kind, model_url) as server:
        for n in counts:
            start = asyncio.Barrier(n + 1)  # every session connected, created and warmed up
            tally = Tally()
            lat, errors, retried = tally.lat, tally.errors, tally.retried
            tasks = [asyncio.create_task(one_session(server, start, turns, tally)) for _ in range(n)]
            with contextlib.suppress(asyncio.BrokenBarrierError):
                await start.wait()
            cpu0, t0 = server.cpu_s(), time.perf_counter()
            for crashed in await asyncio.gather(*tasks, return_exceptions=True):
                if isinstance(crashed, BaseException):  # a bug of the bench's own: still counted
                    errors[f"bench: {error_kind(crashed)}"] += 1
            wall, cpu = time.perf_counter() - t0, server.cpu_s() - cpu0
            done = len(lat)
            p50, p99 = (pct(lat, 50), pct(lat, 99)) if lat else (float("nan"), float("nan"))
            target = f" (target ≤ {P50_TARGET_MS:.0f})" if n == 8 else ""
            cpu_ms = cpu * 1000 / max(1, done)
            print(f"{kind:<8} sessions={n:<3} turns={done} p50={p50:.1f} ms{target} p99={p99:.1f} ms "
                  f"turns/s={done / wall:.0f} (target ≥ {RATE_TARGET:.0f}) cpu/turn={cpu_ms:.2f} ms "
                  f"errors={sum(errors.values())} (target 0)", flush=True)  # fmt: skip
            print(f"  errors by kind: {by_kind(errors)}; refusals retried: {by_kind(retried)}", flush=True)


async def main(args: argparse.Namespace) -> None:
    kinds = await backends()
    with model_process() as model_url:
        for kind in kinds:
            await bench(kind, model_url, args.sessions, args.turns_per_session)
    if "postgres" not in kinds:
        print("postgres skipped (not reachable)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=lambda s: [int(x) for x in s.split(",")], default=[8, 32, 200])
    parser.add_argument("--turns-per-session", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="a tiny run (a few seconds)")
    ns = parser.parse_args()
    if ns.smoke:
        ns.sessions, ns.turns_per_session = [8], 2
    asyncio.run(main(ns))
