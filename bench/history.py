"""Does a request's cost grow with the session's history? (prints figures; no asserts)

    .venv/bin/python bench/history.py [--short 5] [--long 600] [--sessions 30] [--measure 300]
                                      [--chunk-gap-ms 0] [--smoke]

A real `agentd serve` subprocess (SQLite, OpenAI provider) against the fake streaming model
of bench/turnkit.py. For each turn kind (trivial: prompt → streamed answer; one-tool: prompt
→ read_file → second model call → answer) it builds real stored histories by running turns
through the server, then measures the server's CPU (utime + stime from /proc):

- short: `--sessions` sessions with `--short` turns of history each, one measured turn in
  each per round until `--measure` turns were measured (history short … short + rounds);
- long: one session with `--long` turns of history, then `--measure` measured turns in it.

Printed per kind: CPU per turn and per model request at both lengths and their ratio
(target: long ≤ 1.5 × short). The default context window (128k tokens) stays far above
these histories (≈ 10k tokens trivial, ≈ 40k one-tool at 600 turns), so no compaction runs;
the server's own estimate is printed to show it.

`--chunk-gap-ms` makes the fake model pause between chunks, as a real model streams. With no
pause its chunks reach the server bunched or apart depending on how long the fake itself took
to parse the request — which grows with the history — so on a loaded machine the server's
wake-ups per chunk, and with them its CPU, can follow the fake rather than the server (3
socket reads per turn at 5 turns, 10–11 at 600). A pause makes every chunk its own wake-up at
both lengths. Measure a few hundred turns: one full garbage collection (~90 ms) decides a
60-turn window.
"""

from __future__ import annotations

import argparse
import asyncio

from turn import new_sessions, run_turns
from turnkit import TOOL_MARK, Server, agentd_server, model_process

from tests.support.client import WsClient

RATIO_TARGET = 1.5


async def build(server: Server, client: WsClient, sids: list[str], text: str, turns: int) -> None:
    """`turns` turns of history in each session (round-robin: every session gets its turns)."""
    for _ in range(turns):
        await run_turns(server, client, sids, text, 1)


async def measure(
    server: Server, client: WsClient, sids: list[str], text: str, count: int
) -> tuple[float, int]:
    """(server CPU ms per turn, turns) over `count` turns spread over `sids` round-robin."""
    done = 0
    cpu = 0.0
    while done < count:
        batch = sids[: count - done]
        _, spent, _ = await run_turns(server, client, batch, text, 1)
        cpu += spent
        done += len(batch)
    return cpu * 1000 / done, done


async def bench(model_url: str, args: argparse.Namespace) -> None:
    async with agentd_server("sqlite", model_url) as server:
        client = await WsClient.connect(server.base)
        for label, text, calls in (("trivial", "hi", 1), ("one-tool", f"{TOOL_MARK} please", 2)):
            short_sids = await new_sessions(server, client, args.sessions)
            await build(server, client, short_sids, text, args.short)
            short_ms, n_short = await measure(server, client, short_sids, text, args.measure)
            long_sid = await new_sessions(server, client, 1)
            await build(server, client, long_sid, text, args.long)
            long_ms, n_long = await measure(server, client, long_sid, text, args.measure)
            ratio = long_ms / short_ms if short_ms else float("inf")
            verdict = "met" if ratio <= RATIO_TARGET else "not met"
            print(f"sqlite {label:<8} history={args.short} turns: cpu/turn={short_ms:.2f} ms "
                  f"cpu/request={short_ms / calls:.2f} ms ({n_short} turns) | "
                  f"history={args.long} turns: cpu/turn={long_ms:.2f} ms "
                  f"cpu/request={long_ms / calls:.2f} ms ({n_long} turns) | "
                  f"ratio={ratio:.2f} (target <= {RATIO_TARGET}: {verdict}) "
                  f"chunk gap {args.chunk_gap_ms:g} ms", flush=True)  # fmt: skip
        await client.close()


async def main(args: argparse.Namespace) -> None:
    with model_process(chunk_gap_ms=args.chunk_gap_ms) as model_url:
        await bench(model_url, args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--short", type=int, default=5, help="turns of history, short sessions")
    parser.add_argument("--long", type=int, default=600, help="turns of history, the long session")
    parser.add_argument("--sessions", type=int, default=30, help="short sessions")
    parser.add_argument("--measure", type=int, default=300, help="measured turns per length")
    parser.add_argument("--chunk-gap-ms", type=float, default=0.0, help="the fake's pause between chunks")
    parser.add_argument("--smoke", action="store_true", help="a tiny run (a few seconds)")
    ns = parser.parse_args()
    if ns.smoke:
        ns.short, ns.long, ns.sessions, ns.measure = 2, 12, 3, 6
    asyncio.run(main(ns))
