"""CPU per trivial turn through the session's event path — journal, writer, hub, metrics —
in process, for two source trees side by side (prints figures; no asserts).

    .venv/bin/python bench/event_path.py TREE_A TREE_B [--clients 1] [--pairs 5] [--turns 3000]
                                         [--opcodes]

Each measurement is a fresh process importing agentd from its tree. Per turn, what a trivial
turn hands the journal (bench/profile_turn.py's counts): the user message and its
conversation row, `turn_started`, two streamed chunks while that batch is in flight, three
more once it is published, the final text and its row, `usage`, `turn_ended`, and the
drain barrier — through a real `EventWriter` (with metrics) whose store commits at once (no
database, no thread: this measures the loop's side only) and an `EventHub` with N live
`Connection`s (their queues emptied every 200 turns; no socket). A and B alternate,
`--pairs` times; printed: µs of CPU per turn and B/A. The store's and the socket's costs are
left out on purpose: this is the part issue 32's event-path changes move.

`--opcodes`: instead of CPU, the Python opcodes and Python calls executed per turn (a
`sys.settrace` opcode count over the same turns: deterministic, load-independent; C code,
uvloop and the builtins count as nothing).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

ONE = r"""
import asyncio, sys, time
from types import SimpleNamespace
from typing import Any, cast
tree, clients, turns, opcodes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
sys.path.insert(0, tree)
count = [0, 0]  # Python opcodes and calls executed over the measured turns (`--opcodes`)

def tracer(frame, event, arg):
    if event == "call":
        count[1] += 1
        frame.f_trace_opcodes = True
    elif event == "opcode":
        count[0] += 1
    return tracer

import agentd
assert agentd.__file__.startswith(tree), agentd.__file__
from agentd.core import AgentText, AgentTextChunk, Message, TurnEnded, TurnStarted, UsageReported
from agentd.core.updates.messages import UserMessage
from agentd.infra import Metrics
from agentd.session.eventlog.hub import EventHub
from agentd.session.eventlog.journal import Journal
from agentd.session.eventlog.writer import EventWriter
from agentd.transport.connection import Connection
from agentd.transport.render import ACP_RENDERER
SID = "sess_1"
USAGE = {"inputTokens": 10, "outputTokens": 5, "calls": 1, "cost": 0.0, "dirty": False, "byLane": {}}

class NoStore:
    async def commit(self, batches):
        return None

async def main():
    state = SimpleNamespace(settings=SimpleNamespace(client_buffer_frames=10**9, ws_merge_chunks=True))
    conns = [Connection(cast(Any, None), cast(Any, state), cast(Any, None), "alice") for _ in range(clients)]
    hub = EventHub(render=ACP_RENDERER)
    for conn in conns:
        hub.subscribe(conn, SID).go_live(0)
    writer = EventWriter(cast(Any, NoStore()), metrics=Metrics())
    writer.start()
    messages = []
    journal = Journal(SID, writer, hub.publish, 0, messages, Metrics())
    spent = 0.0
    for start in range(0, turns, 200):
        t0 = time.process_time()
        if opcodes:
            sys.settrace(tracer)
        for t in range(start, start + 200):
            mid = f"m{t}"
            journal.emit(UserMessage.text(f"u{t}", "hi"))
            journal.persist_message(2 * t, Message(role="user", content="hi"))
            journal.emit(TurnStarted(f"turn_{t}", f"p{t}", "prompt", "user"))
            for i in range(2):  # queued: the batch before them is not yet published
                journal.emit_transient(AgentTextChunk(mid, f"chunk {i} ", 8 * i))
            for _ in range(3):
                await asyncio.sleep(0)
            for i in range(2, 5):  # published at once
                journal.emit_transient(AgentTextChunk(mid, f"chunk {i} ", 8 * i))
            journal.emit(AgentText(mid, "chunk 0 chunk 1 chunk 2 chunk 3 chunk 4 "))
            journal.persist_message(2 * t + 1, Message(role="assistant", content="x"))
            journal.emit(UsageReported(100, 1000, USAGE))
            journal.emit(TurnEnded(f"turn_{t}", f"p{t}", "completed", "end_turn", 0, session_usage=USAGE))
            await journal.flushed()
        sys.settrace(None)
        spent += time.process_time() - t0
        journal.cancel_checkpoints()
        for conn in conns:
            conn._out.take(10**9)
    await writer.stop()
    print(f"{count[0] / turns} {count[1] / turns}" if opcodes else spent / turns * 1e6)

asyncio.run(main())
"""


def one(tree: str, clients: int, turns: int, opcodes: bool = False) -> str:
    command = [sys.executable, "-c", ONE, os.path.abspath(tree), str(clients), str(turns), str(int(opcodes))]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("a", help="tree A (e.g. a `git archive` of the base)")
    parser.add_argument("b", help="tree B")
    parser.add_argument("--clients", default="1")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=3000)
    parser.add_argument("--opcodes", action="store_true", help="count Python opcodes and calls instead")
    args = parser.parse_args()
    if args.opcodes:
        for clients in (int(c) for c in args.clients.split(",")):
            for name, tree in (("A", args.a), ("B", args.b)):
                ops, calls = (float(x) for x in one(tree, clients, args.turns, True).split())
                print(
                    f"clients={clients} {name}: {ops:.0f} Python opcodes, {calls:.1f} Python calls per turn"
                )
        return
    for clients in (int(c) for c in args.clients.split(",")):
        ratios, runs_a, runs_b = [], [], []
        for i in range(args.pairs):
            a, b = float(one(args.a, clients, args.turns)), float(one(args.b, clients, args.turns))
            ratios.append(b / a)
            runs_a.append(a)
            runs_b.append(b)
            print(f"clients={clients} pair {i}: A {a:.1f} µs/turn  B {b:.1f} µs/turn  B/A {b / a:.3f}")
        # On a loaded host a run is only ever slowed: each tree's fastest run is its best estimate.
        low_a, low_b = min(runs_a), min(runs_b)
        print(
            f"clients={clients}: B/A median {statistics.median(ratios):.3f}"
            f" ({min(ratios):.3f}–{max(ratios):.3f});"
            f" fastest A {low_a:.1f}, B {low_b:.1f} µs/turn, B/A {low_b / low_a:.3f}"
        )


if __name__ == "__main__":
    main()
