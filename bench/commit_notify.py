"""What the NOTIFY in the Postgres group commit costs (R-C1, issue 15 item 2; prints figures).

    .venv/bin/python bench/commit_notify.py [--rounds 12] [--commits 100] [--sessions 1,32]

The one-statement commit ends with `SELECT pg_notify('agentd_events', …)` per session
(agentd/store/pg_commit.py). This runs the very statement with and without that part, in
alternating rounds of `--commits` commits on one connection (each commit: one event for
each of `--sessions` sessions), and prints the median with/without time ratio — an A/B
ratio on the same connection and database, less noisy than absolute timings on a shared
machine. Without: the same CTEs, the sessions' `updated_at` UPDATE as the main statement
(the statement before this change).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg

from agentd.store import pg_commit
from agentd.store.db import Batch, Store, StoredEvent
from bench.commit import database


def without_notify(statement: str) -> str:
    head, _, _ = statement.rpartition("\nSELECT pg_notify")
    return head.replace(", touch AS (\n  UPDATE", "\nUPDATE").removesuffix("\n)")


def backend_cpu(pid: int) -> float:
    """The Postgres backend's CPU seconds so far (a local server; 0 when unreadable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _summary(what: str, ratios: list[float]) -> str:
    return f"{what} ratio median {statistics.median(ratios):.3f} ({min(ratios):.2f}..{max(ratios):.2f})"


async def main(args: argparse.Namespace) -> None:
    counts = [int(n) for n in args.sessions.split(",")]
    async with database("postgres") as url:
        store = await Store.open(url)
        await store.migrate()
        sids = [f"s{i}" for i in range(max(counts))]
        for sid in sids:
            await store.create_session(id=sid, owner="o", cwd="/w", mode="default", model="m")
        await store.close()
        conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
        seq = dict.fromkeys(sids, 0)
        backend = int(await conn.fetchval("SELECT pg_backend_pid()"))

        async def commit(n: int, notify: bool) -> None:
            batches = []
            for sid in sids[:n]:
                seq[sid] += 1
                batches.append(
                    Batch(sid, events=[StoredEvent(seq[sid], "agent_message", {"text": "x" * 160})])
                )
            one = pg_commit.one_statement(batches, datetime.now(UTC))
            assert one is not None
            sql, params = one
            await conn.execute(sql if notify else without_notify(sql), *params)

        print(f"python {sys.version.split()[0]}, {args.rounds} rounds of {args.commits} commits per variant")
        for n in counts:
            ratios: list[float] = []
            cpu_ratios: list[float] = []
            cpu_with: list[float] = []
            for r in range(args.rounds):
                took: dict[bool, float] = {}
                cpu: dict[bool, float] = {}
                for notify in (r % 2 == 0, r % 2 == 1):  # alternate which goes first
                    started, cpu_started = time.perf_counter(), backend_cpu(backend)
                    for _ in range(args.commits):
                        await commit(n, notify)
                    took[notify] = time.perf_counter() - started
                    cpu[notify] = backend_cpu(backend) - cpu_started
                ratios.append(took[True] / took[False])
                if cpu[False] > 0:
                    cpu_ratios.append(cpu[True] / cpu[False])
                    cpu_with.append(cpu[True] - cpu[False])
            print(f"sessions/commit={n:<4} with/without NOTIFY: {_summary('wall time', ratios)}")
            if cpu_ratios:
                extra = statistics.median(cpu_with) / args.commits * 1e6
                cpu_line = _summary("backend CPU", cpu_ratios)
                print(f"{'':21}with/without NOTIFY: {cpu_line}, {extra:+.0f} µs/commit")
        await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--sessions", default="1,32", help="sessions per commit (comma list)")
    asyncio.run(main(parser.parse_args()))
