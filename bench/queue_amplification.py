"""What a full prompt queue costs, end to end over a real socket (prints figures; no asserts).

    .venv/bin/python bench/queue_amplification.py [--prompts 60] [--kib 1024]

One session runs a long turn while `--prompts` prompts of `--kib` KiB each are enqueued,
then each is edited once, then the queue is cleared. Reports the database file's growth,
the bytes of `queue_update` events received, the resident memory, and the enqueue
round-trip (each answer waits for its commit).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentd.app import create_app
from agentd.embedded import serve_in_background
from agentd.infra.config import ProviderName, Settings
from agentd.providers.scripted import ScriptedProvider
from tests.support.client import WsClient, text_prompt


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def db_mib(tmp: Path) -> float:
    return sum(p.stat().st_size for p in tmp.glob("bench.db*")) / 2**20


async def main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="agentd-bench-"))
    workspace = tmp / "ws"
    workspace.mkdir()
    provider = ScriptedProvider.from_dict({"steps": [{"text": "working", "delay": 3600}]})
    size = args.kib * 1024
    settings = Settings(
        home=tmp, database_url=f"sqlite+aiosqlite:///{tmp / 'bench.db'}", provider=ProviderName.SCRIPTED,
        rate_limit_per_s=0, max_prompt_bytes=size, max_queue_length=0,
        max_queued_bytes_per_session=0, max_queued_bytes_per_principal=0, max_frame_bytes=2 * size + 65536,
    )  # fmt: skip
    app = create_app(settings, provider=provider)
    async with serve_in_background(app) as base:
        client = await WsClient.connect(base)
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        running = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "long job")))
        await client.wait_notification(
            lambda m: m["method"] == "_agentd/event" and m["params"]["kind"] == "turn_started"
        )
        events, event_bytes = 0, 0

        def count_events() -> None:
            # Counted and dropped as they come: the client's memory stays out of the figures.
            nonlocal events, event_bytes
            for f in client.frames:
                if f.get("method") == "_agentd/event" and f["params"]["kind"] == "queue_update":
                    events += 1
                    event_bytes += len(json.dumps(f))
            client.frames.clear()

        gc.collect()
        db_before, rss_before = db_mib(tmp), rss_mib()
        ids, rtts = [], []
        for i in range(args.prompts):
            text = f"{i:04d}" + "x" * (size - 4)
            started = time.perf_counter()
            ack = await client.call("_agentd/prompt/enqueue", text_prompt(sid, text))
            rtts.append(time.perf_counter() - started)
            ids.append(ack["promptId"])
            count_events()
        for pid in ids:
            edit = {"sessionId": sid, "id": pid, "expectedVersion": 1, "text": "e" + "y" * (size - 1)}
            await client.call("_agentd/queue/edit", edit)
            count_events()
        db_full, rss_full = db_mib(tmp), rss_mib()
        await client.call("_agentd/queue/clear", {"sessionId": sid})
        await client.notify("session/cancel", {"sessionId": sid})
        await running
        count_events()
        gc.collect()
        print(f"{args.prompts} prompts of {args.kib} KiB, each edited once, then cleared")
        print(f"  database growth while queued: {db_full - db_before:8.1f} MiB")
        print(f"  database after clear:         {db_mib(tmp) - db_before:8.1f} MiB")
        print(f"  queue_update events:          {events:8d}  ({event_bytes / 2**20:.1f} MiB in all)")
        print(f"  resident memory growth:       {rss_full - rss_before:8.1f} MiB while queued,")
        print(f"                                {rss_mib() - rss_before:8.1f} MiB after clear")
        print(f"  enqueue round trip (median):  {statistics.median(rtts) * 1000:8.1f} ms")
        await client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=60)
    parser.add_argument("--kib", type=int, default=1024)
    asyncio.run(main(parser.parse_args()))
