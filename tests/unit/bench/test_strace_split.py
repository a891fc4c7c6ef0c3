"""bench/strace_split.py over hand-made strace lines: calls keyed by what their descriptor is,
epoll waits by how they returned, futex calls by operation; threads as loop / writer / other."""

from __future__ import annotations

from collections import Counter

from tests.support.bench_modules import bench_module

st = bench_module("strace_split")
PORTS = {8000: "ws", 9000: "model", 5432: "postgres"}
TEXT = "\n".join(
    [
        'write(17<TCP:[127.0.0.1:8000->127.0.0.1:51234]>, "\\x81\\x05hello", 7) = 7',
        'write(17<TCP:[127.0.0.1:8000->127.0.0.1:51234]>, "\\x81\\x05hello", 7) = 7',
        'write(19<TCP:[127.0.0.1:40000->127.0.0.1:9000]>, "POST /v1", 8) = 8',
        'sendto(21<TCP:[127.0.0.1:40001->127.0.0.1:5432]>, "Q", 1, 0, NULL, 0) = 1',
        'write(23<TCP:[127.0.0.1:40002->127.0.0.1:1234]>, "x", 1) = 1',
        'write(5<anon_inode:[eventfd]>, "\\1\\0\\0\\0\\0\\0\\0\\0", 8) = 8',
        'read(5<anon_inode:[eventfd]>, "\\1\\0\\0\\0\\0\\0\\0\\0", 8) = 8',
        'write(7<pipe:[555]>, "\\0", 1) = 1',
        'pwrite64(9</tmp/db.sqlite-wal>, "x", 1, 0) = 1',
        "epoll_wait(3<anon_inode:[eventpoll]>, [], 1024, 0) = 0",
        "epoll_pwait(3<anon_inode:[eventpoll]>, [], 1024, 0, NULL, 8) = 0",
        "epoll_wait(3<anon_inode:[eventpoll]>, [{events=EPOLLIN, data={u32=4, u64=4}}], 1024, -1) = 1",
        "epoll_pwait(3<anon_inode:[eventpoll]>, [{events=EPOLLIN, data={u32=5}}], 1024, 4, NULL, 8) = 1",
        "epoll_pwait(3<anon_inode:[eventpoll]>, [], 1024, 4, NULL, 8) = 0",
        "epoll_pwait(3<anon_inode:[eventpoll]>,  <unfinished ...>",
        "futex(0x7f0, FUTEX_WAKE_PRIVATE, 1) = 1",
        "futex(0x7f8, FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME, 0, NULL, FUTEX_BITSET_MATCH_ANY) = 0",
        "getpid() = 100",
        "close(17<TCP:[127.0.0.1:8000->127.0.0.1:51234]>) = 0",
        "<... epoll_pwait resumed>[], 1024, 4, NULL, 8) = 0",
        "--- SIGCHLD {si_signo=SIGCHLD} ---",
        "+++ exited with 0 +++",
    ]
)


def test_calls_by_descriptor_wait_and_futex_operation() -> None:
    assert st.counts(TEXT, PORTS) == {
        "write ws": 2,
        "write model": 1,
        "sendto postgres": 1,
        "write TCP": 1,
        "write eventfd": 1,
        "read eventfd": 1,
        "write pipe": 1,
        "pwrite64 file": 1,
        "epoll_wait poll": 1,
        "epoll_pwait poll": 1,
        "epoll_wait blocking": 1,
        "epoll_pwait blocking": 2,
        "epoll_pwait timed out": 1,
        "futex FUTEX_WAKE": 1,
        "futex FUTEX_WAIT_BITSET": 1,
        "getpid": 1,
        "close": 1,
    }


def test_without_ports_a_tcp_socket_is_tcp() -> None:
    assert st.counts(TEXT)["write TCP"] == 4


def test_threads_by_kind_and_report() -> None:
    per_tid = {100: Counter(a=4), 101: Counter(b=6), 102: Counter(c=2), 103: Counter(c=1)}
    kinds = st.by_thread(per_tid, 100)
    assert kinds == {"loop": Counter(a=4), "writer": Counter(b=6), "other": Counter(c=3)}
    assert st.report("floor", kinds, turns=2, top=1) == [
        "floor syscalls/turn: loop 2.0, writer 3.0, other 1.5",
        "floor loop syscalls/turn: a 2.0",
        "floor writer syscalls/turn: b 3.0",
        "floor other syscalls/turn: c 1.5",
    ]
