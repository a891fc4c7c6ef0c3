"""agentd's turn against its floor: a bare relay doing the same I/O (prints figures; no asserts).

    .venv/bin/python bench/floor.py [--turns 300] [--db sqlite,postgres] [--tree DIR] [--smoke]
                                    [--kinds trivial,one-tool] [--profile] [--strace]

Why the relay (bench/floor_relay.py) is a fair floor — the least any server doing a
trivial turn's work with these libraries could spend:
- same bytes: a real `agentd serve` first runs a trivial and a one-tool turn with a
  recorder hooked in (RECORD below): every WebSocket frame it sent, every raw HTTP request
  it wrote to the model, every group commit's statements and rows, in order. The relay
  replays exactly that: the same frames (re-encoded with orjson, seq and id set), the same
  request bytes (agentd's own request body and headers, the history of a 6th turn), the same
  rows with the same statements;
- same libraries: the `websockets` library serving the WebSocket (agentd: uvicorn's
  `websockets-sansio`, same protocol code) under uvloop; one kept-alive HTTP/1.1
  connection to the same fake model (bench/turnkit.py), the SSE stream decoded and each
  event parsed with orjson, a chunk frame sent per text delta, as agentd does;
- same durability: the same number of group commits, each acknowledged before the frames
  that follow it go out (deliver-after-commit): SQLite in WAL with synchronous=NORMAL on a
  writer thread of its own (agentd's settings), or Postgres through asyncpg with agentd's
  own single-statement commit (its NOTIFY and fencing triggers included: the relay's
  database is a schema copy of agentd's).
What the floor does not do is everything else agentd is for: validating requests,
sessions, budgets, the loop's decisions, permissions, the event log's fan-out, metrics.

Measured interleaved in one run: agentd and the relay run at the same time against the same
fake model; turns alternate agentd, relay, agentd, relay… and each process's CPU (user +
system, all threads, from /proc) is read around its own turns, so a busy machine slows both
alike. Printed per database and kind of turn: CPU per turn and p50 latency of each, their
ratios (targets: trivial CPU ≤ 1.5×, p50 ≤ 1.3×; one-tool CPU ≤ 1.6×), the per-thread split
of each process (event loop vs writer) and the WebSocket bytes per turn of each.

`--profile`: py-spy samples both processes during each kind's measured turns; printed per
process, samples per turn (≈ ms of CPU) by thread (loop / writer / other), the loop thread's
by layer (uvloop's C code, agentd's packages, each library) and its top functions
(bench/spy_split.py). `--strace`: strace follows both for the same turns; printed per process
and thread, system calls per turn by kind (bench/strace_split.py) — the CPU figures of that
run are strace's, its counts are what it is for (bench/floor_trace.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pickle
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import floor_trace
import orjson
import turnkit
from profile_turn import diff_threads, thread_cpu
from turnkit import (
    TOOL_MARK,
    Server,
    agentd_server,
    backends,
    free_port,
    model_process,
    pct,
    postgres_database,
)

from tests.support.client import WsClient, text_prompt

HERE = Path(__file__).resolve().parent
TARGETS = {"trivial": (1.5, 1.3), "one-tool": (1.6, None)}  # (CPU ratio, p50 ratio)
WARM_TURNS = 5  # the recorded turn is a session's 6th: a request body of a typical length

# Hooked into the recording server (SIGUSR1: start a new timeline; SIGUSR2: write them all).
# The hooks sit where agentd's I/O leaves it: the group commit's driver calls, the
# WebSocket send, the model connection's write.
RECORD = """
import pickle, signal, orjson
_ALL, _TL = [], [None]
def _start(*_):
    _TL[0] = []
    _ALL.append(_TL[0])
def _dump(*_):
    _TL[0] = None
    with open({out!r}, "wb") as f:
        pickle.dump(_ALL, f)
signal.signal(signal.SIGUSR1, _start)
signal.signal(signal.SIGUSR2, _dump)
def _rec(kind, value):
    if _TL[0] is not None:
        _TL[0].append((kind, value))
import agentd.store.sqlite_commit as _sc, agentd.store.pg_commit as _pc
_sc_commit, _sc_exec, _pc_exec = _sc.commit, _sc._execute, _pc.execute
import threading
_CUR = threading.local()  # the commit under way on this (the writer's) thread
def _commit(conn, batches, now):
    # Its own list: the loop thread records frames meanwhile, so "the last record" may not be it.
    _CUR.rows = []
    _rec("commit", _CUR.rows)
    return _sc_commit(conn, batches, now)
def _execute(cursor, sql, rows):
    if _TL[0] is not None and getattr(_CUR, "rows", None) is not None:
        _CUR.rows.append((sql, [tuple(r) for r in rows]))
    return _sc_exec(cursor, sql, rows)
async def _pg_execute(driver, sql, params):
    _rec("commit", (sql, params))
    return await _pc_exec(driver, sql, params)
_sc.commit, _sc._execute, _pc.execute = _commit, _execute, _pg_execute
import starlette.websockets as _sw
_send_text = _sw.WebSocket.send_text
async def _send(self, data):
    _rec("frame", orjson.loads(data))
    return await _send_text(self, data)
_sw.WebSocket.send_text = _send
try:  # frames written straight to uvicorn's socket, several at once (issue 32 item 1)
    import agentd.transport.socket_write as _sk
except ImportError:  # a tree from before it
    _sk = None
if _sk is not None:
    _sk_write = _sk.SocketWriter.write
    def _write_frames(self, frames):
        for frame in frames:
            _rec("frame", orjson.loads(frame))
        return _sk_write(self, frames)
    _sk.SocketWriter.write = _write_frames
import agentd.providers.http.conn as _hc
_write = _hc.Connection.write
async def _hwrite(self, data, limit_s, *rest):
    if _TL[0] is not None and _TL[0] and _TL[0][-1][0] == "http":
        _TL[0][-1] = ("http", _TL[0][-1][1] + bytes(data))
    else:
        _rec("http", bytes(data))
    return await _write(self, data, limit_s, *rest)
_hc.Connection.write = _hwrite
"""


async def settle() -> None:
    await asyncio.sleep(0.2)  # a signal to another process: give its handler a moment


async def record(kind: str, model_url: str) -> dict[str, Any]:
    """One trivial and one one-tool turn of a real `agentd serve`, as timelines."""
    out = Path(tempfile.mkdtemp(prefix="agentd-floor-")) / "script.pickle"
    async with agentd_server(kind, model_url, prelude=RECORD.format(out=str(out))) as server:
        client = await WsClient.connect(server.base)
        new = {"cwd": str(server.workspace), "mcpServers": []}
        sids = [(await client.call("session/new", new))["sessionId"] for _ in range(2)]
        for sid, text in zip(sids, ("hi", f"{TOOL_MARK} please"), strict=True):
            for _ in range(WARM_TURNS):
                await client.call("session/prompt", text_prompt(sid, text))
        for sid, text in zip(sids, ("hi", f"{TOOL_MARK} please"), strict=True):
            os.kill(server.pid, signal.SIGUSR1)
            await settle()
            await client.call("session/prompt", text_prompt(sid, text))
        os.kill(server.pid, signal.SIGUSR2)
        deadline = time.monotonic() + 30
        while not out.exists() and time.monotonic() < deadline:  # noqa: ASYNC110 - another process
            await asyncio.sleep(0.05)
        await settle()
        await client.close()
    trivial, tool = pickle.loads(out.read_bytes())
    shutil.rmtree(out.parent, ignore_errors=True)
    for name, timeline in (("trivial", trivial), ("one-tool", tool)):
        kinds = [k for k, _ in timeline]
        if (
            "http" not in kinds
            or kinds.count("commit") < 2
            or not any(v for k, v in timeline if k == "commit")
        ):
            raise SystemExit(f"the {name} turn was not recorded whole: {kinds}")
    return {"trivial": trivial, "tool": tool, "session_ids": sids, "tool_mark": TOOL_MARK}


def fence_of(timeline: list[tuple[str, Any]]) -> int | None:
    """The lease token a Postgres commit carried (the relay's session holds the same)."""
    for kind, step in timeline:
        if kind == "commit" and isinstance(step, tuple):
            params = step[1]
            if isinstance(params[1], str):  # rows as json parameters: the token last in each
                fences = [row[-1] for row in orjson.loads(params[1]) if row[-1] is not None]
            else:  # one array per column (a tree from before)
                fences = [f for f in params[9] if f is not None]
            return fences[0] if fences else None
    return None


@asynccontextmanager
async def relay_database(
    kind: str, agentd_url: str, home: Path, script: dict[str, Any]
) -> AsyncIterator[str]:
    """A database with agentd's schema and the recorded turns' session rows."""
    sids = script["session_ids"]
    if kind == "sqlite":
        path = str(home / "relay.db")
        src = agentd_url.split("///", 1)[1]
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        with sqlite3.connect(src) as a:
            schema = a.execute(
                "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'"
            )
            for (sql,) in schema.fetchall():
                db.execute(sql)
        db.execute(f"ATTACH '{src}' AS a")
        db.execute("CREATE TEMP TABLE s AS SELECT * FROM a.sessions LIMIT 1")
        for sid in sids:
            db.execute("UPDATE s SET id = ?", (sid,))
            if db.execute("INSERT INTO sessions SELECT * FROM s").rowcount != 1:
                raise SystemExit("agentd's database holds no session to copy")
        db.execute("DETACH a")
        db.close()
        yield path
        return
    import asyncpg

    async with postgres_database() as url:
        plain = url.replace("+asyncpg", "")
        src = agentd_url.replace("+asyncpg", "")
        run = subprocess.run
        dump = (await asyncio.to_thread(run, ["pg_dump", "-s", src], capture_output=True, check=True)).stdout
        await asyncio.to_thread(run, ["psql", "-q", plain], input=dump, capture_output=True, check=True)
        a, b = await asyncpg.connect(src), await asyncpg.connect(plain)
        found = await a.fetchrow("SELECT * FROM sessions LIMIT 1")
        if found is None:
            raise SystemExit("agentd's database holds no session to copy")
        row = dict(found)
        cols = ", ".join(f'"{c}"' for c in row)
        marks = ", ".join(f"${i + 1}" for i in range(len(row)))
        for sid, timeline in zip(sids, (script["trivial"], script["tool"]), strict=True):
            row["id"] = sid
            await b.execute(f"INSERT INTO sessions ({cols}) VALUES ({marks})", *row.values())
            fence = fence_of(timeline)
            if fence is not None:
                await b.execute(
                    "INSERT INTO session_leases (session_id, owner, token, expires_at) "
                    "VALUES ($1, 'floor', $2, now() + interval '1 day')",
                    sid, fence,
                )  # fmt: skip
        await a.close()
        await b.close()
        yield plain


@asynccontextmanager
async def relay_process(
    kind: str, agentd: Server, script: dict[str, Any], model_url: str
) -> AsyncIterator[Server]:
    home = Path(tempfile.mkdtemp(prefix="agentd-floor-"))
    script_path = home / "script.pickle"
    script_path.write_bytes(pickle.dumps(script))
    async with relay_database(kind, agentd.db_url, home, script) as db:
        port = free_port()
        cmd = [sys.executable, str(HERE / "floor_relay.py"), str(script_path), str(port), db,
               str(agentd.workspace), model_url]  # fmt: skip
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # noqa: ASYNC220
        try:
            assert proc.stdout is not None
            if (await asyncio.to_thread(proc.stdout.readline)).strip() != "ready":
                raise SystemExit(f"the relay did not start (exit {proc.poll()})")
            yield Server(f"http://127.0.0.1:{port}", proc.pid, agentd.workspace, db)
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                await asyncio.to_thread(proc.wait, 10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            shutil.rmtree(home, ignore_errors=True)


async def turn(server: Server, client: WsClient, sid: str, text: str) -> tuple[float, float, int]:
    """(latency s, server CPU s, WebSocket bytes received) of one turn."""
    cpu0, t0 = server.cpu_s(), time.perf_counter()
    result = await client.call("session/prompt", text_prompt(sid, text))
    lat, cpu = time.perf_counter() - t0, server.cpu_s() - cpu0
    if result.get("stopReason") != "end_turn":
        raise SystemExit(f"turn ended with {result}")
    size = sum(len(orjson.dumps(f)) for f in client.frames)
    client.frames.clear()
    while not client.notifications.empty():  # bounded: the figures need no updates
        client.notifications.get_nowait()
    return lat, cpu, size


def ratio(a: float, b: float) -> str:
    """a/b to two decimals ("n/a" when b is 0: a smoke run's few turns may read no clock tick)."""
    return f"{a / b:.2f}" if b > 0 else "n/a"


def port_of(server: Server) -> int:
    return int(server.base.rsplit(":", 1)[1].split("/")[0])


async def compare(
    kind: str, label: str, agentd: Server, relay: Server, turns: int, tools: list[str], model_url: str
) -> None:
    text = f"{TOOL_MARK} please" if label == "one-tool" else "hi"
    new = {"cwd": str(agentd.workspace), "mcpServers": []}
    ca, cr = await WsClient.connect(agentd.base), await WsClient.connect(relay.base)
    # agentd: a fresh session every 10 turns (a turn's cost grows with its history), each warmed
    sids = [(await ca.call("session/new", new))["sessionId"] for _ in range(-(-turns // 10))]
    rsid = (await cr.call("session/new", new))["sessionId"]
    for sid in sids:
        await turn(agentd, ca, sid, text)
        await turn(relay, cr, rsid, text)
    figures: dict[str, list[tuple[float, float, int]]] = {"agentd": [], "floor": []}
    ports = {port_of(agentd): "ws", port_of(relay): "ws", 5432: "postgres"}
    ports[int(model_url.rsplit(":", 1)[1].split("/")[0])] = "model"
    pids = {"agentd": agentd.pid, "floor": relay.pid}
    async with floor_trace.observe(tools, pids, ports) as observed:
        threads0 = thread_cpu(agentd.pid), thread_cpu(relay.pid)
        for i in range(turns):
            figures["agentd"].append(await turn(agentd, ca, sids[i // 10], text))
            figures["floor"].append(await turn(relay, cr, rsid, text))
    split = [
        diff_threads(threads0[0], thread_cpu(agentd.pid)),
        diff_threads(threads0[1], thread_cpu(relay.pid)),
    ]
    await ca.close()
    await cr.close()
    cpu = {k: sum(f[1] for f in v) * 1000 / turns for k, v in figures.items()}
    p50 = {k: pct([f[0] for f in v], 50) for k, v in figures.items()}
    size = {k: sum(f[2] for f in v) / turns for k, v in figures.items()}
    cpu_target, p50_target = TARGETS[label]
    r_cpu, r_p50 = ratio(cpu["agentd"], cpu["floor"]), ratio(p50["agentd"], p50["floor"])
    p50_note = f" (target ≤ {p50_target})" if p50_target else ""
    print(f"{kind:<8} {label:<8} turns={turns} "
          f"cpu/turn agentd={cpu['agentd']:.2f} ms floor={cpu['floor']:.2f} ms "
          f"ratio={r_cpu} (target ≤ {cpu_target}) | p50 agentd={p50['agentd']:.2f} ms "
          f"floor={p50['floor']:.2f} ms ratio={r_p50}{p50_note}", flush=True)  # fmt: skip
    for (name, pid), threads in zip((("agentd", agentd.pid), ("floor", relay.pid)), split, strict=True):
        # the event loop runs on the main thread (its id is the pid); the busiest other is the writer
        ordered = sorted(threads.items(), key=lambda kv: (not kv[0].endswith(f"[{pid}]"), -kv[1]))
        parts = ", ".join(
            f"{'loop' if t.endswith(f'[{pid}]') else 'thread'} {s * 1000 / turns:.2f}" for t, s in ordered
        )
        print(f"{'':<8} {label:<8} {name} threads (ms CPU/turn): {parts or 'none'}", flush=True)
    print(
        f"{'':<8} {label:<8} WebSocket bytes/turn agentd={size['agentd']:.0f} floor={size['floor']:.0f}",
        flush=True,
    )
    for line in observed.lines(turns):
        print(f"{'':<8} {label:<8} {line}", flush=True)


async def main(args: argparse.Namespace) -> None:
    kinds = [k for k in await backends() if k in args.db.split(",")]
    labels = [k for k in ("trivial", "one-tool") if k in args.kinds.split(",")]
    tools = floor_trace.usable([t for t in ("profile", "strace") if getattr(args, t)])
    with model_process() as model_url:
        for kind in kinds:
            script = await record(kind, model_url)
            async with agentd_server(kind, model_url) as agentd:
                # agentd's database holds its schema once it serves, and a session row
                # once one is made: the relay's database is a copy of both
                client = await WsClient.connect(agentd.base)
                await client.call("session/new", {"cwd": str(agentd.workspace), "mcpServers": []})
                await client.close()
                async with relay_process(kind, agentd, script, model_url) as relay:
                    for label in labels:
                        await compare(kind, label, agentd, relay, args.turns, tools, model_url)
    if "postgres" in args.db and "postgres" not in kinds:
        print("postgres skipped (not reachable)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--db", default="sqlite,postgres", help="which of sqlite,postgres")
    parser.add_argument("--kinds", default="trivial,one-tool", help="which turns: trivial,one-tool")
    parser.add_argument("--profile", action="store_true", help="py-spy both during the measured turns")
    parser.add_argument("--strace", action="store_true", help="count both's system calls per turn")
    parser.add_argument("--smoke", action="store_true", help="a tiny run (a few seconds)")
    parser.add_argument("--tree", help="whose `agentd serve` (a source tree, e.g. a `git archive` of a base)")
    ns = parser.parse_args()
    if ns.tree:
        turnkit.ROOT = Path(ns.tree).resolve()
    if ns.smoke:
        ns.turns = 6
    asyncio.run(main(ns))
