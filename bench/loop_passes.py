"""Event-loop passes per turn, and the hand-off chain of one turn (prints figures; no asserts).

    .venv/bin/python bench/loop_passes.py [--turns 200] [--db sqlite|postgres]
                                          [--kind trivial|one-tool] [--tree DIR] [--chain]

A pass is one run of uvloop's ready queue (one loop iteration with callbacks ready: what
strace sees as an epoll_wait with timeout 0). The prelude below wraps the loop's
`call_soon` / `call_soon_threadsafe` on the instance (asyncio's C futures and tasks look
`call_soon` up by name, so every task step and future callback goes through it) and counts
passes with a sentinel: the first callback after the sentinel opens a new pass and schedules
the next sentinel, which runs first in the next batch. Deterministic: the figures do not
depend on the host's load. Printed per turn: passes, callbacks, task steps, thread
hand-offs; with `--chain`, every callback of the last measured turn with its pass, its
depth (hops since the last I/O or thread wake-up) and what it resumed (a task's coroutine
and the line it is suspended at, or the callback's name).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import tempfile
import time
from pathlib import Path

import turnkit
from turnkit import TOOL_MARK, agentd_server, model_process

from tests.support.client import WsClient, text_prompt

HOOK = """
import json, signal, sys, threading, uvloop
_S = {{"on": False, "passes": 0, "cbs": 0, "steps": 0, "threadsafe": 0, "pending": False,
       "depth": 0, "log": [], "pass": 0}}
def _desc(cb, args):
    me = getattr(cb, "__self__", None)
    if me is not None and type(me).__name__ == "Task" or type(me).__name__ == "_PyTask":
        coro = me.get_coro()
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None)
        where = ""
        inner = coro
        while inner is not None:
            f = getattr(inner, "cr_frame", None) or getattr(inner, "gi_frame", None)
            if f is not None:
                where = f"{{f.f_code.co_filename.rsplit('/', 2)[-2:]}}:{{f.f_lineno}} {{f.f_code.co_name}}"
            inner = getattr(inner, "cr_await", None) or getattr(inner, "gi_yieldfrom", None)
        return "step " + getattr(coro, "__qualname__", "?") + " @ " + where.replace("'", "")
    name = getattr(cb, "__qualname__", None) or type(cb).__name__
    return "cb " + str(name)
def _install(loop):
    soon = loop.call_soon
    threadsafe = loop.call_soon_threadsafe
    main = threading.get_ident()
    def _sentinel():
        _S["pending"] = False
    def _wrap(cb, args, hop):
        parent = _S["depth"] if hop else 0
        def run(*a):
            if _S["on"]:
                if not _S["pending"]:
                    _S["pending"] = True
                    _S["passes"] += 1
                    soon(_sentinel)
                _S["cbs"] += 1
                d = _desc(cb, a)
                if d.startswith("step "):
                    _S["steps"] += 1
                _S["depth"] = parent + 1
                if len(_S["log"]) < 200000:
                    _S["log"].append((_S["passes"], parent + 1, d))
            try:
                return cb(*a)
            finally:
                _S["depth"] = 0
        return run
    def call_soon(cb, *args, context=None):
        return soon(_wrap(cb, args, threading.get_ident() == main), *args, context=context)
    def call_soon_threadsafe(cb, *args, context=None):
        if _S["on"]:
            _S["threadsafe"] += 1
        return threadsafe(_wrap(cb, args, False), *args, context=context)
    loop.call_soon = call_soon
    loop.call_soon_threadsafe = call_soon_threadsafe
_init = uvloop.Loop.__init__
def _loop_init(self, *a, **k):
    _init(self, *a, **k)
    _install(self)
uvloop.Loop.__init__ = _loop_init
def _start(*_):
    _S.update(on=True, passes=0, cbs=0, steps=0, threadsafe=0, log=[])
signal.signal(signal.SIGUSR1, _start)
def _mark(*_):
    _S["log"].append((_S["passes"], -1, "--- turn mark ---"))
signal.signal(signal.SIGHUP, _mark)
def _dump(*_):
    _S["on"] = False
    with open({out!r} + ".tmp", "w") as f:
        json.dump({{k: _S[k] for k in ("passes", "cbs", "steps", "threadsafe", "log")}}, f)
    import os
    os.replace({out!r} + ".tmp", {out!r})
signal.signal(signal.SIGUSR2, _dump)
"""


async def measure(args: argparse.Namespace) -> dict[str, object]:
    out = Path(tempfile.mkdtemp(prefix="agentd-passes-")) / "passes.json"
    text = f"{TOOL_MARK} please" if args.kind == "one-tool" else "hi"
    with model_process() as model_url:
        async with agentd_server(args.db, model_url, prelude=HOOK.format(out=str(out))) as server:
            client = await WsClient.connect(server.base)
            new = {"cwd": str(server.workspace), "mcpServers": []}
            n = -(-args.turns // 10)
            sids = [(await client.call("session/new", new))["sessionId"] for _ in range(n)]
            for sid in sids:  # each session warmed by one turn, as bench/profile_turn.py
                await client.call("session/prompt", text_prompt(sid, text))
            os.kill(server.pid, signal.SIGUSR1)
            for i in range(args.turns):
                os.kill(server.pid, signal.SIGHUP)  # each turn's start, in the log
                await client.call("session/prompt", text_prompt(sids[i // 10], text))
                client.frames.clear()
                while not client.notifications.empty():
                    client.notifications.get_nowait()
            os.kill(server.pid, signal.SIGUSR2)
            deadline = time.monotonic() + 30
            while not out.exists() and time.monotonic() < deadline:  # noqa: ASYNC110 - another process
                await asyncio.sleep(0.05)
            await client.close()
    data: dict[str, object] = json.loads(out.read_text())
    return data


def report(args: argparse.Namespace, data: dict[str, object]) -> None:
    t = args.turns
    print(f"{args.db} {args.kind}, {t} turns: per turn: passes {data['passes'] / t:.2f}, "  # type: ignore[operator]
          f"callbacks {data['cbs'] / t:.2f}, task steps {data['steps'] / t:.2f}, "  # type: ignore[operator]
          f"call_soon_threadsafe {data['threadsafe'] / t:.2f}")  # type: ignore[operator]  # fmt: skip
    log = data["log"]
    assert isinstance(log, list)
    marks = [i for i, e in enumerate(log) if e[1] == -1]
    per = sorted(log[b][0] - log[a][0] for a, b in itertools.pairwise(marks))
    if per:
        print(f"passes per turn between marks: min {per[0]}, median {per[len(per) // 2]}, max {per[-1]}")
    if not marks or not args.chain:
        return
    last = log[marks[-1] + 1 :]
    first = last[0][0] if last else 0
    print("chain of the last turn (pass relative to its first, depth = hops since I/O or a thread):")
    for p, depth, desc in last:
        print(f"  pass {p - first:3d}  d{depth:<2d} {desc}")


if __name__ == "__main__":
    parser = turnkit.turn_parser(__doc__)
    parser.add_argument("--chain", action="store_true", help="print the last turn's hand-off chain")
    ns = turnkit.parse_turn_args(parser)
    report(ns, asyncio.run(measure(ns)))
