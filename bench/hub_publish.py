"""CPU per event through `EventHub.publish` (render, encode once, each client's queue), in
process, for two source trees side by side (prints figures; no asserts).

    .venv/bin/python bench/hub_publish.py TREE_A TREE_B [--clients 1,50] [--pairs 3] [--turns 4000]

Each measurement is a fresh process importing agentd from its tree: `--turns` turns' events
(8 streamed chunks of one message, its final text, a notice) published to N live
`Connection`s (their outgoing queues emptied after every 200 turns; no writer, no socket).
A and B alternate, `--pairs` times per client count; printed: µs of CPU per event and B/A.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

ONE = r"""
import asyncio, sys, time
from types import SimpleNamespace
from typing import Any, cast
tree, clients, turns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sys.path.insert(0, tree)
import agentd
assert agentd.__file__.startswith(tree), agentd.__file__
from agentd.core import AgentTextChunk
from agentd.core.events import Event, EventKind
from agentd.session.eventlog.hub import EventHub
from agentd.transport.connection import Connection
from agentd.transport.render import ACP_RENDERER
SID = "sess_1"

def turn(seq):
    mid = f"m{seq}"
    out = [Event(SID, AgentTextChunk(mid, f"chunk {i} ", 8 * i)) for i in range(8)]
    out.append(Event.stored(SID, EventKind.AGENT_MESSAGE, {"messageId": mid, "text": "x"}, seq=seq + 1))
    out.append(Event.stored(SID, EventKind.NOTICE, {"severity": "info", "title": "done"}, seq=seq + 2))
    return out

async def main():
    state = SimpleNamespace(settings=SimpleNamespace(client_buffer_frames=10**9, ws_merge_chunks=True))
    conns = [Connection(cast(Any, None), cast(Any, state), cast(Any, None), "alice") for _ in range(clients)]
    hub = EventHub(render=ACP_RENDERER)
    for conn in conns:
        hub.subscribe(conn, SID).go_live(0)
    events = [turn(2 * t) for t in range(turns)]
    n, spent = 0, 0.0
    for start in range(0, turns, 200):
        t0 = time.process_time()
        for batch in events[start : start + 200]:
            for event in batch:
                hub.publish(event)
                n += 1
        spent += time.process_time() - t0
        for conn in conns:
            conn._out.take(10**9)
    print(spent / n * 1e6)

asyncio.run(main())
"""


def one(tree: str, clients: int, turns: int) -> float:
    command = [sys.executable, "-c", ONE, os.path.abspath(tree), str(clients), str(turns)]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("a", help="tree A (e.g. a `git archive` of the base)")
    parser.add_argument("b", help="tree B")
    parser.add_argument("--clients", default="1,50")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--turns", type=int, default=4000)
    args = parser.parse_args()
    for clients in (int(c) for c in args.clients.split(",")):
        ratios = []
        for i in range(args.pairs):
            a, b = one(args.a, clients, args.turns), one(args.b, clients, args.turns)
            ratios.append(b / a)
            print(f"clients={clients} pair {i}: A {a:.2f} µs/event  B {b:.2f} µs/event  B/A {b / a:.3f}")
        print(f"clients={clients}: B/A {min(ratios):.3f}–{max(ratios):.3f}")


if __name__ == "__main__":
    main()
