"""Finding every process a shell command started, including ones that left its group.

`bash` and background tasks run in their own process group, and `killpg` ends the group;
but a child that calls `setsid` (or `setpgid`) leaves the group and would survive a
cancel or timeout. So each spawned shell gets a random tag in its environment, which
every descendant inherits across `setsid`, double forks and reparenting to init; before
killing, `/proc` is scanned for processes carrying the tag (and, for ones that cleared
their environment while their parent still lives, for descendants of the shell by
parent pid). Linux only; without `/proc` this degrades to the group kill alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
from concurrent.futures import ThreadPoolExecutor

TAG_VAR = "AGENTD_TOOL_PROC"
_MAX_ROUNDS = 5  # a process forking while we kill is found again on the next round


def new_tag() -> str:
    return secrets.token_hex(12)


def tagged_env(tag: str) -> dict[str, str]:
    env = dict(os.environ)
    env[TAG_VAR] = tag
    return env


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def tracked_pids(tag: str, root_pid: int | None = None) -> set[int]:
    """Live processes carrying `tag`, plus descendants of `root_pid` by parent pid."""
    needle = f"{TAG_VAR}={tag}".encode()
    me = os.getpid()
    found: set[int] = set()
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        pid = int(name)
        if pid == me:
            continue
        try:
            stat = _read(f"/proc/{pid}/stat")
        except OSError:
            continue  # gone already
        # "pid (comm) state ppid ...": comm may contain spaces and parentheses.
        fields = stat.rsplit(b")", 1)[-1].split()
        if len(fields) < 2 or fields[0] == b"Z":
            continue  # a zombie is dead; its parent (or init) reaps it
        children.setdefault(int(fields[1]), []).append(pid)
        try:
            environ = _read(f"/proc/{pid}/environ")
        except OSError:
            continue  # not ours to read: not one of our children either
        if needle in environ.split(b"\0"):
            found.add(pid)
    if root_pid is not None:
        stack = [root_pid]
        while stack:
            for child in children.get(stack.pop(), []):
                if child not in found:
                    found.add(child)
                    stack.append(child)
    return found


def _signal_found(pgid: int, tag: str, sig: signal.Signals, root_alive: bool) -> int:
    pids = tracked_pids(tag, pgid if root_alive else None)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
    return len(pids)


def _kill_rounds(pgid: int, tag: str, root_alive: bool) -> None:
    for _ in range(_MAX_ROUNDS):
        if not _signal_found(pgid, tag, signal.SIGKILL, root_alive):
            return


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    # The group may already be gone (everything exited); that is the goal, not an error.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


# Scanning /proc costs a fraction of a millisecond per process: on a busy host that is
# too long for the event loop, so scans run on a small pool of their own.
_scanner = ThreadPoolExecutor(max_workers=2, thread_name_prefix="agentd-proctrack")


async def signal_all(pgid: int, tag: str, sig: signal.Signals, *, root_alive: bool = False) -> None:
    """Signal the process group and every tagged process (one round). `root_alive`: the
    shell (pid == pgid) is not reaped yet, so its pid still names it and its descendants
    by parent pid can be trusted (a reaped pid may be reused by a stranger)."""
    _signal_group(pgid, sig)
    await asyncio.wrap_future(_scanner.submit(_signal_found, pgid, tag, sig, root_alive))


async def kill_all(pgid: int, tag: str, *, root_alive: bool = False) -> None:
    """SIGKILL the group and every tagged process until none is left (bounded rounds)."""
    _signal_group(pgid, signal.SIGKILL)
    await asyncio.wrap_future(_scanner.submit(_kill_rounds, pgid, tag, root_alive))


def kill_all_now(pgid: int, tag: str, *, root_alive: bool = False) -> None:
    """For paths that cannot wait (cancellation, callbacks): the group dies now, the
    tagged stragglers a moment later."""
    _signal_group(pgid, signal.SIGKILL)
    _scanner.submit(_kill_rounds, pgid, tag, root_alive)
