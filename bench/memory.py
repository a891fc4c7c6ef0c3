"""Memory per session and the cost of many stored sessions (prints figures; no asserts).

    .venv/bin/python bench/memory.py [--stored 10000] [--loaded 500] [--turns 200] [--big 40]
                                     [--samples 200] [--smoke]

A real `agentd serve` subprocess (scripted provider; SQLite, then a fresh Postgres database
when reachable). First a template server writes two sessions through the protocol: one
with one turn, one with `--turns` turns (each answer ~200 characters). It stops; the store
layer then clones them (INSERT … SELECT of the very rows the server wrote, new ids) into
`--stored` one-turn sessions spread over 10 cwds with distinct `updated_at`, and `--big`
copies of the long one. A second server starts on that database and is measured:

- `session/list`: latency p50/p99 of the first page, of paging on (following nextCursor),
  and both with the cwd filter; server CPU per call;
- attach: cold `_agentd/session/attach` (afterSeq 0: the session loads from the store, its
  log replays) and cold `session/load` of random stored sessions, then a warm attach;
- RSS per idle loaded session: stored one-turn sessions resumed (`session/resume`), and
  fresh ones (`session/new`): RSS delta / count;
- RSS per loaded `--turns`-turn session (`session/resume` of the big copies), and the
  disk bytes such a session takes in the store.

Targets (issue 14, item 7): ≤ 64 KiB per idle loaded session; list and attach p99 ≤ 20 ms
among 10,000 stored sessions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from turnkit import ROOT, _wait_healthy, backends, database, free_port, pct

from tests.support.client import WsClient, text_prompt

CWDS = 10  # the stored sessions are spread over this many workspaces
ANSWER = " ".join(f"word{i:03d}" for i in range(25))  # ~200 characters per answer
TARGET_IDLE_KIB = 64
TARGET_P99_MS = 20.0


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@dataclass
class Running:
    base: str
    pid: int

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@asynccontextmanager
async def serve(home: Path, db_url: str) -> AsyncIterator[Running]:
    script = home / "script.json"
    script.write_text(json.dumps({"loop": True, "steps": [{"text": ANSWER, "chunk_size": 40}]}))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(
        HOME=str(home), AGENTD_HOME=str(home / "agentd"), AGENTD_PORT=str(port),
        AGENTD_DATABASE_URL=db_url, AGENTD_PROVIDER="scripted", AGENTD_SCRIPT=str(script),
        AGENTD_PERMISSION_MODE="bypass", AGENTD_RATE_LIMIT_PER_S="0",
        AGENTD_MAX_SESSIONS_PER_PRINCIPAL="0", AGENTD_IDLE_EVICT_S="86400",
        PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
    )  # fmt: skip
    cmd = [sys.executable, "-c", "from agentd.cli import main; main()", "serve", "--log-level", "warning"]
    log = home / "serve.log"  # a file: an unread pipe would fill and stall the server
    with log.open("ab") as err:
        proc = subprocess.Popen(  # noqa: ASYNC220 - once per phase, before anything is measured
            cmd, env=env, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT
        )
    try:
        await asyncio.to_thread(_wait_healthy, proc, port, log)
        yield Running(f"http://127.0.0.1:{port}", proc.pid)
    finally:
        proc.terminate()
        try:
            await asyncio.to_thread(proc.wait, 15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def drain(client: WsClient) -> None:
    """The test client keeps every frame; the bench needs none of them."""
    client.frames.clear()
    while not client.notifications.empty():
        client.notifications.get_nowait()


async def write_templates(home: Path, db_url: str, workspaces: list[Path], turns: int) -> tuple[str, str]:
    """(a one-turn session, a `turns`-turn session), written by a real server."""
    async with serve(home, db_url) as srv:
        client = await WsClient.connect(srv.base)
        ids = []
        for n in (1, turns):
            sid = (await client.call("session/new", {"cwd": str(workspaces[0]), "mcpServers": []}))[
                "sessionId"
            ]
            for i in range(n):
                await client.call("session/prompt", text_prompt(sid, f"question {i}: tell me something"))
                drain(client)
            ids.append(sid)
        await client.close()
    return ids[0], ids[1]


async def clone(db_url: str, template: str, copies: list[tuple[str, str, datetime]]) -> None:
    """Copy a session's rows (session, events, messages) under new ids, through the store."""
    from sqlalchemy import String, Text, bindparam, insert, select

    from agentd.store.db import Store
    from agentd.store.models import EventRow, MessageRow, SessionRow

    store = await Store.open(db_url)
    s, e, m = SessionRow.__table__, EventRow.__table__, MessageRow.__table__
    replaced = {
        "id": bindparam("new", type_=String),
        "cwd": bindparam("cwd", type_=Text),
        "updated_at": bindparam("upd", type_=s.c.updated_at.type),
    }
    cols = [c.name for c in s.columns]
    sessions = insert(s).from_select(
        cols, select(*[replaced.get(c, s.c[c]) for c in cols]).where(s.c.id == bindparam("tmpl"))
    )
    ecols = ["session_id", "seq", "kind", "payload", "created_at"]
    events = insert(e).from_select(
        ecols,
        select(bindparam("new", type_=String), *[e.c[c] for c in ecols[1:]]).where(
            e.c.session_id == bindparam("tmpl")
        ),
    )
    mcols = ["session_id", "idx", "data"]
    messages = insert(m).from_select(
        mcols,
        select(bindparam("new", type_=String), *[m.c[c] for c in mcols[1:]]).where(
            m.c.session_id == bindparam("tmpl")
        ),
    )
    try:
        for start in range(0, len(copies), 1000):
            rows = [
                {"new": i, "cwd": c, "upd": u, "tmpl": template} for i, c, u in copies[start : start + 1000]
            ]
            async with store.engine.begin() as conn:
                for stmt in (sessions, events, messages):
                    await conn.execute(stmt, rows)
    finally:
        await store.close()


async def disk_bytes(db_url: str, home: Path) -> int:
    if db_url.startswith("sqlite"):
        from agentd.store.db import Store

        store = await Store.open(db_url)  # fold the WAL into the file first
        try:
            async with store.engine.connect() as conn:
                await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            await store.close()
        files = await asyncio.to_thread(lambda: list(home.glob("bench.db*")))
        return sum(p.stat().st_size for p in files)
    import asyncpg

    conn = await asyncpg.connect(db_url.replace("+asyncpg", ""))
    try:
        return int(await conn.fetchval("SELECT pg_database_size(current_database())"))
    finally:
        await conn.close()


async def timed(srv: Running, n: int, op: Callable[[int], Awaitable[Any]]) -> tuple[list[float], float]:
    """(latencies in s, server CPU ms per op) of `op(0..n-1)`, one after another."""
    lat = []
    cpu0 = srv.cpu_s()
    for i in range(n):
        t0 = time.perf_counter()
        await op(i)
        lat.append(time.perf_counter() - t0)
    return lat, (srv.cpu_s() - cpu0) * 1000 / max(1, n)


def report(
    kind: str, what: str, lat: list[float], cpu_ms: float, target: float | None = TARGET_P99_MS
) -> None:
    p99 = pct(lat, 99)
    verdict = "" if target is None else ("  (target met)" if p99 <= target else "  (target NOT met)")
    print(f"{kind:8s} {what:32s} n={len(lat):<5d} p50={pct(lat, 50):7.2f} ms p99={p99:7.2f} ms "
          f"cpu/op={cpu_ms:6.2f} ms{verdict}")  # fmt: skip


async def settle_rss(srv: Running) -> int:
    await asyncio.sleep(0.3)
    return rss_kib(srv.pid)


async def measure(kind: str, args: argparse.Namespace) -> None:
    home = Path(tempfile.mkdtemp(prefix="agentd-membench-"))
    try:
        workspaces = [home / f"ws{i}" for i in range(CWDS + 1)]  # the last: the long sessions
        for w in workspaces:
            w.mkdir()
        async with database(kind, home) as db_url:
            t0 = time.perf_counter()
            small, big = await write_templates(home, db_url, workspaces, args.turns)
            now = datetime.now(UTC)
            stored = [
                (f"sess_bench{i:08d}", str(workspaces[i % CWDS]), now - timedelta(seconds=i))
                for i in range(args.stored)
            ]
            await clone(db_url, small, stored)
            before = await disk_bytes(db_url, home)
            bigs = [(f"sess_big{i:06d}", str(workspaces[CWDS]), now - timedelta(days=1, seconds=i))
                    for i in range(args.big)]  # fmt: skip
            await clone(db_url, big, bigs)
            per_big = (await disk_bytes(db_url, home) - before) / max(1, args.big)
            print(f"{kind:8s} seeded {args.stored} stored + {args.big} long sessions "
                  f"in {time.perf_counter() - t0:.1f} s")  # fmt: skip
            print(f"{kind:8s} disk per stored {args.turns}-turn session: {per_big / 1024:.1f} KiB")
            async with serve(home, db_url) as srv:
                await run_measurements(kind, srv, args, stored, bigs, workspaces)
    finally:
        shutil.rmtree(home, ignore_errors=True)


async def run_measurements(
    kind: str,
    srv: Running,
    args: argparse.Namespace,
    stored: list[tuple[str, str, datetime]],
    bigs: list[tuple[str, str, datetime]],
    workspaces: list[Path],
) -> None:
    client = await WsClient.connect(srv.base)
    await asyncio.sleep(1.0)
    total = len(stored) + len(bigs)
    print(f"{kind:8s} idle RSS with {total} stored sessions: {rss_kib(srv.pid) / 1024:.1f} MiB")
    n = args.samples

    async def first(_: int, cwd: str | None = None) -> None:
        await client.call("session/list", {"cwd": cwd} if cwd else {})

    cursors: list[str | None] = [None]

    async def paging(_: int, cwd: str | None = None) -> None:
        params: dict[str, Any] = {"cwd": cwd} if cwd else {}
        if cursors[-1]:
            params["cursor"] = cursors[-1]
        got = await client.call("session/list", params)
        cursors.append(got.get("nextCursor"))  # at the end: None starts over

    filt = str(workspaces[3])
    report(kind, "session/list first page", *await timed(srv, n, first))
    report(kind, "session/list paging", *await timed(srv, n, paging))
    report(kind, "session/list cwd first page", *await timed(srv, n, lambda i: first(i, filt)))
    cursors[:] = [None]
    report(kind, "session/list cwd paging", *await timed(srv, n, lambda i: paging(i, filt)))

    picks = random.Random(7).sample(stored, min(len(stored), 3 * n + args.loaded))
    attach_ids, load_ids, idle_ids = picks[:n], picks[n : 2 * n], picks[2 * n :]

    async def attach(i: int) -> None:
        await client.call("_agentd/session/attach", {"sessionId": attach_ids[i][0], "afterSeq": 0})
        drain(client)

    async def load(i: int) -> None:
        sid, cwd, _ = load_ids[i]
        await client.call("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
        drain(client)

    async def warm(i: int) -> None:
        await client.call("_agentd/session/attach", {"sessionId": attach_ids[i][0], "afterSeq": 0})
        drain(client)

    report(kind, "attach cold (afterSeq 0)", *await timed(srv, n, attach))
    report(kind, "session/load cold", *await timed(srv, n, load))
    report(kind, "attach warm (afterSeq 0)", *await timed(srv, n, warm))

    idle_ids = idle_ids[: args.loaded]
    rss0 = await settle_rss(srv)
    for sid, cwd, _ in idle_ids:
        await client.call("session/resume", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
    drain(client)
    per = (await settle_rss(srv) - rss0) / max(1, len(idle_ids))
    print(f"{kind:8s} RSS per idle loaded stored session: {per:.1f} KiB ({len(idle_ids)} resumed)"
          + ("  (target met)" if per <= TARGET_IDLE_KIB else "  (target NOT met)"))  # fmt: skip
    rss0 = await settle_rss(srv)
    for _ in range(args.loaded):
        await client.call("session/new", {"cwd": str(workspaces[0]), "mcpServers": []})
    drain(client)
    per = (await settle_rss(srv) - rss0) / max(1, args.loaded)
    print(f"{kind:8s} RSS per idle new session: {per:.1f} KiB ({args.loaded} created)"
          + ("  (target met)" if per <= TARGET_IDLE_KIB else "  (target NOT met)"))  # fmt: skip
    rss0 = await settle_rss(srv)
    for sid, cwd, _ in bigs:
        await client.call("session/resume", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
    drain(client)
    per = (await settle_rss(srv) - rss0) / max(1, len(bigs))
    print(f"{kind:8s} RSS per loaded {args.turns}-turn session: {per:.1f} KiB ({len(bigs)} resumed)")
    await client.close()


async def main(args: argparse.Namespace) -> None:
    load = open("/proc/loadavg").read().strip()  # noqa: ASYNC230 - before anything runs
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load {load}")
    kinds = await backends()
    for kind in kinds:
        await measure(kind, args)
    if "postgres" not in kinds:
        print("postgres skipped (not reachable)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stored", type=int, default=10_000, help="one-turn sessions in the store")
    parser.add_argument("--loaded", type=int, default=500, help="sessions loaded for the idle RSS")
    parser.add_argument("--turns", type=int, default=200, help="turns of the long session")
    parser.add_argument("--big", type=int, default=40, help="copies of the long session")
    parser.add_argument("--samples", type=int, default=200, help="calls per latency figure")
    parser.add_argument("--smoke", action="store_true", help="a tiny quick run (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.stored, args.loaded, args.turns, args.big, args.samples = 200, 10, 3, 2, 10
    asyncio.run(main(args))
