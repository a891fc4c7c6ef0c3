"""Where a warm trivial turn spends the server's CPU (prints a profile; no asserts).

    .venv/bin/python bench/profile_turn.py [--turns 300] [--top 10] [--sessions 1] [--save F]
                                           [--hide-sniffio] [--smoke]
                                           [--db sqlite|postgres] [--chunk-gap-ms 0] [--tree DIR]
                                           [--kind trivial|one-tool] [--areas agentd.loop,…]

The set-up of bench/turn.py (SQLite; `--db postgres`: Postgres): `agentd serve` in a
subprocess with cProfile hooked to SIGUSR1 (start) / SIGUSR2 (stop and dump), so only the
server's main thread — its event loop — is profiled (thread CPU time, not wall time), only
over the measured turns, with no client code in the figures. Printed: the top self-time
(tottime) functions per turn, self time summed per package, and how often httpcore asks
which async library runs
(`current_async_library`, which imports `sniffio` each time).

`--sessions N` (N > 1): N sessions, each on its own WebSocket, prompt `--turns` turns in all
at the same time (the set-up of bench/concurrency.py) — what grows with the number of live
sessions. Also printed: the server's CPU per turn by thread (the event loop, the SQLite
writer, …), from /proc. `--save F` keeps the profile (pstats) for a closer look.

`--kind one-tool`: every turn's prompt asks the fake model for one `read_file` call, then
the answer (two samplings, one tool round: bench/floor.py's one-tool turn). `--areas`: also
print Python calls and self time per turn summed by file under those packages (e.g.
`agentd.loop,agentd.core,agentd.agents,agentd.tools`), and their total.

`--hide-sniffio` makes `import sniffio` fail in the server after a real path search (as in
an install without it: sniffio is no dependency of httpcore or of recent anyio), to price the
failed imports.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pstats
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import turnkit
from turnkit import CLK_TCK, TOOL_MARK, Server, agentd_server, model_process

from tests.support.client import WsClient, text_prompt

HOOK = """
import cProfile, gc, json, signal, threading, time
_prof = cProfile.Profile(time.thread_time)  # CPU of the loop's thread: waiting is not cost
# The garbage collector's CPU over the measured turns, by generation (a full collection
# lands inside whatever function allocated last: the profile alone hides it).
_gc = {{"on": False, "t0": 0.0, "s": 0.0, "n": [0, 0, 0]}}
def _gc_cb(phase, info):
    if not _gc["on"] or threading.current_thread() is not threading.main_thread():
        return
    if phase == "start":
        _gc["t0"] = time.thread_time()
    else:
        _gc["s"] += time.thread_time() - _gc["t0"]
        _gc["n"][info["generation"]] += 1
gc.callbacks.append(_gc_cb)
def _start(*_):
    _gc["on"] = True
    _prof.enable()
signal.signal(signal.SIGUSR1, _start)
def _dump(*_):
    _prof.disable()
    _gc["on"] = False
    with open({out!r} + ".gc", "w") as f:
        json.dump({{"s": _gc["s"], "n": _gc["n"], "frozen": gc.get_freeze_count()}}, f)
    _prof.dump_stats({out!r})
signal.signal(signal.SIGUSR2, _dump)
"""

# A failed import walks every sys.path entry; this finder does that walk for a name that
# does not exist, then fails the import the way a missing sniffio does.
HIDE_SNIFFIO = """
import sys, importlib.machinery
class _HideSniffio:
    calls = 0
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "sniffio":
            return None
        cls.calls += 1
        importlib.machinery.PathFinder.find_spec("sniffio_not_installed")
        raise ModuleNotFoundError("No module named 'sniffio'", name="sniffio")
sys.modules.pop("sniffio", None)
sys.meta_path.insert(0, _HideSniffio)
"""


def prompt_text(args: argparse.Namespace) -> str:
    return f"{TOOL_MARK} please" if args.kind == "one-tool" else "hi"


async def profile(args: argparse.Namespace) -> tuple[float, Path]:
    """(server CPU seconds over the measured turns, the profile file)."""
    out = Path(tempfile.mkdtemp(prefix="agentd-prof-")) / "turn.prof"
    prelude = (HIDE_SNIFFIO if args.hide_sniffio else "") + HOOK.format(out=str(out))
    with model_process(chunk_gap_ms=args.chunk_gap_ms) as model_url:
        async with agentd_server(args.db, model_url, prelude=prelude) as server:
            client = await WsClient.connect(server.base)
            new = {"cwd": str(server.workspace), "mcpServers": []}
            if args.sessions > 1:
                cpu, threads = await concurrent_turns(server, args)
            else:
                # Short sessions, as bench/turn.py: 10 turns each, every one warmed by one turn.
                n = -(-args.turns // 10)
                sids = [(await client.call("session/new", new))["sessionId"] for _ in range(n)]
                for sid in sids:
                    await client.call("session/prompt", text_prompt(sid, prompt_text(args)))
                os.kill(server.pid, signal.SIGUSR1)
                cpu0, threads0 = server.cpu_s(), thread_cpu(server.pid)
                for i in range(args.turns):
                    await client.call("session/prompt", text_prompt(sids[i // 10], prompt_text(args)))
                    client.frames.clear()
                    while not client.notifications.empty():
                        client.notifications.get_nowait()
                cpu = server.cpu_s() - cpu0
                threads = diff_threads(threads0, thread_cpu(server.pid))
            os.kill(server.pid, signal.SIGUSR2)
            deadline = time.monotonic() + 30
            while not out.exists() and time.monotonic() < deadline:  # noqa: ASYNC110 - another process
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # the dump is written in one go; let it finish
            await client.close()
    for name, seconds in sorted(threads.items(), key=lambda kv: kv[1], reverse=True):
        print(f"thread {name:<20} {seconds * 1000 / args.turns:6.2f} ms CPU/turn")
    return cpu, out


async def concurrent_turns(server: Server, args: argparse.Namespace) -> tuple[float, dict[str, float]]:
    """`args.sessions` sessions on their own WebSockets, warmed, then `args.turns` turns in all
    at once; (server CPU seconds, CPU seconds by thread) over those turns."""
    new = {"cwd": str(server.workspace), "mcpServers": []}
    clients = [await WsClient.connect(server.base) for _ in range(args.sessions)]
    sids = [(await c.call("session/new", new))["sessionId"] for c in clients]
    pairs = list(zip(clients, sids, strict=True))
    await asyncio.gather(*(c.call("session/prompt", text_prompt(s, prompt_text(args))) for c, s in pairs))
    per = -(-args.turns // args.sessions)

    async def run(client: WsClient, sid: str) -> None:
        for _ in range(per):
            await client.call("session/prompt", text_prompt(sid, prompt_text(args)))
            client.frames.clear()
            while not client.notifications.empty():
                client.notifications.get_nowait()

    os.kill(server.pid, signal.SIGUSR1)
    cpu0, threads0 = server.cpu_s(), thread_cpu(server.pid)
    await asyncio.gather(*(run(c, s) for c, s in pairs))
    cpu, threads = server.cpu_s() - cpu0, diff_threads(threads0, thread_cpu(server.pid))
    args.turns = per * args.sessions
    for c in clients:
        await c.close()
    return cpu, threads


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds so far of each of the process's threads, by name (same names summed)."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        key = f"{name}[{task.name}]"
        out[key] = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return out


def diff_threads(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0) > 0}


def package(file: str) -> str:
    """Where a function lives, coarsely: server.<part>, a third-party package, the stdlib module."""
    if "site-packages/" in file:
        return file.split("site-packages/")[1].split("/")[0]
    if "/agentd/" in file:  # agentd's own code, by sub-package (a layer of the turn)
        part = file.rsplit("/agentd/", 1)[1].split("/")[0]
        return "agentd." + part.removesuffix(".py")
    if file.startswith("~") or file.startswith("<"):
        return "builtins / frozen importlib"
    return "stdlib " + Path(file).parent.name if Path(file).parent.name != "python3.11" else Path(file).stem


def report(args: argparse.Namespace, cpu: float, out: Path) -> None:
    stats = pstats.Stats(str(out))
    collected = json.loads(Path(str(out) + ".gc").read_text())
    if args.save:
        shutil.copy(out, args.save)
    shutil.rmtree(out.parent, ignore_errors=True)
    entries = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in entries.values())
    sniff = "hidden (failed imports)" if args.hide_sniffio else "installed"
    print(f"turns={args.turns} sessions={args.sessions} sniffio={sniff} "
          f"server CPU/turn={cpu * 1000 / args.turns:.2f} ms "
          f"(its main thread's CPU as profiled, with cProfile's overhead: "
          f"{total * 1000 / args.turns:.2f} ms)")  # fmt: skip
    # Deterministic where CPU time is not (a busy machine): Python calls made on the loop
    # thread per turn (cProfile counts each call and each resumption of a coroutine).
    print(f"function calls on the event loop per turn: {stats.total_calls / args.turns:.0f}")  # type: ignore[attr-defined]
    gc_ms = collected["s"] * 1000 / args.turns
    print(f"garbage collection on the event loop: {gc_ms:.3f} ms/turn (collections by generation "
          f"{collected['n']}, objects frozen at start-up: {collected['frozen']})")  # fmt: skip
    calls = sum(v[1] for k, v in entries.items() if k[2] == "current_async_library" and "httpcore" in k[0])
    cum = sum(v[3] for k, v in entries.items() if k[2] == "current_async_library" and "httpcore" in k[0])
    print(
        f"httpcore current_async_library: {calls / args.turns:.1f} calls/turn, "
        f"{cum * 1e6 / args.turns:.0f} µs/turn cumulative ({cum / total * 100:.1f} % of profiled time)"
    )
    print(f"top {args.top} by self time (per turn):")
    top = sorted(entries.items(), key=lambda kv: kv[1][2], reverse=True)[: args.top]
    for (file, line, func), (_cc, nc, tt, _ct, _callers) in top:
        where = file.replace(str(Path(__file__).resolve().parents[1]) + "/", "")
        where = where.split("site-packages/")[-1]
        print(f"  {tt * 1e6 / args.turns:7.0f} µs {tt / total * 100:5.1f} %  {nc / args.turns:6.1f} calls  "
              f"{func}  {where}:{line}")  # fmt: skip
    by_package: dict[str, float] = {}
    for (file, _line, _func), v in entries.items():
        by_package[package(file)] = by_package.get(package(file), 0.0) + v[2]
    print(f"top {args.top} packages by self time (per turn):")
    for name, tt in sorted(by_package.items(), key=lambda kv: kv[1], reverse=True)[: args.top]:
        print(f"  {tt * 1e6 / args.turns:7.0f} µs {tt / total * 100:5.1f} %  {name}")
    if args.areas:
        areas(args, entries)


def areas(args: argparse.Namespace, entries: dict[Any, Any]) -> None:
    """Calls and self time per turn by file, for the files of the packages in `--areas`."""
    wanted = tuple(args.areas.split(","))
    by_file: dict[str, list[float]] = {}
    for (file, _line, _func), (_cc, nc, tt, _ct, _callers) in entries.items():
        if "/agentd/" not in file or "site-packages/" in file:
            continue
        rel = "agentd/" + file.rsplit("/agentd/", 1)[1]
        if not rel.replace("/", ".").startswith(wanted):
            continue
        acc = by_file.setdefault(rel, [0.0, 0.0])
        acc[0] += nc
        acc[1] += tt
    calls = sum(v[0] for v in by_file.values()) / args.turns
    self_us = sum(v[1] for v in by_file.values()) * 1e6 / args.turns
    print(f"areas {args.areas}: {calls:.1f} calls/turn, {self_us:.0f} µs self/turn; by file:")
    for rel, (nc, tt) in sorted(by_file.items(), key=lambda kv: kv[1][0], reverse=True):
        print(f"  {nc / args.turns:7.1f} calls {tt * 1e6 / args.turns:6.0f} µs  {rel}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=1, help="> 1: that many sessions at once")
    parser.add_argument("--save", help="keep the profile (pstats) in this file")
    parser.add_argument("--hide-sniffio", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="a tiny run (a few seconds)")
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--chunk-gap-ms", type=float, default=0.0, help="the fake's pause between chunks")
    parser.add_argument("--kind", choices=["trivial", "one-tool"], default="trivial")
    parser.add_argument("--areas", default="", help="comma-separated packages: calls per turn by file")
    parser.add_argument("--tree", help="whose `agentd serve` (a source tree, e.g. a `git archive` of a base)")
    ns = parser.parse_args()
    if ns.smoke:
        ns.turns = 5
    if ns.tree:
        turnkit.ROOT = Path(ns.tree).resolve()
    report(ns, *asyncio.run(profile(ns)))
