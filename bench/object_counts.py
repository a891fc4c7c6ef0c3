"""Objects a warm turn builds on the event loop's thread, by class, and its exact Python calls
(prints figures; no asserts).

    .venv/bin/python bench/object_counts.py [--turns 200] [--kind trivial|one-tool]
                                            [--db sqlite|postgres] [--tree DIR] [--calls]

bench/profile_turn.py's set-up (an `agentd serve` subprocess, short warmed sessions), with a
`sys.setprofile` counter in place of cProfile on the server's main thread over the measured
turns: every `__init__`, `__new__` and `__post_init__` entered, by the class of the object
being built, and a few named calls (`dataclasses.replace`, `model_dump`, executor `submit`).
Also printed: Python calls per turn, exactly. cProfile's "function calls per turn" merges
functions with the same file, line and name — every dataclass-generated `__init__` is
`<string>:2(__init__)` to it, so it keeps only one of them — this count does not.
`--calls`: also every function's calls per turn (to diff two trees' runs).
Objects built in C (dicts, tuples, asyncio futures) are not seen.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import profile_turn
import turnkit

HOOK = """
import collections, json, signal, sys
_counts = collections.Counter()
_NAMED = ('replace', 'model_dump', 'model_construct', 'model_validate', 'submit', 'run_in_executor')
def _prof(frame, event, arg):
    if event != 'call':
        return
    co = frame.f_code
    n = co.co_name
    where = co.co_filename.rsplit('/', 1)[-1]
    _counts[('call', n, where + ':' + str(co.co_firstlineno))] += 1
    if n in ('__init__', '__new__', '__post_init__'):
        loc = frame.f_locals
        obj = loc.get('self', loc.get('cls', loc.get('_cls')))
        t = obj if n == '__new__' and isinstance(obj, type) else type(obj)
        _counts[(n, t.__module__ + '.' + t.__qualname__, where)] += 1
    elif n in _NAMED:
        _counts[('named', n, where)] += 1
signal.signal(signal.SIGUSR1, lambda *_: sys.setprofile(_prof))
def _dump(*_):
    sys.setprofile(None)
    with open({out!r} + ".gc", "w") as f:
        json.dump({{"s": 0, "n": [0, 0, 0], "frozen": 0}}, f)
    with open({out!r}, "w") as f:
        json.dump([[list(k), v] for k, v in _counts.items()], f)
signal.signal(signal.SIGUSR2, _dump)
"""


def report(args: argparse.Namespace, _cpu: float, out: Path) -> None:
    counts = json.loads(out.read_text())
    t = args.turns
    calls = sum(v for (what, _, _), v in counts if what == "call")
    built = sum(v for (what, _, _), v in counts if what not in ("call", "named"))
    print(f"kind={args.kind} db={args.db} turns={t}: Python calls per turn {calls / t:.1f}, "
          f"__init__/__new__/__post_init__ per turn {built / t:.1f}")  # fmt: skip
    for (what, name, where), v in sorted(counts, key=lambda kv: -kv[1]):
        if what != "call":
            print(f"  {v / t:7.2f}  {what:13s} {name}  ({where})")
    if args.calls:
        for (_, name, where), v in sorted(counts, key=lambda kv: -kv[1]):
            if _ == "call":
                print(f"  call {v / t:8.2f}  {name}  {where}")


if __name__ == "__main__":
    parser = turnkit.turn_parser(__doc__)
    parser.add_argument("--calls", action="store_true", help="also every function's calls per turn")
    ns = turnkit.parse_turn_args(parser)
    ns.sessions, ns.hide_sniffio, ns.chunk_gap_ms, ns.save = 1, False, 0.0, None
    profile_turn.HOOK = HOOK
    report(ns, *asyncio.run(profile_turn.profile(ns)))
