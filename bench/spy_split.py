"""py-spy's raw output, split the way bench/floor.py prints it (pure functions over the text).

`py-spy record --format raw --threads` writes one line per distinct stack:

    thread (TID): NAME;outer (file.py:12);…;innermost (file.py:34) COUNT

`split(raw, pid)` sorts the samples by thread — the loop (the main thread: its TID is the
pid), the writer (a thread named `…-writer`: agentd's `store-writer`, the relay's
`floor-writer`) and the rest — and, for the loop thread, by layer: the layer of a sample is
that of its innermost Python frame's file (its "self"), so a C call (a syscall, orjson,
uvloop) counts on its Python caller; a sample whose innermost frame is asyncio's
`Runner.run` is time inside uvloop's C code with no Python frame above it ("uvloop C").
At `--rate 1000` a sample is a millisecond in which the thread was not idle (py-spy skips a
thread blocked in a wait): running, or runnable waiting for a core, so on a busy host the
samples run above the CPU /proc reports (measured: ~2× on this 2-core host) and a syscall that
wakes another process (a loopback write) gathers the time the writer then waits for the core.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from dataclasses import dataclass, field

_HEAD = re.compile(r"^thread \((\d+)\): ?(.*)$")
_FRAME = re.compile(r"^(.*) \((.*?):(\d+)\)$")
AGENTD_LAYERS = ("transport", "session", "loop", "providers", "tools", "store", "core", "infra")
THIRD_PARTY = {
    "uvicorn": "uvicorn",
    "websockets": "websockets",
    "starlette": "starlette/fastapi",
    "fastapi": "starlette/fastapi",
    "pydantic": "pydantic",
    "pydantic_core": "pydantic",
    "sqlalchemy": "sqlalchemy",
    "asyncpg": "asyncpg",
    "prometheus_client": "prometheus",
}
LOOP_C = "uvloop C"  # innermost frame asyncio's Runner.run: uvloop's own code
NO_FRAME = "no Python frame"


@dataclass
class Split:
    """Samples of one process: by thread kind, the loop thread's by layer and by function."""

    threads: Counter[str] = field(default_factory=Counter)  # loop / writer / other
    names: Counter[str] = field(default_factory=Counter)  # "other" threads by name
    layers: Counter[str] = field(default_factory=Counter)  # loop thread, by innermost frame
    functions: Counter[str] = field(default_factory=Counter)  # loop thread, "file:function" self

    @property
    def total(self) -> int:
        return sum(self.threads.values())


def layer(file: str, function: str) -> str:
    """The layer a frame's file belongs to (see the module's docstring)."""
    path = file.replace("\\", "/")
    if "/agentd/" in path or path.startswith("agentd/"):
        part = path.rsplit("agentd/", 1)[1].split("/")[0].removesuffix(".py")
        return part if part in AGENTD_LAYERS else "agentd other"
    if path.endswith("floor_relay.py"):
        return "relay"
    top = path.split("/")[0].removesuffix(".py")
    if top == "asyncio" and path.endswith("runners.py") and function == "Runner.run":
        return LOOP_C
    if top in THIRD_PARTY:
        return THIRD_PARTY[top]
    if top == "<string>":  # exec'd code: dataclasses' generated __init__/__eq__…
        return "generated (<string>)"
    if top.startswith("<frozen") or top in sys.stdlib_module_names:
        return "stdlib"
    return "other libraries"


def thread_kind(tid: int, name: str, pid: int) -> str:
    if tid == pid:
        return "loop"
    return "writer" if name.endswith("-writer") else "other"


def split(raw: str, pid: int) -> Split:
    """Aggregate py-spy's raw text of process `pid` (see the module's docstring)."""
    out = Split()
    for line in raw.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        head, *frames = stack.split(";")
        m = _HEAD.match(head)
        if m is None:
            continue
        tid, name = int(m.group(1)), m.group(2).strip()
        kind = thread_kind(tid, name, pid)
        out.threads[kind] += n
        if kind == "other":
            out.names[name or str(tid)] += n
        if kind != "loop":
            continue
        inner = _FRAME.match(frames[-1]) if frames else None
        if inner is None:
            out.layers[NO_FRAME] += n
            continue
        function, file = inner.group(1), inner.group(2)
        out.layers[layer(file, function)] += n
        out.functions[f"{file}:{function}"] += n
    return out


def per_turn(n: int, turns: int) -> str:
    return f"{n / turns:.2f}" if turns else "n/a"


def report(name: str, s: Split, turns: int, top: int = 15) -> list[str]:
    """Lines to print: samples per turn by thread, the loop's by layer, its top functions."""
    threads = ", ".join(f"{k} {per_turn(s.threads[k], turns)}" for k in ("loop", "writer", "other"))
    others = ", ".join(f"{k} {per_turn(v, turns)}" for k, v in s.names.most_common(4))
    lines = [
        f"{name} samples/turn {per_turn(s.total, turns)}: {threads}" + (f" ({others})" if others else "")
    ]
    loop = s.threads["loop"] or 1
    layers = ", ".join(f"{k} {per_turn(v, turns)} ({100 * v / loop:.0f}%)" for k, v in s.layers.most_common())
    lines.append(f"{name} loop by layer: {layers or 'none'}")
    for fn, v in s.functions.most_common(top):
        lines.append(f"{name} loop self {per_turn(v, turns):>6} {100 * v / loop:4.1f}% {fn}")
    return lines
