"""Server overhead, measured end to end over real sockets (prints figures; no asserts).

    .venv/bin/python bench/server_overhead.py [--clients 10] [--chunks 2000] [--sessions 500]

- streaming: one prompt whose answer streams `--chunks` deltas with no model latency
  (scripted provider), watched by `--clients` WebSocket clients; reports chunks/s
  delivered to every client and the time until the last client has the whole answer;
- event log: durable events committed per second and the group-commit latency;
- sessions: resident memory per idle, loaded session (`--sessions` of them).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prometheus_client.parser import text_string_to_metric_families

from agentd.app import create_app
from agentd.embedded import serve_in_background
from agentd.infra.config import PermissionMode, ProviderName, Settings
from agentd.providers.scripted import ScriptedProvider
from tests.support.client import WsClient, text_prompt


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="agentd-bench-"))
    workspace = tmp / "ws"
    workspace.mkdir()
    # Distinct words, one per delta: a repeated string would trip the repetition detector.
    text = "".join(f"w{i:05d} " for i in range(args.chunks))
    provider = ScriptedProvider.from_dict({"loop": True, "steps": [{"text": text, "chunk_size": 7}]})
    settings = Settings(
        home=tmp, database_url=f"sqlite+aiosqlite:///{tmp / 'bench.db'}", provider=ProviderName.SCRIPTED,
        permission_mode=PermissionMode.BYPASS, rate_limit_per_s=0, max_sessions_per_principal=0,
    )  # fmt: skip
    app = create_app(settings, provider=provider)
    async with serve_in_background(app) as base:
        driver = await WsClient.connect(base)
        sid = (await driver.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        watchers = [await WsClient.connect(base) for _ in range(args.clients)]
        for w in watchers:
            await w.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})

        def received(c: WsClient) -> int:
            return sum(
                len(u["content"]["text"])
                for u in c.updates(sid)
                if u["sessionUpdate"] == "agent_message_chunk"
            )

        started = time.perf_counter()
        await driver.call("session/prompt", text_prompt(sid, "stream"))
        answered = time.perf_counter() - started
        while not all(received(w) >= len(text) for w in watchers):  # noqa: ASYNC110 - polls clients
            await asyncio.sleep(0.001)
        everyone = time.perf_counter() - started
        print(f"streaming: {args.chunks} chunks to {args.clients + 1} clients")
        print(f"  prompt answered after {answered * 1000:.0f} ms;", end=" ")
        print(f"last client complete after {everyone * 1000:.0f} ms")
        print(f"  {args.chunks * (args.clients + 1) / everyone:,.0f} chunk deliveries/s")

        async with __import__("httpx").AsyncClient(base_url=base) as http:
            metrics = (await http.get("/metrics")).text
        values = {
            s.name: s.value
            for f in text_string_to_metric_families(metrics)
            for s in f.samples
            if not s.labels
        }
        commits = values.get("agentd_db_flush_seconds_count", 0)
        if commits:
            mean = values["agentd_db_flush_seconds_sum"] / commits
            print(f"event log: {values['agentd_events_total']:.0f} durable events in {commits:.0f} commits, "
                  f"mean commit {mean * 1000:.2f} ms")  # fmt: skip
        lags = values.get("agentd_event_fanout_lag_seconds_count", 0)
        if lags:
            lag = values["agentd_event_fanout_lag_seconds_sum"] / lags
            print(f"  mean submit→delivery lag {lag * 1000:.2f} ms")

        before = rss_mib()
        t0 = time.perf_counter()
        per = []
        for _ in range(args.sessions):
            s = time.perf_counter()
            await driver.call("session/new", {"cwd": str(workspace), "mcpServers": []})
            per.append(time.perf_counter() - s)
        after = rss_mib()
        print(f"sessions: {args.sessions} created in {time.perf_counter() - t0:.2f} s "
              f"(median {statistics.median(per) * 1000:.1f} ms each)")  # fmt: skip
        per_session = (after - before) * 1024 / args.sessions
        print(f"  resident memory {before:.0f} → {after:.0f} MiB: {per_session:.1f} KiB per idle session")
        for c in [driver, *watchers]:
            await c.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--sessions", type=int, default=500)
    asyncio.run(main(parser.parse_args()))
