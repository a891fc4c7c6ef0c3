"""Fairness by cost (issue 28 item 4): while principal A floods a real `agentd serve` with
the largest prompts it accepts, how long do principal B's trivial turns and `/healthz` take?
(prints figures; no asserts)

    .venv/bin/python bench/fairness.py [--seconds 8] [--flooders 3] [--smoke]

One run, three phases, each on a fresh server process (SQLite, scripted model, tokens on):

- baseline: no flood — B prompts turn after turn, a probe GETs /healthz every 50 ms;
- flood: A's `--flooders` WebSocket connections send, back to back, the worst-case valid
  prompt under the defaults (AGENTD_MAX_PROMPT_BLOCKS blocks of 1,000 characters: just under
  AGENTD_MAX_PROMPT_BYTES) — each refusal answered at once, the next sent;
- flood, no cost limits (AGENTD_MAX_PROMPT_BLOCKS=0, AGENTD_RATE_LIMIT_PER_S=0): the issue's
  shape, 50,000 one-character blocks per prompt from one connection, as before this change.

Per phase: B's turns (n, p50, p99, max), /healthz (p50, p99, max), A's prompts accepted and
refused (by `data.limit`); then B's and /healthz's p99 side by side (flood / baseline). The
target: with the defaults, both p99 ≤ 1 s while A floods.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

from agentd.infra.auth import create_token  # noqa: E402
from agentd.store.db import Store  # noqa: E402
from tests.support.client import WsClient  # noqa: E402

TARGET_S = 1.0
PROBE_EVERY_S = 0.05


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Server:
    def __init__(self, home: Path, **settings: str) -> None:
        self.home = home
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.db = f"sqlite+aiosqlite:///{home / 'agentd.db'}"
        self.ws_root = home / "ws"
        self.settings = settings
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> Server:
        for principal in ("a", "b"):
            (self.ws_root / principal).mkdir(parents=True, exist_ok=True)
        script = self.home / "script.json"
        script.write_text(json.dumps({"loop": True, "steps": [{"text": "ok"}]}))
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
        env.update(
            HOME=str(self.home), AGENTD_HOME=str(self.home / "agentd"), AGENTD_AUTH="token",
            AGENTD_PORT=str(self.port), AGENTD_DATABASE_URL=self.db, AGENTD_PROVIDER="scripted",
            AGENTD_SCRIPT=str(script), AGENTD_WORKSPACE_ROOT=str(self.ws_root),
            **{f"AGENTD_{k.upper()}": v for k, v in self.settings.items()},
        )  # fmt: skip
        exe = Path(sys.executable).with_name("agentd")
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "agentd.cli"]
        log = (self.home / "serve.log").open("wb")
        self.proc = await asyncio.create_subprocess_exec(
            *cmd, "serve", "--log-level", "warning", env=env, stdout=log, stderr=log, start_new_session=True
        )
        log.close()
        async with httpx.AsyncClient() as http:
            for _ in range(600):
                try:
                    if (await http.get(f"{self.base}/healthz", timeout=2)).status_code == 200:
                        return self
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.05)
        raise SystemExit(f"agentd serve never became healthy; see {self.home / 'serve.log'}")

    async def __aexit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.returncode is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # a stalled server would drain for long
            await self.proc.wait()

    async def tokens(self) -> tuple[str, str]:
        store = await Store.open(self.db)
        try:
            a, _ = await create_token(store, "a")
            b, _ = await create_token(store, "b")
            return a, b
        finally:
            await store.close()


async def phase(
    name: str, seconds: float, flooders: int, flood_blocks: int, block_size: int, **settings: str
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="agentd-fairness-") as tmp:
        async with Server(Path(tmp), **settings) as server:
            token_a, token_b = await server.tokens()
            canary = await WsClient.connect(server.base, token=token_b)
            sid_b = (await canary.call("session/new", {"cwd": str(server.ws_root / "b"), "mcpServers": []}))[
                "sessionId"
            ]
            flooding = [await WsClient.connect(server.base, token=token_a) for _ in range(flooders)]
            sid_a = ""
            if flooding:
                new = {"cwd": str(server.ws_root / "a"), "mcpServers": []}
                sid_a = (await flooding[0].call("session/new", new))["sessionId"]
            prompt = {
                "sessionId": sid_a,
                "prompt": [{"type": "text", "text": "x" * block_size}] * flood_blocks,
            }
            outcomes: collections.Counter[str] = collections.Counter()
            stop = asyncio.Event()

            async def flood(client: WsClient) -> None:
                while not stop.is_set():
                    try:
                        answer = await client.request("_agentd/prompt/enqueue", prompt)
                    except (TimeoutError, ConnectionClosed):
                        outcomes["no answer"] += 1
                        return
                    if "error" in answer:
                        outcomes[
                            str((answer["error"].get("data") or {}).get("limit", answer["error"]["code"]))
                        ] += 1
                    else:
                        outcomes["accepted"] += 1

            health: list[float] = []

            async def probe() -> None:
                async with httpx.AsyncClient(base_url=server.base, timeout=60) as http:
                    while not stop.is_set():
                        began = time.perf_counter()
                        try:
                            await http.get("/healthz")
                        except httpx.HTTPError:
                            return
                        health.append(time.perf_counter() - began)
                        await asyncio.sleep(PROBE_EVERY_S)

            tasks = [asyncio.create_task(flood(c)) for c in flooding]
            tasks.append(asyncio.create_task(probe()))
            turns: list[float] = []
            deadline = time.perf_counter() + seconds
            i = 0
            while time.perf_counter() < deadline:
                began = time.perf_counter()
                text = {"sessionId": sid_b, "prompt": [{"type": "text", "text": f"hi {i}"}]}
                try:
                    answer = await canary.request("session/prompt", text)
                except TimeoutError:  # WsClient waits 60 s: the server is stalled
                    turns.append(time.perf_counter() - began)
                    outcomes["B timed out"] += 1
                    break
                turns.append(time.perf_counter() - began)
                if "error" in answer:
                    outcomes["B refused"] += 1
                i += 1
            stop.set()
            for task in tasks:
                task.cancel()  # a flood's request may be stuck behind the stall
            await asyncio.gather(*tasks, return_exceptions=True)
            for client in (canary, *flooding):
                await client.close()
    return {"name": name, "turns": turns, "health": health, "outcomes": outcomes}


def report(r: dict[str, Any]) -> None:
    t, h = r["turns"], r["health"]
    print(
        f"{r['name']:<22} B turns n={len(t):<4} p50={statistics.median(t) * 1000:7.1f} ms "
        f"p99={pct(t, 0.99) * 1000:7.1f} ms max={max(t) * 1000:7.1f} ms | "
        f"/healthz n={len(h):<4} p50={statistics.median(h) * 1000:6.1f} ms p99={pct(h, 0.99) * 1000:7.1f} ms "
        f"max={max(h) * 1000:7.1f} ms"
    )
    if r["outcomes"]:
        counts = ", ".join(f"{k}={v}" for k, v in sorted(r["outcomes"].items()))
        print(f"{'':<22} A's prompts: {counts}")


async def main(args: argparse.Namespace) -> None:
    seconds = 2.0 if args.smoke else args.seconds
    flooders = 1 if args.smoke else args.flooders
    results = [
        await phase("baseline", seconds, 0, 0, 0),
        await phase("flood (defaults)", seconds, flooders, 1000, 1000),
    ]
    if not args.smoke:
        results.append(
            await phase(
                "flood, no cost limits",
                seconds,
                1,  # one is enough to stall it (the issue: fifteen back to back)
                50_000,
                1,
                max_prompt_blocks="0",
                rate_limit_per_s="0",
            )
        )
    for r in results:
        report(r)
    base = results[0]
    b0, h0 = pct(base["turns"], 0.99), pct(base["health"], 0.99)
    for r in results[1:]:
        b99, h99 = pct(r["turns"], 0.99), pct(r["health"], 0.99)
        verdict = "met" if max(b99, h99) <= TARGET_S else "NOT met"
        print(
            f"side by side: {r['name']}: B p99 {b99 * 1000:.1f} ms vs {b0 * 1000:.1f} ms (x{b99 / b0:.1f}), "
            f"/healthz p99 {h99 * 1000:.1f} ms vs {h0 * 1000:.1f} ms (x{h99 / h0:.1f}); "
            f"target <= {TARGET_S:g} s: {verdict}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--flooders", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="a short run (CI)")
    asyncio.run(main(parser.parse_args()))
