"""The event log's group commit under load (prints figures; no asserts).

    .venv/bin/python bench/commit.py [--sessions 1,32,200] [--windows 1,16] [--seconds 3]
                                     [--db sqlite,postgres] [--smoke]

Each of N writing sessions streams durable events through the real `EventWriter` into a
real store (SQLite file in WAL mode, or a fresh Postgres database), keeping up to `window`
events in flight: 1 = each session waits for its event's delivery before the next (the
latency case), 16 = sessions streaming faster than the disk (the throughput case). Every
`--message-every`th event also writes a conversation message, as a turn does. Reported:

- durable events/s: events committed and delivered per second;
- commit p50/p99: the duration of one group-commit transaction;
- deliver p99: from `submit()` to the event's delivery (after its commit, R-E2);
- cpu µs/event: the process's CPU time per event (less noisy on a shared machine).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg
import turnkit

from agentd.core import AgentText, Event
from agentd.session.eventlog.writer import EventWriter
from agentd.store.db import Store

PG_ADMIN_DSN = os.environ.get("AGENTD_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
PAYLOAD = AgentText("m-0000", "x" * 160)  # about the size of a message chunk event


class TimedStore(Store):
    """The store, timing each group commit."""

    commit_s: list[float]

    async def commit(self, batches: list) -> None:  # type: ignore[type-arg]
        started = time.perf_counter()
        await super().commit(batches)
        self.commit_s.append(time.perf_counter() - started)


@asynccontextmanager
async def database(kind: str) -> AsyncIterator[str]:
    if kind == "sqlite":
        tmp = Path(tempfile.mkdtemp(prefix="agentd-commit-"))
        yield f"sqlite+aiosqlite:///{tmp / 'bench.db'}"
        return
    async with turnkit.postgres_database() as url:
        yield url


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(kind: str, sessions: int, window: int, args: argparse.Namespace) -> None:
    async with database(kind) as url:
        base = await Store.open(url)
        store = TimedStore(base.engine, base.write_engine, base.sqlite_writer)
        store.commit_s = []
        await store.migrate()
        ids = [f"s{i:04d}" for i in range(sessions)]
        for sid in ids:
            await store.create_session(id=sid, owner="bench", cwd="/", mode="default", model="m")
        writer = EventWriter(store, flush_interval=args.flush_interval_ms / 1000)
        writer.start()
        delivered = 0
        latencies: list[float] = []
        stop = time.perf_counter() + args.seconds

        async def session(sid: str) -> None:
            nonlocal delivered
            seq = 0
            msg = 0
            room = asyncio.Semaphore(window)

            def published(sent: float) -> None:
                nonlocal delivered
                delivered += 1
                latencies.append(time.perf_counter() - sent)
                room.release()

            while time.perf_counter() < stop:
                await room.acquire()
                seq += 1
                sent = time.perf_counter()
                messages = None
                if seq % args.message_every == 0:
                    messages = [(msg, {"role": "assistant", "content": "x" * 200, "_seq": seq})]
                    msg += 1
                writer.submit(
                    sid,
                    event=Event(sid, PAYLOAD, seq=seq),
                    publish=lambda _e, sent=sent: published(sent),
                    messages=messages,
                )
            await writer.barrier()

        started = time.perf_counter()
        cpu = time.process_time()
        await asyncio.gather(*(session(sid) for sid in ids))
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu
        await writer.stop()
        stored = sum([await store.last_seq(sid) for sid in ids])
        await store.close()
        assert stored == delivered, (stored, delivered)  # every delivered event is durable
        commits = store.commit_s
        print(
            f"{kind:8} sessions={sessions:<4} window={window:<3} events/s={delivered / elapsed:>8.0f} "
            f"commits={len(commits):<6} events/commit={delivered / max(1, len(commits)):>6.1f} "
            f"commit p50={pct(commits, 0.5) * 1000:.2f} ms p99={pct(commits, 0.99) * 1000:.2f} ms "
            f"deliver p99={pct(latencies, 0.99) * 1000:.2f} ms "
            f"cpu/event={cpu / max(1, delivered) * 1e6:.0f} us"
        )


async def main(args: argparse.Namespace) -> None:
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, {args.seconds:g} s per run, "
          f"flush_interval {args.flush_interval_ms:g} ms")  # fmt: skip
    for kind in args.db.split(","):
        if kind == "postgres":
            try:
                conn = await asyncpg.connect(PG_ADMIN_DSN, timeout=3)
                await conn.close()
            except Exception as exc:
                print(f"postgres skipped: not reachable at {PG_ADMIN_DSN} ({exc})")
                continue
        for window in (int(w) for w in args.windows.split(",")):
            for n in (int(s) for s in args.sessions.split(",")):
                await run(kind, n, window, args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", default="1,32,200", help="writing sessions per run (comma list)")
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each run")
    parser.add_argument("--db", default="sqlite,postgres", help="sqlite, postgres or both")
    parser.add_argument("--windows", default="1,16", help="events in flight per session (comma list)")
    parser.add_argument("--message-every", type=int, default=8, help="a message write every n events")
    parser.add_argument("--flush-interval-ms", type=float, default=0.0, help="AGENTD_FLUSH_INTERVAL_MS")
    parser.add_argument("--smoke", action="store_true", help="a tiny quick run (CI)")
    ns = parser.parse_args()
    if ns.smoke:
        ns.sessions, ns.windows, ns.seconds = "1,4", "4", 0.3
    asyncio.run(main(ns))
