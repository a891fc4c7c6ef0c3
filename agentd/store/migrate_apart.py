"""Schema migrations in a child process (issue 32 item 3).

Alembic, its migration scripts and the SQLAlchemy ORM they import (`sqlalchemy.ext.asyncio`,
Mako, …) stay resident in the process that ran them: a server that created or upgraded its
database held ~19 MiB more for the rest of its life than the same server restarted (measured
with `agentd serve` on a fresh SQLite file: 94.2 vs 75.4 MiB idle). So a store whose schema
is behind has a child process (`python -m agentd.store.migrate_apart`) run `Store.migrate`
on the same database — the Postgres migration lock included — and the server only reads the
result. The URL goes over the child's stdin (a password never shows in the process list); a
failure comes back as the child's one-line reason (`MigrationLockTimeout` as itself), and its
log records (Postgres: the wait for the migration lock, naming its holder) are logged in the
server as they come. An in-memory database is migrated in process (a child could not see it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import agentd
from agentd.core import SqliteSynchronous
from agentd.store.aio import AsyncEngine
from agentd.store.engine import PoolLimits, alembic_config, open_engines
from agentd.store.migration_lock import MigrationLockTimeout, take_migration_lock


class MigrationFailed(RuntimeError):
    """The child could not migrate the database; the message is its reason."""


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(agentd.__file__).resolve().parents[1])  # this agentd, whatever the cwd
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _run_child(url: str, lock_timeout_s: float) -> None:
    """The child's log records are logged here as they come (the wait for Postgres's
    migration lock, naming its holder); its failure is raised here, `MigrationLockTimeout`
    as itself."""
    spec = json.dumps({"url": url, "lock_timeout_s": lock_timeout_s})
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentd.store.migrate_apart"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_child_env(),
    )
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write(spec)
    proc.stdin.close()
    failure: dict[str, str] = {}
    other: list[str] = []
    for line in proc.stderr:
        try:
            item = json.loads(line)
        except ValueError:
            item = None
        if isinstance(item, dict) and "log" in item:
            logging.getLogger(str(item["log"])).log(int(item["level"]), "%s", item["msg"])
        elif isinstance(item, dict) and "error" in item:
            failure = {str(k): str(v) for k, v in item.items()}
        elif line.strip():
            other.append(line.strip())
    code = proc.wait()
    if code == 0:
        return
    if failure.get("error") == MigrationLockTimeout.__name__:
        raise MigrationLockTimeout(failure["message"])
    if failure:
        raise MigrationFailed(failure["reason"])
    raise MigrationFailed(other[-1] if other else f"the migration exited with {code}")


async def migrate_in_child(url: str, lock_timeout_s: float) -> None:
    """Run `Store.migrate` on `url` in a child process; raises `MigrationFailed`."""
    await asyncio.to_thread(_run_child, url, lock_timeout_s)


def _reason(exc: BaseException) -> str:
    cause = getattr(exc, "orig", None) or exc
    kind = type(cause.__cause__ or cause).__name__  # the driver's own class, not the adapter's
    text = " ".join(str(cause).split())
    return f"{kind}: {text}" if text else kind


async def upgrade(engine: AsyncEngine, lock_timeout_s: float) -> None:
    """Alembic's upgrade to the newest migration, in this process."""
    from alembic import command

    async with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # Replicas starting together on a fresh database: one migrates, the others
            # wait for it (bounded: store/migration_lock.py) and then find the schema at head.
            await take_migration_lock(conn, lock_timeout_s)
        await conn.run_sync(lambda c: command.upgrade(alembic_config(c), "head"))


async def _migrate(url: str, lock_timeout_s: float) -> None:
    """The child's work: the engines the store opens (SQLite's pragmas included)."""
    engine, write_engine, sqlite_writer = await open_engines(url, PoolLimits(), SqliteSynchronous.NORMAL)
    try:
        await upgrade(engine, lock_timeout_s)
    finally:
        await engine.dispose()
        if write_engine is not engine:
            await write_engine.dispose()
        if sqlite_writer is not None:
            await sqlite_writer.close()


class _Forward(logging.Handler):
    """The child's log records, one JSON line each on stderr, for the parent to log."""

    def emit(self, record: logging.LogRecord) -> None:
        line = {"log": record.name, "level": record.levelno, "msg": record.getMessage()}
        print(json.dumps(line), file=sys.stderr, flush=True)


def main() -> None:
    spec = json.loads(sys.stdin.read())
    logging.getLogger("agentd").addHandler(_Forward(logging.WARNING))
    try:
        asyncio.run(_migrate(str(spec["url"]), float(spec["lock_timeout_s"])))
    except Exception as exc:
        failure = {"error": type(exc).__name__, "message": str(exc), "reason": _reason(exc)}
        print(json.dumps(failure), file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
