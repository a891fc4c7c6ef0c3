"""What the sandbox's own network namespace and egress proxy cost (issue 28, item 1)
(prints figures; no asserts).

    .venv/bin/python bench/sandbox_network.py [--runs 30]

Runs `true` through the real `bash` tool with the launcher the server builds, unconfined,
under bubblewrap with the network off (its own namespace, no way out) and on (the same,
plus the per-command egress proxy and the bridge started inside before the command), and
prints start-to-end latency p50/p90 per mode with ratios to unconfined. Then, with the
network on, the time to fetch a small HTTP answer from a loopback server allowed by
AGENTD_SANDBOX_EGRESS_ALLOW through the proxy (bridge → Unix socket → proxy → server)
against fetching it directly outside the sandbox.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from agentd.infra.config import SandboxNetwork, SandboxSetting, Settings
from agentd.tools.base import ToolContext
from agentd.tools.shell.bash import Bash
from agentd.tools.shell.launch import ShellLauncher


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def timed(shell: ShellLauncher, ws: Path, command: str, runs: int) -> list[float]:
    bash = Bash(shell)
    ctx = ToolContext(cwd=ws, session_id="bench")
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        result = await bash.run({"command": command, "timeout": 60}, ctx)
        out.append((time.perf_counter() - start) * 1000)
        if result.is_error:
            raise SystemExit(f"{command!r} failed: {result.output}")
    return out


async def origin() -> tuple[asyncio.Server, int]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    if shutil.which("bwrap") is None:
        raise SystemExit("bubblewrap is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        home, ws = Path(tmp) / "home", Path(tmp) / "ws"
        home.mkdir()
        ws.mkdir()
        server, port = await origin()
        base = {"home": home, "sandbox_egress_allow": [f"127.0.0.1:{port}"]}
        modes = {
            "unconfined": Settings(**base, sandbox=SandboxSetting.NONE),
            "bwrap, network off": Settings(
                **base, sandbox=SandboxSetting.BWRAP, sandbox_network=SandboxNetwork.OFF
            ),
            "bwrap, network on (proxy)": Settings(**base, sandbox=SandboxSetting.BWRAP),
        }
        shells = {name: ShellLauncher.from_settings(s) for name, s in modes.items()}
        print(f"`true` through the bash tool, {args.runs} runs each (ms)")
        first = None
        for name, shell in shells.items():
            times = await timed(shell, ws, "true", args.runs)
            p50 = statistics.median(times)
            first = first or p50
            print(
                f"  {name:28} p50 {p50:7.1f}  p90 {pct(times, 0.9):7.1f}  ×{p50 / first:5.2f} of unconfined"
            )
        get = f"urlopen('http://127.0.0.1:{port}/', timeout=10).read()"
        fetch = f'{sys.executable} -I -c "from urllib.request import urlopen; {get}"'
        via = "from urllib.request import build_opener as b, ProxyHandler as P; urlopen = b(P()).open"
        proxied = f'{sys.executable} -I -c "{via}; {get}"'  # the proxy from HTTP_PROXY
        direct = await timed(shells["unconfined"], ws, fetch, args.runs)
        through = await timed(shells["bwrap, network on (proxy)"], ws, proxied, args.runs)
        print("a small HTTP fetch from a loopback server, including the interpreter's start (ms)")
        print(f"  unconfined, direct           p50 {statistics.median(direct):7.1f}")
        ratio = statistics.median(through) / statistics.median(direct)
        print(f"  bwrap, through the proxy     p50 {statistics.median(through):7.1f}  ×{ratio:5.2f}")
        server.close()


if __name__ == "__main__":
    asyncio.run(main())
