"""Cost of one warm turn through the whole server (prints figures; no asserts).

    .venv/bin/python bench/turn.py [--turns 300] [--per-session 10] [--long-session 200] [--smoke]
                               [--chunk-gap-ms 0]

A real `agentd serve` subprocess (SQLite, then a fresh Postgres database when reachable)
with the OpenAI provider pointed at a fake streaming model in its own process (real HTTP,
the Chat Completions wire format, no model delay; `--chunk-gap-ms G`: a pause of G ms
between chunks, as a real model streams — each chunk then costs the server a wake-up).
One WebSocket client prompts sessions turn after turn, `--per-session` turns each (a fresh
session every few turns: a turn's cost grows with the history it carries — `--long-session`
shows by how much):

- trivial turn: prompt → streamed text answer → end_turn;
- one-tool turn: prompt → read_file call → tool result → second model call → answer.

Reported per kind: server CPU per turn (user + system time of the server process from
/proc over the measured turns / turns), latency p50/p99 as the client sees it, the fake
model's own time (a direct streaming request, p50) and the server-added latency
(turn p50 − model calls × model p50); and per turn the WebSocket frames the client got
(the reply included), durable events appended and group commits (both from /metrics: all
sessions, but only this client's turns run). Targets: ≤ 3 ms CPU per trivial turn,
server-added p50 ≤ 3 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import time
import urllib.request

from turnkit import TOOL_MARK, Server, agentd_server, backends, model_process, model_time, pct

from tests.support.client import WsClient, text_prompt

CPU_TARGET_MS = 3.0
ADDED_TARGET_MS = 3.0


def counters(server: Server) -> tuple[float, float]:
    """(durable events appended, group commits) so far, from the server's /metrics."""
    with urllib.request.urlopen(f"{server.base}/metrics", timeout=10) as resp:
        text = resp.read().decode()

    def value(name: str) -> float:
        found = re.search(rf"^{name} (\S+)$", text, re.M)
        return float(found.group(1)) if found else float("nan")

    return value("agentd_events_total"), value("agentd_db_flush_seconds_count")


async def run_turns(
    server: Server, client: WsClient, sids: list[str], text: str, per_session: int
) -> tuple[list[float], float, int]:
    """`per_session` sequential turns in each session in turn; (latencies in s, server CPU s,
    frames the server sent)."""
    latencies = []
    frames = 0
    cpu0 = server.cpu_s()
    for sid in sids:
        for _ in range(per_session):
            t0 = time.perf_counter()
            result = await client.call("session/prompt", text_prompt(sid, text))
            latencies.append(time.perf_counter() - t0)
            if result.get("stopReason") != "end_turn":
                raise SystemExit(f"turn ended with {result}")
            while not client.notifications.empty():  # bounded: the figures need no updates
                client.notifications.get_nowait()
            frames += len(client.frames)
            client.frames.clear()
    return latencies, server.cpu_s() - cpu0, frames


async def new_sessions(server: Server, client: WsClient, n: int) -> list[str]:
    new = {"cwd": str(server.workspace), "mcpServers": []}
    return [(await client.call("session/new", new))["sessionId"] for _ in range(n)]


async def bench(kind: str, model_url: str, model_p50_ms: float, args: argparse.Namespace) -> None:
    async with agentd_server(kind, model_url) as server:
        client = await WsClient.connect(server.base)
        for label, text, calls in (("trivial", "hi", 1), ("one-tool", f"{TOOL_MARK} please", 2)):
            # A turn's cost grows with the session's history (every request carries it):
            # fresh sessions every `per_session` turns keep the figure about a short session.
            sids = await new_sessions(server, client, -(-args.turns // args.per_session))
            await run_turns(server, client, sids, text, 1)  # warm: each session loaded, once prompted
            events0, commits0 = counters(server)
            lat, cpu, frames = await run_turns(server, client, sids, text, args.per_session)
            turns = len(lat)
            events1, commits1 = counters(server)
            cpu_ms = cpu * 1000 / turns
            added = statistics.median(lat) * 1000 - calls * model_p50_ms
            target = f" (target ≤ {CPU_TARGET_MS:.0f})" if label == "trivial" else ""
            added_target = f" (target ≤ {ADDED_TARGET_MS:.0f})" if label == "trivial" else ""
            print(f"{kind:<8} {label:<8} turns={turns} cpu/turn={cpu_ms:.2f} ms{target} "
                  f"p50={pct(lat, 50):.2f} ms p99={pct(lat, 99):.2f} ms "
                  f"server-added p50={added:.2f} ms{added_target}", flush=True)  # fmt: skip
            print(f"{'':<8} {label:<8} per turn: frames sent={frames / turns:.1f} "
                  f"durable events={(events1 - events0) / turns:.1f} "
                  f"group commits={(commits1 - commits0) / turns:.2f}", flush=True)  # fmt: skip
        if args.long_session:
            sid = (await new_sessions(server, client, 1))[0]
            lat, cpu, _ = await run_turns(server, client, [sid], "hi", args.long_session)
            print(f"{kind:<8} one session, {args.long_session} trivial turns: "
                  f"cpu/turn={cpu * 1000 / len(lat):.2f} ms, first 10 p50={pct(lat[:10], 50):.2f} ms, "
                  f"last 10 p50={pct(lat[-10:], 50):.2f} ms", flush=True)  # fmt: skip
        await client.close()


async def main(args: argparse.Namespace) -> None:
    kinds = await backends()
    with model_process(chunk_gap_ms=args.chunk_gap_ms) as model_url:
        model = await model_time(model_url, args.turns)
        model_p50 = pct(model, 50)
        print(f"fake model alone: p50={model_p50:.2f} ms p99={pct(model, 99):.2f} ms (one streamed answer)")
        for kind in kinds:
            await bench(kind, model_url, model_p50, args)
    if "postgres" not in kinds:
        print("postgres skipped (not reachable)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--per-session", type=int, default=10, help="turns per fresh session")
    parser.add_argument("--long-session", type=int, default=200, help="then this many in one session")
    parser.add_argument("--smoke", action="store_true", help="a tiny run (a few seconds)")
    parser.add_argument("--chunk-gap-ms", type=float, default=0.0, help="the fake's pause between chunks")
    ns = parser.parse_args()
    if ns.smoke:
        ns.turns, ns.per_session, ns.long_session = 6, 3, 0
    asyncio.run(main(ns))
