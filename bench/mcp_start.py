"""How long `session/new` waits for its MCP servers (prints figures; no asserts).

    .venv/bin/python bench/mcp_start.py [--delay 1.0] [--servers 4] [--smoke]

Each stdio server (the tests' calculator) sleeps `--delay` seconds before it serves, as a
server that loads a model or an index does. Measured through a real server and a real
WebSocket client: `session/new` with one such server, with `--servers` of them (started
in parallel: about the time of one; one after another it would be their sum), and with
those plus one that never answers and a start timeout of 2 × delay (bounded by it).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentd.app import create_app
from agentd.embedded import serve_in_background
from agentd.infra.config import ProviderName, Settings
from agentd.providers.scripted import ScriptedProvider
from tests.support.client import WsClient
from tests.support.mcp import calc_stdio


async def session_new(client: WsClient, ws: Path, servers: list[dict[str, Any]]) -> float:
    started = time.perf_counter()
    await client.call("session/new", {"cwd": str(ws), "mcpServers": servers})
    return time.perf_counter() - started


async def main(delay: float, count: int, runs: int, hanging: bool) -> None:
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp_dir:
        tmp = Path(tmp_dir)
        ws = tmp / "ws"
        ws.mkdir()
        settings = Settings(
            home=tmp, database_url=f"sqlite+aiosqlite:///{tmp / 'bench.db'}", provider=ProviderName.SCRIPTED,
            rate_limit_per_s=0, max_sessions_per_principal=0,
        )  # fmt: skip
        provider = ScriptedProvider.from_dict({"loop": True, "steps": [{"text": "ok"}]})
        slow = [calc_stdio("--slow-start", str(delay), name=f"s{i}") for i in range(count)]
        hang = calc_stdio("--hang", name="hang", start_timeout=2 * delay)
        cases = {
            "1 server": slow[:1],
            f"{count} servers": slow,
            f"{count} servers + 1 hanging": [*slow, hang],
        }
        if not hanging:  # (a build from before the per-server timeout fails session/new on it)
            del cases[f"{count} servers + 1 hanging"]
        async with serve_in_background(create_app(settings, provider=provider)) as base:
            client = await WsClient.connect(base)
            await session_new(client, ws, [calc_stdio(name="warm")])  # imports, caches
            medians = {}
            for label, servers in cases.items():
                times = [await session_new(client, ws, servers) for _ in range(runs)]
                medians[label] = statistics.median(times)
                print(f"session/new {label:<24} median {medians[label] * 1000:6.0f} ms  (runs={runs})")
            await client.close()
        one, many = medians["1 server"], medians[f"{count} servers"]
        serial = count * delay * 1000
        print(f"delay per server: {delay * 1000:.0f} ms; serially {count} would take >= {serial:.0f} ms")
        print(f"{count} servers / 1 server: {many / one:.2f}x  (parallel: ~1x; serial: ~{count}x)")
        if hanging:
            with_hang = medians[f"{count} servers + 1 hanging"] * 1000
            print(f"with a hanging server (start timeout {2 * delay * 1000:.0f} ms): {with_hang:.0f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--servers", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--without-hanging", action="store_true", help="skip the hanging server's case")
    parser.add_argument("--smoke", action="store_true", help="one short run (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.delay, args.servers, args.runs = 0.3, 3, 1
    asyncio.run(main(args.delay, args.servers, args.runs, not args.without_hanging))
