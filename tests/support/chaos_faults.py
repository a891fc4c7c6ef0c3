"""Faults the chaos driver injects from outside, as an operator's bad day would: Postgres
backends terminated (all of a database's, only its LISTEN connection, or a storm), a
process paused past its lease (SIGSTOP … SIGCONT), Redis connections dropped or Redis
restarted. Only this test's own database and agentd's own Redis connections are touched:
Postgres and Redis are shared with other tests on the machine."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from pathlib import Path

import asyncpg

from agentd.store.notify import LISTEN_APPLICATION_NAME

# The driver's own connections carry this name and are never terminated.
CHAOS_APP = "agentd-chaos"

REDIS_RESTART = [
    "redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", "6379",
    "--save", "", "--appendonly", "no", "--dir", "/var/lib/redis", "--logfile", "/var/log/redis/ci.log",
]  # fmt: skip


async def terminate_backends(db: asyncpg.Connection, database: str, *, listen_only: bool = False) -> int:
    """pg_terminate_backend of `database`'s backends (but the driver's own); with
    `listen_only`, only the replicas' notification listeners (named `agentd-listen`; their
    last statement may be a ping, not a LISTEN). Returns how many were terminated."""
    query = (
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
        " WHERE datname = $1 AND pid <> pg_backend_pid() AND coalesce(application_name, '') <> $2"
    )
    if listen_only:
        query += f" AND (application_name = '{LISTEN_APPLICATION_NAME}' OR query ILIKE 'LISTEN%')"
    return int(await db.fetchval(query, database, CHAOS_APP))


async def storm(db: asyncpg.Connection, database: str, rounds: int = 6, gap_s: float = 0.3) -> int:
    """`rounds` terminations of every backend, `gap_s` apart: reconnects cut again."""
    total = 0
    for _ in range(rounds):
        total += await terminate_backends(db, database)
        await asyncio.sleep(gap_s)  # the gap is the fault's shape, not a synchronisation
    return total


def pause(pid: int) -> None:
    """SIGSTOP the process group (agentd serve runs in its own)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGSTOP)


def resume(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGCONT)


def local_ports_of(pids: list[int]) -> set[int]:
    """Local TCP ports of the sockets these processes hold (/proc: inode → port)."""
    inodes: set[str] = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    m = re.fullmatch(r"socket:\[(\d+)\]", os.readlink(f"/proc/{pid}/fd/{fd}"))
                    if m:
                        inodes.add(m[1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if cols[9] in inodes:
                    ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


async def redis_command(*args: str, url_port: int = 6379) -> str:
    """One `redis-cli` command (the machine's client); its output."""
    proc = await asyncio.create_subprocess_exec(
        "redis-cli",
        "-p",
        str(url_port),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    async with asyncio.timeout(10):
        out, _ = await proc.communicate()
    return out.decode(errors="replace")


async def kill_redis_clients_of(pids: list[int]) -> int:
    """CLIENT KILL every Redis connection whose peer port belongs to one of `pids` — agentd's
    connections only, never the other tests'. Returns how many."""
    ports = local_ports_of(pids)
    killed = 0
    for line in (await redis_command("CLIENT", "LIST")).splitlines():
        fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        addr = fields.get("addr", "")
        if addr.rsplit(":", 1)[-1].isdigit() and int(addr.rsplit(":", 1)[1]) in ports:
            await redis_command("CLIENT", "KILL", "ID", fields["id"])
            killed += 1
    return killed


async def restart_redis() -> None:
    """Shut Redis down and start it again with the machine's command (bench/chaos.py
    `--redis-restart` only: every user of this Redis loses its connections)."""
    await redis_command("SHUTDOWN", "NOSAVE")
    proc = await asyncio.create_subprocess_exec(*REDIS_RESTART)
    async with asyncio.timeout(10):
        await proc.wait()
    for _ in range(100):
        if "PONG" in await redis_command("PING"):
            return
        await asyncio.sleep(0.05)
