"""Several replicas on one Postgres (R-C1, issue 15 item 7; prints figures, no asserts).

    .venv/bin/python bench/replicas.py [--replicas 1,2,3] [--sessions 12] [--turns 5]
                                       [--lease-ttl 5] [--smoke] [--baseline DIR]

Real `agentd serve` processes on one fresh Postgres database (each its own AGENTD_REPLICA_ID
and home), the OpenAI provider pointed at the fake streaming model of bench/turnkit.py in
its own process. The replicas start one after the other: with 1 replica running, then 2,
then 3 (the earlier ones keep running), each step prints
- events/s: `--sessions` new sessions spread round-robin over the running replicas, each on
  a WebSocket to its own replica, all prompting `--turns` trivial turns back to back at the
  same time; durable events written (counted in the database) / wall time, turns/s, the
  replicas' CPU per event, errors;
- cross-replica event latency p50/p99: per durable event, its arrival at a client attached
  through another replica − its arrival at a client on the owner (`cross_replica_event_latency`);
- routed vs direct (issue 26 item 5): with 1 and with 200 concurrent clients
  (`--routed-clients`), each prompting its own session owned by the first replica — on the
  owner (direct) and through the second replica (routed), alternating rounds in one run:
  p50/p99 of each, the errors by code, and the routed/direct p50 ratio (`routed_vs_direct`).
  `--baseline DIR`: another checkout (e.g. `git worktree add /tmp/base main`) runs two
  replicas of its own beside these, on a database of its own; the comparison's rounds
  alternate between the two clusters, so before and after are measured side by side, in one
  run, under the same load.
Both need commands and events routed across replicas; until then a replica refuses a
session another one owns (`-32020 owned_elsewhere`) and they print "n/a (needs routing)".
At the end, takeover: a session owned by the first replica, which is `kill -9`ed; a client
on another replica asks for the session (`_agentd/session/attach`) until it is accepted —
an expired lease is taken over on access — then prompts it. Printed: seconds from the kill
to the attach accepted and to the prompt answered (bounded by the lease time,
`--lease-ttl`).

Needs Postgres (AGENTD_TEST_PG_DSN, default postgresql://postgres@127.0.0.1:5432/postgres);
without it prints "postgres skipped (not reachable)".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from routed_rounds import KINDS, routed_vs_direct
from turnkit import CLK_TCK, MODEL, ROOT, free_port, model_process, pct, pg_available, postgres_database

from agentd.protocol.agentd import AGENTD_CLIENT
from tests.support.client import RpcFailed, WsClient, text_prompt
from tests.support.polling import until

OWNED_ELSEWHERE = -32020
ATTACH = "_agentd/session/attach"
NEEDS_ROUTING = "n/a (needs routing)"


@dataclass
class Replica:
    name: str
    base: str
    proc: subprocess.Popen[bytes]

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def kill9(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


@dataclass
class Cluster:
    db_url: str
    model_url: str
    home: Path
    workspace: Path
    lease_ttl_s: float
    replicas: list[Replica] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # more settings for every replica
    root: Path = ROOT  # the checkout whose agentd the replicas run (`--baseline`: another)

    @property
    def live(self) -> list[Replica]:
        return [r for r in self.replicas if r.proc.poll() is None]

    async def start_replica(self) -> Replica:
        name = f"replica-{len(self.replicas) + 1}"
        home = self.home / name
        home.mkdir()
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
        env.update(
            HOME=str(home), AGENTD_HOME=str(home / "agentd"), AGENTD_PORT=str(port),
            AGENTD_DATABASE_URL=self.db_url, AGENTD_REPLICA_ID=name,
            AGENTD_LEASE_TTL_S=str(self.lease_ttl_s), AGENTD_PROVIDER="openai", AGENTD_MODEL=MODEL,
            AGENTD_OPENAI_BASE_URL=self.model_url, AGENTD_OPENAI_API_KEY="sk-bench",
            AGENTD_PERMISSION_MODE="bypass", AGENTD_RATE_LIMIT_PER_S="0",
            PYTHONPATH=str(self.root) + os.pathsep + env.get("PYTHONPATH", ""),
        )  # fmt: skip
        env.update(self.env)
        log = (home / "serve.log").open("wb")
        cmd = [sys.executable, "-m", "agentd.cli", "serve", "--log-level", "warning"]
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.root)  # noqa: ASYNC220
        log.close()
        replica = Replica(name, f"http://127.0.0.1:{port}", proc)
        self.replicas.append(replica)
        await _wait_ready(replica, home / "serve.log")
        return replica

    async def new_session(self, replica: Replica) -> tuple[WsClient, str]:
        client = await WsClient.connect(replica.base)
        new = {"cwd": str(self.workspace), "mcpServers": []}
        for attempt in range(20):  # a loaded host: the pool says "retry shortly" (-32019)
            try:
                sid = (await client.call("session/new", new))["sessionId"]
                return client, sid
            except RpcFailed as exc:
                if not (exc.error.get("data") or {}).get("retryable") or attempt == 19:
                    raise
                await asyncio.sleep(0.1 * (attempt + 1))
        raise AssertionError("unreachable")

    async def events(self) -> int:
        import asyncpg

        conn = await asyncpg.connect(self.db_url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            return int(await conn.fetchval("SELECT count(*) FROM events"))
        finally:
            await conn.close()


async def _wait_ready(replica: Replica, log: Path) -> None:
    import httpx

    async with httpx.AsyncClient() as http:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if replica.proc.poll() is not None:
                raise SystemExit(f"{replica.name} exited with {replica.proc.returncode}:\n{_tail(log)}")
            with contextlib.suppress(httpx.TransportError):
                if (await http.get(f"{replica.base}/readyz", timeout=5)).status_code == 200:
                    return
            await asyncio.sleep(0.05)
    raise SystemExit(f"{replica.name} never became ready:\n{_tail(log)}")


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:]


@contextlib.asynccontextmanager
async def cluster(
    model_url: str, lease_ttl_s: float, root: Path = ROOT, **env: str
) -> AsyncIterator[Cluster]:
    home = Path(tempfile.mkdtemp(prefix="agentd-bench-replicas-"))
    workspace = home / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("# Bench\n")
    try:
        async with postgres_database() as url:
            c = Cluster(url, model_url, home, workspace, lease_ttl_s, env=env, root=root)
            try:
                yield c
            finally:
                for r in c.live:
                    r.proc.terminate()
                for r in c.replicas:
                    try:
                        await asyncio.to_thread(r.proc.wait, 15)
                    except subprocess.TimeoutExpired:
                        r.kill9()
    finally:
        shutil.rmtree(home, ignore_errors=True)


# -- events/s with the sessions spread over the replicas -------------------------------------


async def _prompt_loop(client: WsClient, sid: str, turns: int, start: asyncio.Barrier) -> tuple[int, int]:
    """(turns done, errors) once every session is ready."""
    await start.wait()
    done = errors = 0
    for _ in range(turns):
        try:
            result = await client.call("session/prompt", text_prompt(sid, "hi"))
        except (RpcFailed, TimeoutError):
            errors += 1
            continue
        if result.get("stopReason") == "end_turn":
            done += 1
        else:
            errors += 1
        while not client.notifications.empty():  # bounded: the figures need no updates
            client.notifications.get_nowait()
        client.frames.clear()
    return done, errors


async def events_per_second(c: Cluster, sessions: int, turns: int) -> str:
    live = c.live
    pairs = await asyncio.gather(*(c.new_session(live[i % len(live)]) for i in range(sessions)))
    for client, sid in pairs:  # warm-up: each session's actor, lease and first turn
        await client.call("session/prompt", text_prompt(sid, "warm up"))
    start = asyncio.Barrier(len(pairs) + 1)
    tasks = [asyncio.create_task(_prompt_loop(client, sid, turns, start)) for client, sid in pairs]
    before, cpu0 = await c.events(), sum(r.cpu_s() for r in live)
    await start.wait()
    t0 = time.perf_counter()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    wall = time.perf_counter() - t0
    cpu = sum(r.cpu_s() for r in live) - cpu0
    events = await c.events() - before
    done = sum(r[0] for r in results if isinstance(r, tuple))
    errors = sum(r[1] if isinstance(r, tuple) else turns for r in results)
    for client, _ in pairs:
        await client.close()
    return (
        f"sessions={sessions} turns={done} events={events} events/s={events / wall:.0f} "
        f"turns/s={done / wall:.1f} cpu/event={cpu * 1e6 / max(1, events):.0f} µs errors={errors}"
    )


# -- hooks for routing (R-C1 items 2-3): n/a until a replica serves sessions owned elsewhere --


class _Stamped:
    """A WebSocket whose received frames are timestamped (stamps[i]: when frame i arrived)."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.stamps: list[float] = []

    def __aiter__(self) -> AsyncIterator[str]:
        return self._frames()

    async def _frames(self) -> AsyncIterator[str]:
        async for text in self.ws:
            self.stamps.append(time.perf_counter())
            yield text

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ws, name)


async def _stamped_client(base: str) -> tuple[WsClient, _Stamped]:
    import websockets

    ws = _Stamped(await websockets.connect(base.replace("http://", "ws://") + "/acp", max_size=None))
    client = WsClient(ws)
    await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}, "_meta": AGENTD_CLIENT})
    return client, ws


def _durable_arrivals(client: WsClient, ws: _Stamped, sid: str) -> dict[int, float]:
    out: dict[int, float] = {}
    for frame, at in zip(client.frames, ws.stamps, strict=False):
        params = frame.get("params") if isinstance(frame, dict) else None
        if not isinstance(params, dict) or params.get("sessionId") != sid:
            continue
        meta = (params.get("_meta") or {}).get("agentd") or {}
        if "seq" in meta and not meta.get("transient"):
            out.setdefault(int(meta["seq"]), at)
    return out


def _arrived(seqs: set[int], client: WsClient, ws: _Stamped, sid: str) -> bool:
    return seqs <= set(_durable_arrivals(client, ws, sid))


async def _attach_elsewhere(client: WsClient, sid: str) -> bool:
    """Whether a replica that does not own `sid` serves it (False: owned_elsewhere)."""
    resp = await client.request(ATTACH, {"sessionId": sid, "afterSeq": 0})
    if "error" in resp:
        if resp["error"].get("code") == OWNED_ELSEWHERE:
            return False
        raise RpcFailed(resp["error"])
    return True


async def cross_replica_event_latency(c: Cluster, turns: int) -> tuple[float, float] | None:
    """p50/p99 (ms) of a durable event's arrival at a client attached through a replica that
    does not own the session, after its arrival at a client on the owner (both clients in
    this process: one clock). None while a replica refuses sessions it does not own."""
    live = c.live
    if len(live) < 2:
        return None
    owner_client, owner_ws = await _stamped_client(live[0].base)
    other_client, other_ws = await _stamped_client(live[1].base)
    try:
        new = {"cwd": str(c.workspace), "mcpServers": []}
        sid = (await owner_client.call("session/new", new))["sessionId"]
        if not await _attach_elsewhere(other_client, sid):
            return None
        lags: list[float] = []
        for _ in range(turns):
            for client, ws in ((owner_client, owner_ws), (other_client, other_ws)):
                client.frames.clear()
                ws.stamps.clear()
            await owner_client.call("session/prompt", text_prompt(sid, "hi"))
            here = _durable_arrivals(owner_client, owner_ws, sid)
            with contextlib.suppress(AssertionError):  # the last events may still be on their way
                await until(functools.partial(_arrived, set(here), other_client, other_ws, sid), 10)
            there = _durable_arrivals(other_client, other_ws, sid)
            lags += [there[s] - here[s] for s in here if s in there]
        return (pct(lags, 50), pct(lags, 99)) if lags else None
    finally:
        await owner_client.close()
        await other_client.close()


# -- takeover after kill -9 ----------------------------------------------------------------


async def takeover_after_kill(c: Cluster) -> str:
    """kill -9 the owner, then a client on a survivor prompts the session, retrying what a
    client retries (`owned_elsewhere` while the dead lease runs, a retryable `owner_lost`
    when a forward went to the dead owner) until the prompt is answered. The survivors'
    takeover sweep also picks the session up by itself; the figure is what a user waits."""
    victim, survivor = c.live[0], c.live[1]
    owner, sid = await c.new_session(victim)
    await owner.call("session/prompt", text_prompt(sid, "hi"))  # the actor runs, the lease is held
    other = await WsClient.connect(survivor.base)
    refusals = 0
    try:
        await asyncio.to_thread(victim.kill9)
        killed = time.perf_counter()
        while True:
            resp = await other.request("session/prompt", text_prompt(sid, "hi"))
            error = resp.get("error")
            if error is None:
                result = resp["result"]
                break
            if error.get("code") != OWNED_ELSEWHERE and not (error.get("data") or {}).get("retryable"):
                raise RpcFailed(error)
            refusals += 1
            if time.perf_counter() - killed > 10 * c.lease_ttl_s:
                return f"takeover after kill -9: never (lease ttl {c.lease_ttl_s:g} s)"
            await asyncio.sleep(0.02)
        answered = time.perf_counter() - killed
    finally:
        await other.close()
        with contextlib.suppress(Exception):
            await owner.close()
    return (
        f"takeover after kill -9: a prompt on another replica answered after {answered:.2f} s "
        f"({result.get('stopReason')}; lease ttl {c.lease_ttl_s:g} s; {refusals} retryable refusals before)"
    )


def _ms(figures: tuple[float, ...] | None, labels: tuple[str, ...]) -> str:
    if figures is None:
        return NEEDS_ROUTING
    return " ".join(f"{label}={value:.1f} ms" for label, value in zip(labels, figures, strict=True))


@contextlib.asynccontextmanager
async def _baseline(model_url: str, args: argparse.Namespace) -> AsyncIterator[Cluster | None]:
    """The `--baseline` checkout's cluster (None without one)."""
    if not args.baseline:
        yield None
        return
    async with cluster(model_url, args.lease_ttl, root=Path(args.baseline)) as base:
        yield base


async def main(args: argparse.Namespace) -> None:
    if not await pg_available():
        print("postgres skipped (not reachable)")
        return
    with model_process() as model_url:
        async with cluster(model_url, args.lease_ttl) as c, _baseline(model_url, args) as base:
            for n in args.replicas:
                while len(c.live) < n:
                    await c.start_replica()
                print(f"replicas={n} {await events_per_second(c, args.sessions, args.turns)}", flush=True)
                if n < 2:
                    continue
                lat = await cross_replica_event_latency(c, args.turns)
                print(f"replicas={n} cross-replica event latency: {_ms(lat, ('p50', 'p99'))}", flush=True)
                for clients in args.routed_clients:
                    rounds = max(args.turns, args.routed_samples // clients)  # enough samples for a p50
                    while base is not None and len(base.live) < 2:
                        await base.start_replica()
                    figures = await routed_vs_direct(c, clients, rounds, base, args.kinds)
                    print(f"replicas={n} routed vs direct: {figures[0]}", flush=True)
                    if base is not None:
                        print(
                            f"replicas={n} routed vs direct (baseline {base.root}): {figures[1]}", flush=True
                        )
            if len(c.live) >= 2:
                print(f"replicas={len(c.live)} {await takeover_after_kill(c)}", flush=True)


if __name__ == "__main__":
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--replicas", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 3])
    parser.add_argument("--sessions", type=int, default=12)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--lease-ttl", type=float, default=5.0)
    parser.add_argument(
        "--routed-clients", type=lambda s: [int(x) for x in s.split(",")], default=[1, 200],
        help="concurrent clients of the routed-vs-direct comparison",
    )  # fmt: skip
    parser.add_argument(
        "--routed-samples", type=int, default=40, help="prompts of each kind at least, per client count"
    )
    parser.add_argument(
        "--kinds", type=lambda s: tuple(s.split(",")), default=KINDS,
        help="the routed-vs-direct rounds to run: direct, routed or both (e.g. to profile one)",
    )  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="a short run (1 and 2 replicas)")
    parser.add_argument(
        "--baseline",
        default="",
        help="another checkout, compared side by side in the routed-vs-direct rounds",
    )
    ns = parser.parse_args()
    ns.baseline = str(Path(ns.baseline).resolve()) if ns.baseline else ""
    if ns.smoke:
        ns.replicas, ns.sessions, ns.turns, ns.lease_ttl, ns.routed_clients = [1, 2], 4, 2, 3.0, [1, 20]
    asyncio.run(main(ns))
