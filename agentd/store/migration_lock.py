"""The lock replicas take to migrate one Postgres database (R-C1; issue 26 item 6): start-up
never waits unboundedly on another replica.

Replicas starting together on a database behind the newest schema: one migrates, the
others wait for it and then find the schema at head. The wait is a loop of
`pg_try_advisory_xact_lock` with a deadline (a plain `pg_advisory_xact_lock` would wait
forever behind a replica stuck mid-migration, or a session someone left holding the lock):
while waiting, a log line says who holds the lock (the backend's pid, application, client
address and what it runs, from `pg_locks`); past the deadline, `MigrationLockTimeout` names
it, and the server does not start.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy import text

from agentd.store.aio import AsyncConnection

log = logging.getLogger(__name__)

# The advisory lock every replica migrating a Postgres database takes (any constant: "agentd").
MIGRATION_LOCK_KEY = 0x6167656E7464
POLL_S = 0.2  # between tries
LOG_EVERY_S = 5.0  # a "still waiting" line at most this often

_TRY = text("SELECT pg_try_advisory_xact_lock(:key)")
# An advisory lock on a bigint key: classid = its high 32 bits, objid = its low 32 bits.
_HOLDER = text(
    "SELECT a.pid, a.application_name, a.client_addr, a.state, a.query, "
    "EXTRACT(EPOCH FROM (now() - a.xact_start)) AS held_s "
    "FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = :hi AND l.objid = :lo "
    "AND l.objsubid = 1 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "LIMIT 1"
)


class MigrationLockTimeout(RuntimeError):
    """Another backend held the migration lock for longer than the start-up may wait."""


async def lock_holder(conn: AsyncConnection) -> str:
    """Who holds the migration lock, in words (for the log and the error)."""
    key = MIGRATION_LOCK_KEY
    row = (await conn.execute(_HOLDER, {"hi": key >> 32, "lo": key & 0xFFFFFFFF})).first()
    if row is None:
        return "a backend that has just released it"
    app = f" ({row.application_name})" if row.application_name else ""
    where = f" from {row.client_addr}" if row.client_addr else ""
    held = f", in a transaction for {float(row.held_s):.1f}s" if row.held_s is not None else ""
    query = str(row.query or "").strip().replace("\n", " ")[:120]
    return f"backend pid {row.pid}{app}{where}{held}, {row.state or 'unknown state'}: {query!r}"


async def take_migration_lock(conn: AsyncConnection, timeout_s: float) -> None:
    """Take the migration lock in `conn`'s transaction (held until it ends), waiting at
    most `timeout_s`; MigrationLockTimeout naming the holder after that."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + timeout_s
    next_log = started
    while True:
        if (await conn.execute(_TRY, {"key": MIGRATION_LOCK_KEY})).scalar():
            return
        now = loop.time()
        if now >= deadline:
            holder = await lock_holder(conn)
            raise MigrationLockTimeout(
                f"the database migration lock (advisory lock {MIGRATION_LOCK_KEY:#x}) was not free "
                f"within {timeout_s:g}s: held by {holder} — another replica migrating this database, "
                "or a stuck session holding the lock (end it with pg_terminate_backend(pid), then "
                "start again; AGENTD_MIGRATION_LOCK_TIMEOUT_S sets the wait)"
            )
        if now >= next_log:
            log.warning(
                "waiting up to %.0fs more for the database migration lock, held by %s",
                deadline - now,
                await lock_holder(conn),
            )
            next_log = now + LOG_EVERY_S
        await asyncio.sleep(min(POLL_S, max(0.0, deadline - now)))
