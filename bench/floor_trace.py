"""bench/floor.py's observers: py-spy (`--profile`) and strace (`--strace`) attached to agentd
and the relay for the measured turns of one kind, their output split by bench/spy_split.py
and bench/strace_split.py into lines to print.

Both attach to a running process and are stopped with SIGINT when the turns are done: py-spy
(`record --nonblocking --threads --format raw --rate 1000`) reads the process's memory without
stopping it (a few % of one core); strace stops the traced thread at every system call, so
under `--strace` the CPU and latency figures are the tracer's more than the server's (the
counts per turn are what it is for).
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import spy_split
import strace_split

SPY_RATE = 1000  # samples a second: a sample ≈ 1 ms of a thread's CPU


def tool_path(name: str) -> str | None:
    """`name` on PATH, or next to this interpreter (a venv's bin/ that is not on PATH)."""
    found = shutil.which(name)
    if found:
        return found
    local = Path(sys.executable).with_name(name)
    return str(local) if local.exists() else None


def usable(tools: list[str]) -> list[str]:
    """The tools that are installed; one line said for each that is not."""
    out = []
    for tool in tools:
        binary = "py-spy" if tool == "profile" else "strace"
        if tool_path(binary) is None:
            print(
                f"--{tool}: {binary} not found (pip install py-spy / apt install strace); running without",
                flush=True,
            )
        else:
            out.append(tool)
    return out


@asynccontextmanager
async def attached(cmd: list[str], ready: str) -> AsyncIterator[None]:
    """`cmd` running from when it says `ready` (it has attached) to the block's end."""
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,  # noqa: ASYNC220
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    assert proc.stdout is not None
    said: list[str] = []
    while not said or ready not in said[-1]:
        said.append(await asyncio.to_thread(proc.stdout.readline))
        if not said[-1]:
            raise SystemExit(f"{Path(cmd[0]).name} did not attach: {''.join(said).strip()}")
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        await asyncio.to_thread(proc.communicate, timeout=120)


@dataclass
class Observed:
    """Where each observer wrote, read into lines once the turns are done."""

    pids: dict[str, int]
    ports: dict[int, str]
    home: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="agentd-floor-trace-")))
    tools: list[str] = field(default_factory=list)

    def lines(self, turns: int) -> list[str]:
        out = []
        for who, pid in self.pids.items():
            if "profile" in self.tools:
                raw = (self.home / f"{who}.raw").read_text(errors="replace")
                out += spy_split.report(who, spy_split.split(raw, pid), turns)
            if "strace" in self.tools:
                per_tid = {
                    int(path.suffix[1:]): strace_split.counts(path.read_text(errors="replace"), self.ports)
                    for path in self.home.glob(f"{who}.strace.*")
                }
                out += strace_split.report(who, strace_split.by_thread(per_tid, pid), turns)
        shutil.rmtree(self.home, ignore_errors=True)
        return out


@asynccontextmanager
async def observe(tools: list[str], pids: dict[str, int], ports: dict[int, str]) -> AsyncIterator[Observed]:
    """Each of `tools` ("profile", "strace") attached to each of `pids` for the block."""
    seen = Observed(pids, ports, tools=tools)
    async with AsyncExitStack() as stack:
        for who, pid in pids.items():
            if "profile" in tools:
                cmd = [tool_path("py-spy") or "py-spy", "record", "--pid", str(pid), "--rate", str(SPY_RATE),
                       "--format", "raw", "--threads", "--nonblocking",
                       "-o", str(seen.home / f"{who}.raw")]  # fmt: skip
                await stack.enter_async_context(attached(cmd, "Sampling process"))
            if "strace" in tools:
                cmd = [tool_path("strace") or "strace", "-f", "-ff", "-yy", "-o",
                       str(seen.home / f"{who}.strace"), "-p", str(pid)]  # fmt: skip
                await stack.enter_async_context(attached(cmd, "attached"))
        yield seen
