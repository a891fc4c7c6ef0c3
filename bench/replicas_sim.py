"""N simulated replicas' database and broker traffic from one process (issue 26 item 10;
prints figures, no asserts). The capacity model is docs/scaling.md; this confirms which
traffic class saturates first.

    .venv/bin/python bench/replicas_sim.py [--replicas 20] [--sessions 40,80,160,320]
                                           [--seconds 8] [--broker notify,redis] [--ttl 10]
                                           [--chunks-per-s 20] [--turn-s 10] [--routed-per-s 2]

One fresh Postgres database at the newest schema; `--replicas` simulated replicas, each with
its own `EventWriter` over its own `Store` (one group-commit connection each, as a replica
has) holding the leases of its share of the streaming sessions (real fencing tokens). Per
step, `--sessions` sessions stream at once, each generating what a streaming session costs
agentd (docs/scaling.md, "per-unit costs"):

- durable events: 5 per turn of `--turn-s` s (user message, turn started, final text, usage,
  turn ended) and one partial-text checkpoint per second (the session row), through the real
  group commit with its fence check and its NOTIFY per session per commit;
- broker messages: one per streamed chunk, `--chunks-per-s` per session — `pg_notify` on the
  shared Postgres (NOTIFY broker) or `PUBLISH` to Redis (`--broker redis`);
- lease renewals: each replica renews all its leases in one statement every TTL/3 (the real
  `agentd.store.leases.renew`);
- routed commands: `--routed-per-s` per replica, each submitted, claimed, finished and taken
  (the real `agentd.store.routed` statements, each a transaction, each NOTIFY included).

Printed per step and class: offered and achieved operations/s, latency p50/p99, and
`SATURATED` when achieved < 90 % of offered or p50 over the class's deadline (events 1 s,
broker 100 ms, renewals TTL/3, routed 1 s); for durable writes also the group commits per
second and rows per commit. The last lines name the first class to saturate
and the step. The sim's own process shares the host with Postgres (and Redis): its CPU is
printed next to Postgres's, so a step where the sim itself is the limit is visible.
Needs Postgres at 127.0.0.1:5432; Redis at 127.0.0.1:6379 for `--broker redis`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg
import turnkit
from sqlalchemy.ext.asyncio import create_async_engine

from agentd.core.events import Event, EventKind
from agentd.infra.config import Settings
from agentd.session.eventlog.writer import EventWriter
from agentd.store import leases, pg_commit, routed
from agentd.store.db import Store
from agentd.store.engine import PoolLimits

PG_ADMIN_DSN = os.environ.get("AGENTD_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
EVENTS_PER_TURN = 5
CHECKPOINTS_PER_S = 1.0  # agentd/session/eventlog/journal.py PARTIAL_CHECKPOINT_INTERVAL_S
CHUNK = "x" * 24  # a streamed chunk's text


@dataclass
class Meter:
    name: str
    deadline_s: float
    offered: float = 0.0  # operations/s the step asks for
    done: int = 0
    lat: list[float] = field(default_factory=list)

    def record(self, started: float) -> None:
        self.done += 1
        self.lat.append(time.perf_counter() - started)

    def pct(self, q: float) -> float:
        if not self.lat:
            return float("nan")
        ordered = sorted(self.lat)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def saturated(self, seconds: float) -> bool:
        """Falling behind its offer, or half its operations later than its deadline (queueing:
        a p99 alone also catches the shared host's scheduling noise)."""
        return self.done / seconds < 0.9 * self.offered or self.pct(0.5) > self.deadline_s

    def line(self, seconds: float) -> str:
        flag = "  SATURATED" if self.saturated(seconds) else ""
        return (
            f"  {self.name:16} offered {self.offered:>9.0f}/s achieved {self.done / seconds:>9.0f}/s "
            f"p50 {self.pct(0.5) * 1000:>8.1f} ms p99 {self.pct(0.99) * 1000:>8.1f} ms{flag}"
        )


class CountingStore(Store):
    """The store, counting its group commits."""

    commits = 0

    async def commit(self, batches: list) -> None:  # type: ignore[type-arg]
        await super().commit(batches)
        CountingStore.commits += 1


class RedisPublisher:
    """PUBLISH over one raw RESP connection (pipelined: replies read in order)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.waiting: asyncio.Queue[asyncio.Future[None]] = asyncio.Queue()
        self.task = asyncio.create_task(self._replies())

    @classmethod
    async def connect(cls, host: str = "127.0.0.1", port: int = 6379) -> RedisPublisher:
        return cls(*await asyncio.open_connection(host, port))

    async def _replies(self) -> None:
        while True:
            line = await self.reader.readline()
            if not line:
                return
            (await self.waiting.get()).set_result(None)

    async def publish(self, channel: str, message: str) -> None:
        parts = [b"PUBLISH", channel.encode(), message.encode()]
        self.writer.write(b"*3\r\n" + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        await self.waiting.put(done)
        await done

    async def close(self) -> None:
        self.task.cancel()
        self.writer.close()


def postgres_cpu_s() -> float:
    """CPU seconds of every postgres process on this host (utime + stime, /proc)."""
    total = 0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().strip() == "postgres":
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                # Its own CPU and that of its reaped children (a backend that ended meanwhile).
                total += sum(int(f) for f in fields[11:15])
    return total / tick


async def paced(rate: float, stop: float, op: Callable[[], Awaitable[None]], meter: Meter) -> None:
    """`op` at `rate`/s until `stop`, each started on schedule (open loop: a slow class
    falls behind instead of slowing its offer), latency from its scheduled start."""
    if rate <= 0:
        return
    gap = 1 / rate
    at = time.perf_counter()
    running: set[asyncio.Task[None]] = set()

    async def one(started: float) -> None:
        await op()
        meter.record(started)

    while at < stop:
        delay = at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if len(running) < 2000:  # bounded: a saturated class is not queued without end
            task = asyncio.create_task(one(at))
            running.add(task)
            task.add_done_callback(running.discard)
        at += gap
    if running:
        await asyncio.wait(running, timeout=10)
        for task in running:
            task.cancel()


async def step(url: str, args: argparse.Namespace, sessions: int, broker: str) -> dict[str, Meter]:
    n = args.replicas
    opened = [await Store.open(url, PoolLimits(1, 1, 30.0, 30.0)) for _ in range(n)]
    stores = [CountingStore(s.engine, s.write_engine, s.sqlite_writer) for s in opened]
    await stores[0].migrate()
    owners = [f"sim-{i}" for i in range(n)]
    sids = [f"s{uuid.uuid4().hex[:12]}" for _ in range(sessions)]
    owner_of = {sid: owners[i % n] for i, sid in enumerate(sids)}
    shared = stores[0].engine  # set-up
    # Renewals and routed commands on pools of their own (a replica has one each; 20 of
    # each would crowd the shared Postgres this runs on).
    renewals = create_async_engine(shared.url, pool_size=4, max_overflow=0)
    routing = create_async_engine(shared.url, pool_size=8, max_overflow=0)
    for sid in sids:
        await stores[0].create_session(id=sid, owner="sim", cwd="/", mode="default", model="m")
    tokens: dict[str, dict[str, int]] = {o: {} for o in owners}
    for sid in sids:
        token = await leases.acquire(shared, sid, owner_of[sid], args.ttl, 1.0)
        assert isinstance(token, int)
        tokens[owner_of[sid]][sid] = token
    writers = []
    for i, o in enumerate(owners):
        w = EventWriter(stores[i])
        w.fences.update(tokens[o])
        w.start()
        writers.append(w)
    writer_of = {sid: writers[owners.index(owner_of[sid])] for sid in sids}
    notify_pool = await asyncpg.create_pool(
        url.replace("postgresql+asyncpg://", "postgresql://"), min_size=4, max_size=4
    )
    redis = [await RedisPublisher.connect() for _ in range(4)] if broker == "redis" else []
    meters = {
        "durable writes": Meter("durable writes", 1.0),
        "broker chunks": Meter(f"chunks ({broker})", 0.1),
        "lease renewals": Meter("lease renewals", args.ttl / 3),
        "routed commands": Meter("routed commands", 1.0),
    }
    seqs = dict.fromkeys(sids, 0)
    writes = dict.fromkeys(sids, 0)
    cycle = EVENTS_PER_TURN + round(CHECKPOINTS_PER_S * args.turn_s)  # a turn's writes

    async def durable(sid: str) -> None:
        done = asyncio.get_running_loop().create_future()
        writes[sid] += 1
        if writes[sid] % cycle < EVENTS_PER_TURN:
            seqs[sid] += 1
            event = Event(sid, EventKind.AGENT_MESSAGE, {"text": CHUNK * 8, "messageId": "m"}, seq=seqs[sid])
            writer_of[sid].submit(sid, event=event, publish=lambda _e: done.set_result(None))
        else:  # a partial-text checkpoint: the session row, no seq
            writer_of[sid].submit(sid, session_fields={"partial": {"seq": seqs[sid], "messages": []}})
            await writer_of[sid].barrier()
            done.set_result(None)
        await done

    turn = 0

    async def chunk() -> None:
        nonlocal turn
        turn += 1
        sid = sids[turn % len(sids)]
        if broker == "redis":
            await redis[turn % len(redis)].publish(f"agentd-sim:{sid}", CHUNK)
        else:
            async with notify_pool.acquire() as conn:
                await conn.execute("SELECT pg_notify($1, $2)", f"agentd_sim_{turn % 64}", CHUNK)

    async def renew(owner: str) -> None:
        await leases.renew(renewals, owner, tokens[owner], args.ttl)

    async def route(i: int) -> None:
        target = owners[(i + 1) % n]
        sid = next(s for s in sids if owner_of[s] == target) if sessions >= n else sids[0]
        cid = await routed.submit(
            routing, session_id=sid, target=target, caller=owners[i], method="session/prompt",
            principal="sim", teams=(), params={"x": 1},
        )  # fmt: skip
        command = await routed.claim(routing, cid, target, target)
        assert command is not None
        await routed.finish(routing, command, {"result": {}})
        await routed.take_outcome(routing, cid)

    per_session_writes = EVENTS_PER_TURN / args.turn_s + CHECKPOINTS_PER_S
    meters["durable writes"].offered = sessions * per_session_writes
    meters["broker chunks"].offered = sessions * args.chunks_per_s
    meters["lease renewals"].offered = n * 3 / args.ttl
    meters["routed commands"].offered = n * args.routed_per_s
    cpu, pg_cpu, commits = time.process_time(), postgres_cpu_s(), CountingStore.commits
    stop = time.perf_counter() + args.seconds
    await asyncio.gather(
        *(paced(per_session_writes, stop, lambda s=s: durable(s), meters["durable writes"]) for s in sids),
        paced(sessions * args.chunks_per_s, stop, chunk, meters["broker chunks"]),
        *(paced(3 / args.ttl, stop, lambda o=o: renew(o), meters["lease renewals"]) for o in owners),
        *(paced(args.routed_per_s, stop, lambda i=i: route(i), meters["routed commands"]) for i in range(n)),
    )
    cpu, pg_cpu = time.process_time() - cpu, postgres_cpu_s() - pg_cpu
    commits = CountingStore.commits - commits
    for w in writers:
        await w.stop()
    await notify_pool.close()
    await renewals.dispose()
    await routing.dispose()
    for r in redis:
        await r.close()
    for s in stores:
        await s.close()
    print(
        f"{sessions} streaming sessions on {n} replicas, broker {broker}: sim CPU {cpu / args.seconds:.2f} "
        f"cores, Postgres CPU {pg_cpu / args.seconds:.2f} cores ({os.cpu_count()} on the host)"
    )
    for m in meters.values():
        print(m.line(args.seconds))
    writes = meters["durable writes"].done
    per_commit = writes / max(1, commits)
    print(f"  group commits    {commits / args.seconds:>9.0f}/s, {per_commit:.1f} writes per commit")
    return meters


def connections_per_replica() -> int:
    """The most Postgres connections one replica opens with the default settings: its pool
    (AGENTD_DB_POOL_SIZE + AGENTD_DB_POOL_OVERFLOW), the group-commit connection, the
    lease renewals' own engine (pool 1 + overflow 1) and the LISTEN connection."""
    settings = Settings()
    return settings.db_pool_size + settings.db_pool_overflow + 1 + 2 + 1


async def connection_budget(replicas: int) -> None:
    admin = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        limit = int(await admin.fetchval("SHOW max_connections"))
        reserved = int(await admin.fetchval("SHOW superuser_reserved_connections"))
    finally:
        await admin.close()
    need = replicas * connections_per_replica()
    flag = "  SATURATED" if need > limit - reserved else ""
    print(
        f"connections: {replicas} replicas x {connections_per_replica()} at most = {need} "
        f"vs max_connections {limit} ({reserved} reserved){flag}"
    )


async def main(args: argparse.Namespace) -> None:
    await connection_budget(args.replicas)
    if args.no_log_notify:
        # The group commit without its NOTIFY of the log tails (what carrying those wake-ups
        # on the broker would save): every statement is built after this.
        pg_commit._NOTIFY = "SELECT 1"
        print("group commits without their NOTIFY (--no-log-notify)")
    print(
        f"replicas_sim: {args.replicas} replicas, TTL {args.ttl} s, {args.chunks_per_s} chunks/s and "
        f"{EVENTS_PER_TURN} events per {args.turn_s} s turn + {CHECKPOINTS_PER_S} checkpoint/s per session, "
        f"{args.routed_per_s} routed commands/s per replica, {args.seconds} s per step"
    )
    for broker in args.broker.split(","):
        first: tuple[str, int] | None = None
        for sessions in (int(s) for s in args.sessions.split(",")):
            async with turnkit.postgres_database() as url:
                meters = await step(url, args, sessions, broker)
            hit = [name for name, m in meters.items() if m.saturated(args.seconds)]
            if hit and first is None:
                first = (", ".join(hit), sessions)
        if first:
            print(f"broker {broker}: first saturated: {first[0]} at {first[1]} streaming sessions")
        else:
            print(
                f"broker {broker}: nothing saturated up to {args.sessions.split(',')[-1]} streaming sessions"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", type=int, default=20)
    parser.add_argument(
        "--sessions", default="40,80,160,320", help="streaming sessions per step (comma list)"
    )
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--broker", default="notify,redis")
    parser.add_argument("--ttl", type=float, default=10.0)
    parser.add_argument("--chunks-per-s", type=float, default=20.0)
    parser.add_argument("--turn-s", type=float, default=10.0)
    parser.add_argument("--routed-per-s", type=float, default=2.0)
    parser.add_argument("--no-log-notify", action="store_true", help="group commits without their NOTIFY")
    asyncio.run(main(parser.parse_args()))
