"""Resident memory after a sustained load (issue 32, item 3; prints figures; no asserts).

    .venv/bin/python bench/rss_after_load.py [--sessions 100] [--prompts 5000] [--watch 60] [--smoke]

A real `agentd serve` (OpenAI provider against the fake streaming model in its own process,
as bench/turn.py; SQLite, then Postgres when reachable). Its RSS is read idle (healthy, no
session yet), then `--sessions` sessions on their own WebSockets send `--prompts` trivial
prompts in all, back to back, and close; RSS is read at the load's end and every 5 s for
`--watch` seconds after it. Target: back to ≤ 1.2× the idle figure within a minute. Also
read after one session's first turn, before the load: the part of the gap that is imports.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import urllib.error
import urllib.request
from pathlib import Path

from turnkit import agentd_server, backends, model_process

from tests.support.client import WsClient, text_prompt

TARGET = 1.2
STEP_S = 5.0


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def wait_ready(base: str, timeout_s: float = 120.0) -> None:
    url = base.replace("ws://", "http://").split("/acp")[0].rstrip("/") + "/readyz"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)  # polling a server in another process (a bench, not a test)
    raise RuntimeError(f"{url}: not ready after {timeout_s:.0f} s")


async def one_session(base: str, workspace: Path, prompts: int, sids: list[str] | None = None) -> int:
    """Returns the number of failed prompts (the session's id goes to `sids`)."""
    client = await WsClient.connect(base)
    failed = 0
    try:
        sid = (await client.call_retrying("session/new", {"cwd": str(workspace), "mcpServers": []}))[
            "sessionId"
        ]
        if sids is not None:
            sids.append(sid)
        for _ in range(prompts):
            result = await client.call_retrying("session/prompt", text_prompt(sid, "hi"))
            failed += result.get("stopReason") != "end_turn"
            while not client.notifications.empty():  # bounded: the figures need no updates
                client.notifications.get_nowait()
            client.frames.clear()
    finally:
        await client.close()
    return failed


async def bench(kind: str, model_url: str, sessions: int, prompts: int, watch_s: float, evict: str) -> None:
    prelude = f"import os; os.environ['AGENTD_IDLE_EVICT_S'] = {evict!r}" if evict else ""
    async with agentd_server(kind, model_url, prelude=prelude) as server:
        # /healthz answers before the app has loaded (agentd/serve.py): idle is read once
        # /readyz says it has, then start-up garbage settles.
        await asyncio.to_thread(wait_ready, server.base)
        await asyncio.sleep(1.0)
        idle = rss_mib(server.pid)
        # One session's first turn: what it imports (the turn machinery, the provider's HTTP
        # client, the wire models) stays for the server's life; the load's own share is what
        # comes on top of this figure (issue 32 item 3: the two parts of the after-load gap).
        await one_session(server.base, server.workspace, 1)
        await asyncio.sleep(1.0)
        warm = rss_mib(server.pid)
        print(f"{kind:<8} idle {idle:.1f} MiB; after one session's first turn {warm:.1f} MiB "
              f"(+{warm - idle:.1f}: its imports, and that session)", flush=True)  # fmt: skip
        per = max(1, prompts // sessions)
        t0 = time.perf_counter()
        sids: list[str] = []
        failed = await asyncio.gather(
            *(one_session(server.base, server.workspace, per, sids) for _ in range(sessions))
        )
        wall = time.perf_counter() - t0
        end = rss_mib(server.pid)
        print(f"{kind:<8} idle {idle:.1f} MiB; {sessions} sessions x {per} prompts in {wall:.0f} s "
              f"({sum(failed)} failed); at the end {end:.1f} MiB = {end / idle:.2f}x idle",
              flush=True)  # fmt: skip
        readings = []
        waited = 0.0
        while waited < watch_s:
            await asyncio.sleep(STEP_S)  # a reading every STEP_S: the figure is the curve
            waited += STEP_S
            now = rss_mib(server.pid)
            readings.append(f"{waited:.0f}s {now:.1f}")
        last = rss_mib(server.pid)
        print(f"  after the load (s, MiB): {', '.join(readings)}", flush=True)
        print(
            f"  {watch_s:.0f} s after: {last:.1f} MiB = {last / idle:.2f}x idle (target <= {TARGET}x); "
            f"{last / warm:.2f}x the figure after the first turn",
            flush=True,
        )
        await reloads(server.base, server.workspace, sids[:RELOADS], per)


RELOADS = 10


async def reloads(base: str, workspace: Path, sids: list[str], turns: int) -> None:
    """`session/resume` of sessions the load left (unloaded by then, if the server evicts
    detached sessions: each resume reloads one from the store), one after another."""
    client = await WsClient.connect(base)
    took = []
    try:
        for sid in sids:
            t0 = time.perf_counter()
            await client.call_retrying(
                "session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
            )
            took.append((time.perf_counter() - t0) * 1000)
            await client.call("_agentd/session/detach", {"sessionId": sid})
    finally:
        await client.close()
    took.sort()
    print(f"  session/resume of {len(took)} sessions of {turns} turns each: median "
          f"{took[len(took) // 2]:.1f} ms, max {took[-1]:.1f} ms", flush=True)  # fmt: skip


async def main(args: argparse.Namespace) -> None:
    kinds = await backends()
    with model_process() as model_url:
        for kind in kinds:
            await bench(kind, model_url, args.sessions, args.prompts, args.watch, args.idle_evict)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--prompts", type=int, default=5000, help="prompts in all, spread over the sessions")
    parser.add_argument("--watch", type=float, default=60.0, help="seconds to watch RSS after the load")
    parser.add_argument("--idle-evict", default="", help="AGENTD_IDLE_EVICT_S (default: its own)")
    parser.add_argument("--smoke", action="store_true", help="a tiny run")
    ns = parser.parse_args()
    if ns.smoke:
        ns.sessions, ns.prompts, ns.watch = 4, 8, 5.0
    asyncio.run(main(ns))
