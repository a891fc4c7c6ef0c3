"""strace's per-thread output, counted the way bench/floor.py prints it (pure functions).

`strace -f -ff -yy -o PREFIX -p PID` writes one file per thread (PREFIX.TID), one line per
system call, each file descriptor followed by what it is:

    write(17<TCP:[127.0.0.1:8000->127.0.0.1:51234]>, "\\x81\\x7e…", 230) = 230
    write(5<anon_inode:[eventfd]>, "\\1\\0\\0\\0\\0\\0\\0\\0", 8) = 8
    epoll_wait(3<anon_inode:[eventpoll]>, [...], 1024, 0) = 1
    futex(0x7f…, FUTEX_WAKE_PRIVATE, 1) = 1

`counts(text, ports)` counts one thread's calls by name, a call on a descriptor also by what
the descriptor is — a TCP socket named by the port it talks to or from (`ports` maps the
ports the bench knows: its WebSocket servers, the fake model, Postgres), an eventfd (a
call_soon_threadsafe wake-up of uvloop), a pipe, a UNIX socket, a timerfd, a file — epoll
waits by whether they block (timeout 0: a poll of a loop that had more to do), futex calls
by operation (a thread hand-off, a lock or the GIL's hand-over).
"""

from __future__ import annotations

import re
from collections import Counter

_CALL = re.compile(r"^(?:\[pid +\d+\] )?(\w+)\((.*)$")
_FD = re.compile(r"^(-?\d+)<(.*?)>(?:, |\)|$)")
_TCP = re.compile(r"TCP(?:v6)?:\[.*?:(\d+)->.*?:(\d+)\]")
_FUTEX_OP = re.compile(r"^0x[0-9a-f]+, (FUTEX_[A-Z_]+)")
_EPOLL_TIMEOUT = re.compile(r"\], \d+, (-?\d+)[,)]")  # after the events: maxevents, timeout
POLLS = ("epoll_wait", "epoll_pwait", "epoll_pwait2")


def descriptor(what: str, ports: dict[int, str]) -> str:
    """What a descriptor is, from strace's `-yy` annotation."""
    tcp = _TCP.search(what)
    if tcp:
        local, remote = int(tcp.group(1)), int(tcp.group(2))
        return ports.get(local) or ports.get(remote) or "TCP"
    for marker, name in (
        ("eventfd", "eventfd"),
        ("eventpoll", "epoll"),
        ("timerfd", "timerfd"),
        ("signalfd", "signalfd"),
        ("pipe:", "pipe"),
        ("UNIX", "UNIX"),
        ("socket:", "socket"),
    ):
        if marker in what:
            return name
    return "file"


def call_key(name: str, rest: str, ports: dict[int, str]) -> str:
    """The key one call counts under: `name` or `name what` (see the module's docstring)."""
    if name == "futex":
        op = _FUTEX_OP.match(rest)
        return f"futex {op.group(1).removesuffix('_PRIVATE')}" if op else name
    if name in POLLS:
        timeout = _EPOLL_TIMEOUT.search(rest)
        if timeout is None:  # unfinished: a blocking wait strace left
            return f"{name} blocking"
        if timeout.group(1) == "0":
            return f"{name} poll"
        return f"{name} {'timed out' if rest.rstrip().endswith('= 0') else 'blocking'}"
    fd = _FD.match(rest)
    if fd and name != "close":
        return f"{name} {descriptor(fd.group(2), ports)}"
    return name


def counts(text: str, ports: dict[int, str] | None = None) -> Counter[str]:
    """One thread's system calls by key (a call strace split in two counts once)."""
    out: Counter[str] = Counter()
    for line in text.splitlines():
        m = _CALL.match(line)
        if m is None:  # "<... resumed>", "--- SIGCHLD …", "+++ exited …"
            continue
        out[call_key(m.group(1), m.group(2), ports or {})] += 1
    return out


def by_thread(per_tid: dict[int, Counter[str]], pid: int) -> dict[str, Counter[str]]:
    """Threads' counts as loop (the main thread: its id is the pid), writer (the busiest other
    thread: Python 3.11 gives its threads no OS name to tell them by) and other (the rest)."""
    out: dict[str, Counter[str]] = {"loop": Counter(), "writer": Counter(), "other": Counter()}
    rest = sorted((tid for tid in per_tid if tid != pid), key=lambda t: -sum(per_tid[t].values()))
    for tid, c in per_tid.items():
        out["loop" if tid == pid else "writer" if tid == rest[0] else "other"] += c
    return out


def report(name: str, threads: dict[str, Counter[str]], turns: int, top: int = 12) -> list[str]:
    """Lines to print: calls per turn by thread kind, then each kind's most frequent calls."""

    def per(n: int) -> str:
        return f"{n / turns:.1f}" if turns else "n/a"

    totals = ", ".join(f"{k} {per(sum(c.values()))}" for k, c in threads.items())
    lines = [f"{name} syscalls/turn: {totals or 'none'}"]
    for kind, c in threads.items():
        calls = ", ".join(f"{k} {per(v)}" for k, v in c.most_common(top))
        lines.append(f"{name} {kind} syscalls/turn: {calls or 'none'}")
    return lines
