"""CPU per process for the benches: a process's utime + stime from /proc, and the Postgres
backends serving one database (found by their process title)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def pid_cpu_s(pid: int) -> float:
    """User + system CPU of `pid` (all its threads) so far; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def pg_backends(database: str) -> list[int]:
    """The pids of the Postgres backends connected to `database`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            parts = title.split()
            # `postgres: [CLUSTER: ]USER DATABASE HOST(PORT) STATE`
            if parts[:1] == ["postgres:"] and database in parts[1:4]:
                pids.append(int(entry.name))
    return pids


class CpuSplit:
    """CPU spent by named processes between `start` and `stop`, with the database's backends
    summed as one (a backend that appears meanwhile counts from 0; one that exits meanwhile is
    lost — pools keep theirs, so that is rare)."""

    def __init__(self, processes: dict[str, int], database: str) -> None:
        self._processes = processes
        self._database = database
        self._before: dict[str, float] = {}
        self._pg_before: dict[int, float] = {}

    def start(self) -> None:
        self._before = {name: pid_cpu_s(pid) for name, pid in self._processes.items()}
        self._before["bench"] = _self_cpu_s()
        self._pg_before = {pid: pid_cpu_s(pid) for pid in pg_backends(self._database)}

    def stop(self) -> dict[str, float]:
        spent = {name: pid_cpu_s(pid) - self._before[name] for name, pid in self._processes.items()}
        spent["bench"] = _self_cpu_s() - self._before["bench"]
        now = {pid: pid_cpu_s(pid) for pid in pg_backends(self._database)}
        spent["postgres"] = sum(cpu - self._pg_before.get(pid, 0.0) for pid, cpu in now.items())
        return spent


def _self_cpu_s() -> float:
    times = os.times()
    return times.user + times.system


def per_prompt_ms(spent: dict[str, float], prompts: int) -> str:
    """`spent` (seconds per process) as ms of CPU per prompt, with the total."""
    if not prompts:
        return "no prompts"
    parts = [f"{name}={1000 * s / prompts:.2f}" for name, s in spent.items()]
    return " ".join(parts) + f" total={1000 * sum(spent.values()) / prompts:.2f} ms"
