"""The chaos driver (issue 26 item 8): three real `agentd serve` replicas on one fresh
Postgres database (and Redis when `redis_url` is given), sessions spread over them, a
watcher per session on every replica recording each frame it gets, a prompter per session
enqueuing with `requestId`s through any live replica (retrying under the same id) and
recording acks, a lease monitor, and a fault schedule: `kill -9` (+ restart with the same
id), SIGSTOP past the lease (+ SIGCONT), `pg_terminate_backend` of all / the LISTEN
backends / a storm, Redis connections dropped. After the run the cluster is healed and left
to quiesce, then the invariants (tests/support/chaos_check.py) are checked over the stored
log and every client's record. Used by tests/e2e/chaos/ (short mode) and bench/chaos.py."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import shutil
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import websockets

from agentd.protocol.agentd import ENQUEUE
from agentd.store.notify import LISTEN_APPLICATION_NAME
from tests.support import chaos_faults as faults
from tests.support.chaos_check import (
    FaultAt,
    LeaseSeen,
    SeqFault,
    Stored,
    Stranding,
    Takeover,
    behind_at_end,
    double_runs,
    first_arrivals,
    log_gaps,
    lost_acks,
    seq_faults,
    strandings,
    takeovers,
)
from tests.support.chaos_watch import Watcher, expected_forms
from tests.support.client import WsClient, text_prompt
from tests.support.databases import postgres_database
from tests.support.proc import AgentdProcess, agentd_serve, write_script
from tests.support.session import new_session

REPLICAS = ("replica-a", "replica-b", "replica-c")
FAULTS = ("kill9", "pg_listen", "sigstop", "pg_all", "redis", "pg_storm")
ANSWER = [{"text": "".join(f"w{i} " for i in range(40)), "chunk_size": 6, "chunk_delay": 0.02}]


@dataclass
class ChaosConfig:
    sessions: int = 4
    seconds: float = 60.0  # faults are injected for this long (each kind at least once)
    ttl_s: float = 2.0
    faults: tuple[str, ...] = FAULTS  # cycled through
    fault_gap_s: float = 5.0  # calm between two faults
    prompt_every_s: float = 1.0  # per session
    redis_url: str | None = None
    redis_restart: bool = False  # the `redis` fault restarts Redis instead of dropping connections
    quiesce_s: float = 45.0  # bound on the wait for queues drained and clients caught up
    seed: int = 26

    @property
    def bound_s(self) -> float:
        """The promise: a client gets each seq, or is told, within lease TTL + 2 s."""
        return self.ttl_s + 2.0

    @property
    def takeover_bound_s(self) -> float:
        """Issue 26 item 6: resumed within TTL + sweep interval (TTL/4) + 2 s."""
        return self.ttl_s * 1.25 + 2.0


@dataclass
class ChaosReport:
    config: ChaosConfig
    acked: dict[str, str] = field(default_factory=dict)  # requestId → session
    acked_at: dict[str, tuple[float, str]] = field(default_factory=dict)  # requestId → (t, replica asked)
    enqueue_errors: dict[str, int] = field(default_factory=dict)  # error code / exception → count
    faults: list[tuple[float, str, str, str]] = field(default_factory=list)  # t, kind, target, outcome
    lost: list[str] = field(default_factory=list)
    doubles: dict[str, int] = field(default_factory=dict)
    gaps: list[tuple[str, int]] = field(default_factory=list)
    seq_faults: list[SeqFault] = field(default_factory=list)
    stranded: list[Stranding] = field(default_factory=list)
    behind: dict[str, int] = field(default_factory=dict)  # client → seqs it never got
    takeovers: list[Takeover] = field(default_factory=list)
    undrained: list[str] = field(default_factory=list)  # sessions with a queue or a turn at the end
    listening: int = 0  # LISTEN connections to the database at the end (one per replica expected)
    events: int = 0
    clients: int = 0
    seconds: float = 0.0

    @property
    def stranded_clients(self) -> set[str]:
        return {s.client for s in self.stranded} | {c for c, n in self.behind.items() if n}

    def lines(self) -> list[str]:
        take = sorted(t.seconds for t in self.takeovers if t.seconds is not None)
        kinds: dict[str, int] = {}
        for f in self.seq_faults:
            kinds[f.kind.value] = kinds.get(f.kind.value, 0) + 1
        out = [
            f"run: {self.seconds:.0f} s, {len(self.faults)} faults, {self.events} events, "
            f"{len(self.acked)} acked prompts, {self.clients} watching clients",
            f"acked prompts lost: {len(self.lost)} "
            + ", ".join(
                f"{r} (acked t={self.acked_at[r][0]:.1f} by {self.acked_at[r][1]})" for r in self.lost[:5]
            ),
            f"double runs: {len(self.doubles)} {dict(list(self.doubles.items())[:5])}",
            f"log gaps: {len(self.gaps)}",
            f"duplicate/divergent seqs: {len(self.seq_faults)} {kinds}",
            f"stranded clients: {len(self.stranded_clients)} of {self.clients} "
            f"({len(self.stranded)} late seqs untold, {sum(self.behind.values())} never received)",
            f"takeovers: {len(self.takeovers)}, never: {sum(t.seconds is None for t in self.takeovers)}"
            + (f", p50 {take[len(take) // 2]:.1f} s, max {take[-1]:.1f} s" if take else ""),
            f"undrained sessions: {len(self.undrained)}; replicas listening at the end: {self.listening} of "
            f"{len(REPLICAS)}; enqueue errors: {self.enqueue_errors}",
        ]
        out += [f"  fault t={t:.1f} {kind} {target}: {outcome}" for t, kind, target, outcome in self.faults]
        return out


def pg_dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


class Cluster:
    """The replicas, each restartable under its id and home."""

    def __init__(self, tmp: Path, url: str, config: ChaosConfig) -> None:
        self.tmp, self.url, self.config = tmp, url, config
        self.script = write_script(tmp / "script.json", ANSWER, loop=True)
        self.servers: dict[str, AgentdProcess] = {}
        self.stacks: dict[str, contextlib.AsyncExitStack] = {}
        self.paused: set[str] = set()
        self.starts = itertools.count()

    def live(self) -> list[str]:
        return [r for r in REPLICAS if r in self.servers and r not in self.paused]

    async def start(self, rid: str) -> None:
        settings = {"lease_ttl_s": str(self.config.ttl_s), "permission_mode": "bypass"}
        if self.config.redis_url:
            settings["redis_url"] = self.config.redis_url
        stack = contextlib.AsyncExitStack()
        serve = agentd_serve(
            self.tmp / rid, f"{rid}-{next(self.starts)}.log", replica_id=rid, database_url=self.url,
            script=str(self.script), **settings,
        )  # fmt: skip
        self.servers[rid] = await stack.enter_async_context(serve)
        self.stacks[rid] = stack

    async def kill9(self, rid: str) -> None:
        server = self.servers.pop(rid)
        await server.kill9()
        await self.stacks.pop(rid).aclose()

    async def close(self) -> None:
        for rid in list(self.paused):
            faults.resume(self.servers[rid].pid)
        for stack in self.stacks.values():
            await stack.aclose()


class Chaos:
    def __init__(self, cluster: Cluster, db: asyncpg.Connection, database: str, report: ChaosReport) -> None:
        self.cluster, self.db, self.database, self.report = cluster, db, database, report
        self.config = cluster.config
        self.rng = random.Random(self.config.seed)
        self.t0 = time.monotonic()
        self.sessions: list[str] = []
        self.owners: dict[str, str] = {}  # session → owner as last seen
        self.leases: list[LeaseSeen] = []
        self.fault_times: list[FaultAt] = []
        self.prompt_clients: dict[str, WsClient] = {}

    # -- traffic
    async def create_sessions(self, workspace: Path) -> None:
        for i in range(self.config.sessions):
            client = await WsClient.connect(self.cluster.servers[REPLICAS[i % len(REPLICAS)]].base_url)
            try:
                self.sessions.append(await new_session(client, workspace))
            finally:
                await client.close()

    async def enqueue(self, sid: str, request_id: str, n: int) -> bool:
        live = self.cluster.live()
        if not live:
            return False
        rid = self.rng.choice(live)
        try:
            client = self.prompt_clients.get(rid)
            if client is None or client.ws.close_code is not None:
                async with asyncio.timeout(5):
                    client = self.prompt_clients[rid] = await WsClient.connect(
                        self.cluster.servers[rid].base_url
                    )
            async with asyncio.timeout(15):
                resp = await client.request(ENQUEUE, text_prompt(sid, f"prompt {n}", requestId=request_id))
        except (OSError, websockets.WebSocketException, TimeoutError, KeyError) as exc:
            self.prompt_clients.pop(rid, None)
            self.count_error(type(exc).__name__)
            return False
        if "error" in resp:
            self.count_error(str(resp["error"].get("code")))
            return False
        self.report.acked[request_id] = sid
        self.report.acked_at[request_id] = (time.monotonic() - self.t0, rid)
        return True

    def count_error(self, key: str) -> None:
        self.report.enqueue_errors[key] = self.report.enqueue_errors.get(key, 0) + 1

    async def prompter(self, sid: str, stop: asyncio.Event) -> None:
        for n in itertools.count(1):
            request_id = f"{sid}-p{n}"
            for _ in range(100):  # the same requestId until acked (≤ ~30 s), then the next
                if await self.enqueue(sid, request_id, n) or stop.is_set():
                    break  # (given up unacked at the end: nothing was promised)
                await asyncio.sleep(0.3)  # retry backoff
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.prompt_every_s):
                    await stop.wait()
            if stop.is_set():
                return

    async def lease_monitor(self, url: str) -> None:
        """Every change of a session's lease (owner, token), with when it was seen."""
        seen: dict[str, tuple[str, int]] = {}
        db = await asyncpg.connect(pg_dsn(url), server_settings={"application_name": faults.CHAOS_APP})
        try:
            await self._monitor(db, seen)
        finally:
            await db.close()

    async def _monitor(self, db: asyncpg.Connection, seen: dict[str, tuple[str, int]]) -> None:
        while True:
            with contextlib.suppress(asyncpg.PostgresError, OSError):
                rows = await db.fetch("SELECT session_id, owner, token FROM session_leases")
                now = time.monotonic()
                for r in rows:
                    state = (str(r["owner"]), int(r["token"]))
                    if seen.get(r["session_id"]) != state:
                        seen[r["session_id"]] = state
                        self.owners[r["session_id"]] = state[0]
                        self.leases.append(LeaseSeen(now, r["session_id"], *state))
            await asyncio.sleep(0.1)  # a sampling period, not a synchronisation

    # -- faults
    def busiest(self) -> str:
        live = self.cluster.live()
        return max(live, key=lambda r: (sum(o == r for o in self.owners.values()), self.rng.random()))

    async def inject(self, kind: str) -> None:
        t = time.monotonic()
        target, outcome = self.database, ""
        ttl = self.config.ttl_s
        if kind in ("kill9", "sigstop"):
            target = self.busiest()
            self.fault_times.append(FaultAt(t, target, kind))
            if kind == "kill9":
                await self.cluster.kill9(target)
                await asyncio.sleep(ttl + 1)  # the fault's length: dead past its lease
                await self.cluster.start(target)
                outcome = "restarted"
            else:
                pid = self.cluster.servers[target].pid
                self.cluster.paused.add(target)
                faults.pause(pid)
                # Paused past its lease, yet 1.5 s short of the clients' bound (TTL + 2 s):
                # once it runs again it must catch up or tell its clients in time.
                await asyncio.sleep(ttl + 0.5)
                faults.resume(pid)
                self.cluster.paused.discard(target)
                outcome = "continued"
        elif kind == "pg_all":
            outcome = f"{await faults.terminate_backends(self.db, self.database)} backends"
        elif kind == "pg_listen":
            n = await faults.terminate_backends(self.db, self.database, listen_only=True)
            outcome = f"{n} backends" + ("" if n else f" (none listening: {await self.statements()})")
        elif kind == "pg_storm":
            outcome = f"{await faults.storm(self.db, self.database)} backends"
        elif kind == "redis":
            target = "redis"
            if not self.config.redis_url or shutil.which("redis-cli") is None:
                outcome = "skipped: no Redis (or no redis-cli) here"
            elif self.config.redis_restart:
                await faults.restart_redis()
                outcome = "restarted"
            else:
                pids = [s.pid for s in self.cluster.servers.values()]
                outcome = f"{await faults.kill_redis_clients_of(pids)} connections killed"
        self.report.faults.append((t - self.t0, kind, target, outcome))

    async def statements(self, *, distinct: bool = True) -> list[str]:
        """The last statement of each of the database's backends (a listener's: its LISTEN)."""
        rows = await self.db.fetch(
            "SELECT query FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()"
            " AND coalesce(application_name, '') <> $2",
            self.database,
            faults.CHAOS_APP,
        )
        found = [str(r["query"])[:40] for r in rows]
        return sorted(set(found)) if distinct else found

    async def listeners(self) -> int:
        """The replicas' listener connections that have LISTENed: their last statement is a
        LISTEN, an UNLISTEN (the events channel is dropped when a replica's last watch of a
        session owned elsewhere ends, and a listener only sends one once set up), or the
        listener's ping (`SELECT 1`, every min(5 s, TTL / 2), which it sends only after its
        LISTENs). The last statement alone raced that ping: a listener up for over a second
        showed `SELECT 1` and was not counted."""
        rows = await self.db.fetch(
            "SELECT query FROM pg_stat_activity WHERE datname = $1 AND application_name = $2",
            self.database,
            LISTEN_APPLICATION_NAME,
        )
        listened = ("LISTEN", "UNLISTEN")
        return sum(str(r["query"]).startswith(listened) or r["query"] == "SELECT 1" for r in rows)

    async def schedule(self) -> None:
        """The faults in turn, each after a calm gap, for `seconds` — every one at least once."""
        end = time.monotonic() + self.config.seconds
        for n, kind in enumerate(itertools.cycle(self.config.faults)):
            if n >= len(self.config.faults) and time.monotonic() >= end:
                return
            await asyncio.sleep(self.config.fault_gap_s)  # calm between faults
            await self.inject(kind)

    # -- the end
    async def logs(self) -> dict[str, list[Stored]]:
        out: dict[str, list[Stored]] = {sid: [] for sid in self.sessions}
        rows = await self.db.fetch(
            "SELECT session_id, seq, kind, payload FROM events WHERE session_id = ANY($1) ORDER BY seq",
            self.sessions,
        )
        for r in rows:
            out[r["session_id"]].append(Stored(int(r["seq"]), r["kind"], json.loads(r["payload"])))
        return out

    async def busy(self) -> list[str]:
        rows = await self.db.fetch(
            "SELECT id FROM sessions WHERE id = ANY($1) AND (running_turn IS NOT NULL"
            " OR EXISTS (SELECT 1 FROM queued_prompts q WHERE q.session_id = sessions.id))",
            self.sessions,
        )
        return sorted(r["id"] for r in rows)

    async def quiesce(self, watchers: list[Watcher]) -> None:
        """Until every queue is drained and every watcher has the end of its log (bounded)."""
        deadline = time.monotonic() + self.config.quiesce_s
        while time.monotonic() < deadline:
            with contextlib.suppress(asyncpg.PostgresError, OSError):
                if not await self.busy():
                    logs = await self.logs()
                    ends = {sid: max((e.seq for e in log), default=0) for sid, log in logs.items()}
                    if all(w.record.last_seq >= ends[w.record.session_id] for w in watchers):
                        return
            await asyncio.sleep(0.2)

    async def check(self, watchers: list[Watcher]) -> None:
        r = self.report
        logs = await self.logs()
        queued = [q["request_id"] for q in await self.db.fetch("SELECT request_id FROM queued_prompts")]
        r.lost = lost_acks(r.acked, logs, [q for q in queued if q])
        r.doubles = double_runs(logs)
        r.gaps = log_gaps(logs)
        r.undrained = await self.busy()
        r.listening = await self.listeners()
        r.events = sum(len(log) for log in logs.values())
        forms = {sid: expected_forms(sid, log) for sid, log in logs.items()}
        records = [w.record for w in watchers]
        first = first_arrivals(records)
        r.clients = len(records)
        for rec in records:
            r.seq_faults += seq_faults(rec, forms[rec.session_id])
            r.stranded += strandings(rec, forms[rec.session_id], first, self.config.bound_s)
            r.behind[rec.name] = behind_at_end(rec, forms[rec.session_id])
        r.takeovers = takeovers(self.fault_times, self.leases)


@contextlib.asynccontextmanager
async def running_cluster(tmp: Path, config: ChaosConfig) -> AsyncIterator[tuple[Cluster, str]]:
    async with postgres_database() as url:
        cluster = Cluster(tmp, url, config)
        try:
            async with asyncio.TaskGroup() as starting:
                for rid in REPLICAS:
                    starting.create_task(cluster.start(rid))
            yield cluster, url
        finally:
            await cluster.close()


async def run_chaos(tmp: Path, config: ChaosConfig) -> ChaosReport:
    """One whole chaos run; its report (nothing asserted here)."""
    report = ChaosReport(config)
    workspace = tmp / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    async with running_cluster(tmp, config) as (cluster, url):
        database = url.rsplit("/", 1)[1]
        db = await asyncpg.connect(pg_dsn(url), server_settings={"application_name": faults.CHAOS_APP})
        chaos = Chaos(cluster, db, database, report)
        try:
            await chaos.create_sessions(workspace)
            watchers = [Watcher(cluster, sid, rid) for sid in chaos.sessions for rid in REPLICAS]
            stop = asyncio.Event()
            async with asyncio.TaskGroup() as tg:
                background = [tg.create_task(w.run()) for w in watchers]
                background.append(tg.create_task(chaos.lease_monitor(url)))
                prompters = [tg.create_task(chaos.prompter(sid, stop)) for sid in chaos.sessions]
                await chaos.schedule()
                stop.set()
                await asyncio.gather(*prompters)
                await chaos.quiesce(watchers)
                for task in background:
                    task.cancel()
            await chaos.check(watchers)
        finally:
            for client in chaos.prompt_clients.values():
                with contextlib.suppress(Exception):
                    await client.close()
            await db.close()
    report.seconds = time.monotonic() - chaos.t0
    return report
