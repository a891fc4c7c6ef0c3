"""Many sessions prompting at once (prints figures; no asserts).

    .venv/bin/python bench/concurrency.py [--sessions 8,32,200] [--turns-per-session 10]
                                          [--procs 0] [--db sqlite,postgres] [--smoke]

Same set-up as bench/turn.py (a real `agentd serve` subprocess, SQLite then a fresh Postgres
database when reachable, the OpenAI provider against a fake streaming model in its own
process, no model delay). For each count N: N sessions, each on its own WebSocket, all
connecting, creating their session and sending a first prompt at once (the burst, issue 32
item 4), then, once every session is set up, prompting trivial turns back to back at the same
time. Reported: the burst's wall time and per-session p50/p99 (connect + `session/new` + the
first prompt), then per-turn latency p50/p99, trivial turns/s over the whole run, server CPU
per turn, errors by kind (a failed set-up or call, a stop reason other than end_turn) and the
refusals retried by kind: agentd's "retry after" refusals (an overloaded database, the rate
limit) are retried after the wait they name, as agentd's own clients do. A session whose
set-up fails is counted and the run goes on with the others. Targets: 8 concurrent p50 ≤
25 ms; ≥ 300 turns/s; 0 errors (200 and 1,000 at once included).

The clients run in `--procs` processes of their own (0: one per 250 sessions), each with its
file-descriptor limit raised, so a 1,000-session burst is not throttled by one client
process's CPU; they still share the machine's cores with the server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from turnkit import Server, agentd_server, backends, model_process, pct

from tests.support.client import WsClient, error_kind, text_prompt

P50_TARGET_MS = 25.0  # at 8 sessions
RATE_TARGET = 300.0
PER_PROC = 250
CALL_TIMEOUT_S = 60.0  # WsClient's wait for an answer  # sessions per client process when --procs is 0


@dataclass
class Tally:
    lat: list[float] = field(default_factory=list)  # seconds per completed turn
    burst: list[float] = field(default_factory=list)  # seconds: connect + session/new + first prompt
    errors: Counter[str] = field(default_factory=Counter)  # by kind
    retried: Counter[str] = field(default_factory=Counter)  # refusals retried, by kind

    def as_json(self) -> str:
        return json.dumps(
            {"lat": self.lat, "burst": self.burst, "errors": self.errors, "retried": self.retried}
        )

    def add(self, line: str) -> None:
        got = json.loads(line)
        self.lat += got["lat"]
        self.burst += got["burst"]
        self.errors.update(got["errors"])
        self.retried.update(got["retried"])


def raise_fd_limit() -> None:
    """A socket per session: the soft limit (often 1,024) up to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def set_up(base: str, workspace: str, tally: Tally) -> tuple[WsClient, str] | None:
    """Connect, create, prompt once (the burst); a failure goes into the tally by kind."""
    client: WsClient | None = None
    t0 = time.perf_counter()
    try:
        # A burst's handshakes queue behind each other on a busy server: as long as a call may take.
        client = await WsClient.connect(base, open_timeout=CALL_TIMEOUT_S)
        new = {"cwd": workspace, "mcpServers": []}
        sid = (await client.call_retrying("session/new", new, retried=tally.retried))["sessionId"]
        first = await client.call_retrying(
            "session/prompt", text_prompt(sid, "warm up"), retried=tally.retried
        )
        if first.get("stopReason") == "end_turn":
            tally.burst.append(time.perf_counter() - t0)
            return client, sid
        tally.errors[f"set-up stop: {first.get('stopReason')}"] += 1
    except Exception as exc:  # counted; the others run on (one failed set-up aborts nothing)
        tally.errors[f"set-up: {error_kind(exc)}"] += 1
    if client is not None:
        await client.close()
    return None


async def prompt_turns(client: WsClient, sid: str, turns: int, tally: Tally) -> None:
    """Prompt `turns` times back to back; failures go into the tally by kind."""
    for _ in range(turns):
        t0 = time.perf_counter()
        try:
            result = await client.call_retrying(
                "session/prompt", text_prompt(sid, "hi"), retried=tally.retried
            )
        except Exception as exc:
            tally.errors[f"turn: {error_kind(exc)}"] += 1
            continue
        if result.get("stopReason") != "end_turn":
            tally.errors[f"stop: {result.get('stopReason')}"] += 1
            continue
        tally.lat.append(time.perf_counter() - t0)
        while not client.notifications.empty():  # bounded: the figures need no updates
            client.notifications.get_nowait()
        client.frames.clear()
    await client.close()


async def client_process(base: str, workspace: str, n: int, turns: int) -> None:
    """A client process: its `n` sessions' burst, then its tally on stdout; on "go" from
    stdin, their turns, then the turns' tally."""
    raise_fd_limit()
    burst, turned = Tally(), Tally()
    sessions = await asyncio.gather(*(set_up(base, workspace, burst) for _ in range(n)))
    print(burst.as_json(), flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # "go": every process's sessions are set up
    ran = [prompt_turns(s[0], s[1], turns, turned) for s in sessions if s is not None]
    for crashed in await asyncio.gather(*ran, return_exceptions=True):
        if isinstance(crashed, BaseException):  # a bug of the bench's own: still counted
            turned.errors[f"bench: {error_kind(crashed)}"] += 1
    print(turned.as_json(), flush=True)


def by_kind(counts: Counter[str]) -> str:
    return ", ".join(f"{kind}: {n}" for kind, n in counts.most_common()) or "none"


async def _spawn(server: Server, n: int, turns: int) -> asyncio.subprocess.Process:
    cmd = [
        sys.executable,
        str(Path(__file__)),
        "--client",
        server.base,
        str(server.workspace),
        str(n),
        str(turns),
    ]
    return await asyncio.create_subprocess_exec(
        *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=2**26
    )


async def _report(proc: asyncio.subprocess.Process, tally: Tally) -> None:
    assert proc.stdout is not None
    line = await proc.stdout.readline()
    if not line:
        tally.errors[f"bench: client process exited {await proc.wait()}"] += 1
        return
    tally.add(line.decode())


async def bench(kind: str, model_url: str, counts: list[int], turns: int, procs: int) -> None:
    async with agentd_server(kind, model_url) as server:
        for n in counts:
            k = min(n, procs or max(1, -(-n // PER_PROC)))
            shares = [n // k + (i < n % k) for i in range(k)]
            t0 = time.perf_counter()
            clients = await asyncio.gather(*(_spawn(server, share, turns) for share in shares))
            setup = Tally()
            await asyncio.gather(*(_report(c, setup) for c in clients))
            burst_wall = time.perf_counter() - t0
            cpu0, t0 = server.cpu_s(), time.perf_counter()
            for c in clients:
                assert c.stdin is not None
                c.stdin.write(b"go\n")
                await c.stdin.drain()
            tally = Tally()
            await asyncio.gather(*(_report(c, tally) for c in clients))
            wall, cpu = time.perf_counter() - t0, server.cpu_s() - cpu0
            for c in clients:
                with contextlib.suppress(ProcessLookupError):
                    c.kill()
                await c.wait()
            burst = setup.burst
            b50, b99 = (pct(burst, 50), pct(burst, 99)) if burst else (float("nan"), float("nan"))
            print(f"{kind:<8} sessions={n:<3} procs={k} burst: {len(burst)} set up in {burst_wall:.1f} s "
                  f"p50={b50:.0f} ms p99={b99:.0f} ms errors={sum(setup.errors.values())} (target 0)",
                  flush=True)  # fmt: skip
            print(f"  burst errors by kind: {by_kind(setup.errors)}; "
                  f"refusals retried: {by_kind(setup.retried)}", flush=True)  # fmt: skip
            lat, errors = tally.lat, tally.errors
            done = len(lat)
            p50, p99 = (pct(lat, 50), pct(lat, 99)) if lat else (float("nan"), float("nan"))
            target = f" (target ≤ {P50_TARGET_MS:.0f})" if n == 8 else ""
            cpu_ms = cpu * 1000 / max(1, done)
            print(f"{kind:<8} sessions={n:<3} turns={done} p50={p50:.1f} ms{target} p99={p99:.1f} ms "
                  f"turns/s={done / wall:.0f} (target ≥ {RATE_TARGET:.0f}) cpu/turn={cpu_ms:.2f} ms "
                  f"errors={sum(errors.values())} (target 0)", flush=True)  # fmt: skip
            print(
                f"  errors by kind: {by_kind(errors)}; refusals retried: {by_kind(tally.retried)}", flush=True
            )


async def main(args: argparse.Namespace) -> None:
    kinds = [k for k in await backends() if k in args.db]
    with model_process() as model_url:
        for kind in kinds:
            await bench(kind, model_url, args.sessions, args.turns_per_session, args.procs)
    if "postgres" not in kinds:
        print("postgres skipped (not reachable)")


if __name__ == "__main__" and sys.argv[1:2] == ["--client"]:
    base, workspace, n, turns = sys.argv[2:6]
    asyncio.run(client_process(base, workspace, int(n), int(turns)))
elif __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=lambda s: [int(x) for x in s.split(",")], default=[8, 32, 200])
    parser.add_argument("--turns-per-session", type=int, default=10)
    parser.add_argument(
        "--procs", type=int, default=0, help=f"client processes (0: one per {PER_PROC} sessions)"
    )
    parser.add_argument("--db", type=lambda s: s.split(","), default=["sqlite", "postgres"])
    parser.add_argument("--smoke", action="store_true", help="a tiny run (a few seconds)")
    ns = parser.parse_args()
    if ns.smoke:
        ns.sessions, ns.turns_per_session = [8], 2
    raise_fd_limit()
    asyncio.run(main(ns))
