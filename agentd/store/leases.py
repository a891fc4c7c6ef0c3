"""Session leases on Postgres (R-C1): which replica owns a session, until when, under which
fencing token. Every time is the database's clock (`now()`), so replicas' clocks never
disagree about an expiry. The token grows by one on every acquisition and is never reset
(a released lease keeps its row, expired); the fence trigger of migration 0010 compares it
with the `fence` of every event, message and queued-prompt row written.

Lock order, so nothing deadlocks: a write's fence check locks lease rows FOR KEY SHARE;
an acquisition locks its one row FOR UPDATE (it waits for a write in flight, and a write
after it sees the new token); a renewal is a plain UPDATE (FOR NO KEY UPDATE), which
never waits for writes.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from agentd.store.aio import AsyncEngine, create_async_engine
from agentd.store.disconnects import guard
from agentd.store.pg_driver import driver

T = TypeVar("T")

STALE_FENCE_SQLSTATE = "AGF01"  # raised by the fence trigger / guard (migration 0010)
LOCK_NOT_AVAILABLE = "55P03"  # lock_timeout
UNIQUE_VIOLATION = "23505"


@dataclass(frozen=True)
class Holder:
    """A live lease of another replica: who holds it, and for how much longer."""

    owner: str
    expires_in_s: float


_CURRENT = text(
    "SELECT owner, token, EXTRACT(EPOCH FROM (expires_at - now())) AS left_s "
    "FROM session_leases WHERE session_id = :sid FOR UPDATE"
)
# The same, unlocked and in autocommit: a lease another replica holds is answered from it.
_HELD = (
    "SELECT owner, EXTRACT(EPOCH FROM (expires_at - now()))::float8 AS left_s "
    "FROM session_leases WHERE session_id = $1"
)
# Only for a session that exists: a request naming an unknown id leaves no row behind.
_INSERT = text(
    "INSERT INTO session_leases (session_id, owner, token, expires_at) "
    "SELECT CAST(:sid AS varchar), CAST(:owner AS varchar), 1, now() + make_interval(secs => :ttl) "
    "WHERE EXISTS (SELECT 1 FROM sessions WHERE id = :sid) "
    "ON CONFLICT (session_id) DO NOTHING RETURNING token"
)
_EXISTS = text("SELECT 1 FROM sessions WHERE id = :sid")
_TAKE = text(
    "UPDATE session_leases SET owner = :owner, token = token + 1, "
    "expires_at = now() + make_interval(secs => :ttl) WHERE session_id = :sid RETURNING token"
)
# Judged by the database: a lease is still ours while its row holds our token — even one
# that ran out by `now()` when nobody took it over (a late renewal under load): a takeover
# bumps the token under the row lock, and a renewal after it finds the token changed.
_RENEW = text(
    "UPDATE session_leases AS l SET expires_at = now() + make_interval(secs => :ttl) "
    "FROM unnest(CAST(:sids AS varchar[]), CAST(:tokens AS int8[])) AS u(s, t) "
    "WHERE l.session_id = u.s AND l.token = u.t AND l.owner = :owner RETURNING l.session_id"
)
_RELEASE = text(
    "UPDATE session_leases AS l SET expires_at = now() "
    "FROM unnest(CAST(:sids AS varchar[]), CAST(:tokens AS int8[])) AS u(s, t) "
    "WHERE l.session_id = u.s AND l.token = u.t AND l.owner = :owner"
)


# Sessions left with work by an owner whose lease ran out (or was released): a turn it was
# running (`running_turn`, migration 0012's partial index: only sessions running a turn
# now) or prompts still queued (`queued_prompts` holds only waiting prompts). Oldest expiry
# first; bounded per sweep.
_RUNNING = "SELECT id AS sid FROM sessions WHERE running_turn IS NOT NULL"
_QUEUED = "SELECT DISTINCT session_id AS sid FROM queued_prompts"


def _orphaned(work: str) -> Any:
    return text(
        f"SELECT w.sid FROM ({work}) AS w LEFT JOIN session_leases AS l ON l.session_id = w.sid "
        "WHERE l.session_id IS NULL OR l.expires_at <= now() "
        "ORDER BY l.expires_at NULLS FIRST, w.sid LIMIT :limit"
    )


_ORPHANED_RUNNING = _orphaned(_RUNNING)
_ORPHANED_ANY = _orphaned(f"{_RUNNING} UNION {_QUEUED}")


async def orphaned(engine: AsyncEngine, limit: int, *, queued: bool) -> list[str]:
    """Up to `limit` sessions nobody holds a live lease on that have unfinished work — a
    turn their owner was running when it died, or (`queued`) prompts waiting: another
    replica takes them over and recovers them (R-C1, R-E6)."""
    statement = _ORPHANED_ANY if queued else _ORPHANED_RUNNING
    async with engine.connect() as conn:
        return [str(s) for s in (await conn.execute(statement, {"limit": limit})).scalars()]


async def acquire(
    engine: AsyncEngine,
    session_id: str,
    owner: str,
    ttl_s: float,
    lock_wait_s: float,
    *,
    connected: Callable[[], None] | None = None,
) -> int | Holder | None:
    """The new fencing token, or the other replica holding a live lease (None: there is no
    such session). Ours (same owner)
    or expired: taken over with the next token. `lock_wait_s` bounds the wait for a write
    in flight (a paused replica mid-commit): then the lease counts as held. `connected` is
    called once a connection is checked out, before the transaction whose `now()` starts
    the lease: the caller's clock for the lease's start (a burst may keep it waiting for
    the connection for longer than the lease lasts)."""
    try:
        held = await _held_elsewhere(engine, session_id, owner)
        if held is not None:
            return held
        return await _acquire(engine, session_id, owner, ttl_s, lock_wait_s, connected)
    except DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) != LOCK_NOT_AVAILABLE:
            raise
        return Holder("a replica with a write in flight", lock_wait_s)


async def _held_elsewhere(engine: AsyncEngine, session_id: str, owner: str) -> Holder | None:
    """Another replica's live lease, read in one autocommitted statement: a replica routing
    a session's commands to its owner asks once per lease time, for each session (issue 26
    item 5: at 200 routed sessions the locking transaction — BEGIN, lock timeout, SELECT …
    FOR UPDATE, COMMIT — was a fifth of the caller's CPU). Taking a lease (none, expired or
    ours) still goes through that transaction. A lease released meanwhile reads as held:
    so does one released just after the transaction; routing finds the holder gone."""
    async with driver(engine) as conn:
        row = await conn.fetchrow(_HELD, session_id)
    if row is None or row["owner"] == owner or row["left_s"] <= 0:
        return None
    return Holder(str(row["owner"]), float(row["left_s"]))


async def _acquire(
    engine: AsyncEngine,
    session_id: str,
    owner: str,
    ttl_s: float,
    lock_wait_s: float,
    connected: Callable[[], None] | None,
) -> int | Holder | None:
    async with engine.connect() as conn, conn.begin():
        if connected is not None:  # checked out; BEGIN goes with the first statement
            connected()
        await conn.execute(text(f"SET LOCAL lock_timeout = '{int(lock_wait_s * 1000)}ms'"))
        row = (await conn.execute(_CURRENT, {"sid": session_id})).first()
        if row is None:
            token = (await conn.execute(_INSERT, {"sid": session_id, "owner": owner, "ttl": ttl_s})).scalar()
            if token is not None:
                return int(token)
            if (await conn.execute(_EXISTS, {"sid": session_id})).first() is None:
                return None  # no such session: nothing to own
            return Holder("another replica", ttl_s)  # it inserted the lease meanwhile
        if row.owner != owner and float(row.left_s) > 0:
            return Holder(str(row.owner), float(row.left_s))
        token = (await conn.execute(_TAKE, {"sid": session_id, "owner": owner, "ttl": ttl_s})).scalar_one()
        return int(token)


async def renew(engine: AsyncEngine, owner: str, tokens: dict[str, int], ttl_s: float) -> set[str]:
    """Extend all of `tokens`' leases in one statement; returns those still ours (a lease
    another replica took over has a newer token and is not renewed)."""
    if not tokens:
        return set()
    params = {"sids": list(tokens), "tokens": list(tokens.values()), "owner": owner, "ttl": ttl_s}
    async with engine.begin() as conn:
        return set((await conn.execute(_RENEW, params)).scalars())


async def ping(engine: AsyncEngine) -> None:
    """A renewal round with no lease to renew: the lease table is still read on the
    renewals' connection, so health reports whether a renewal could go through."""
    async with engine.connect() as conn:
        await conn.execute(text("SELECT 1 FROM session_leases LIMIT 1"))


async def release(engine: AsyncEngine, session_id: str, owner: str, token: int) -> None:
    """Let the lease expire now (the row and its token stay: tokens never go back)."""
    await release_many(engine, owner, {session_id: token})


async def release_many(engine: AsyncEngine, owner: str, tokens: dict[str, int]) -> None:
    """`release` for all of `tokens` in one statement (a burst's sessions unloaded at once)."""
    params = {"sids": list(tokens), "tokens": list(tokens.values()), "owner": owner}
    async with engine.begin() as conn:
        await conn.execute(_RELEASE, params)


RENEWAL_APPLICATION = "agentd-lease-renewal"  # its backends' application_name


def renewal_engine(engine: AsyncEngine, timeout_s: float) -> AsyncEngine:
    """A connection of the renewals' own: a flood of requests holding every pooled
    connection must not keep a replica from renewing its leases in time. One the server
    closed is never reused (`guard`): the renewal's retry reconnects at once."""
    return guard(
        create_async_engine(
            engine.url,
            pool_size=1,
            max_overflow=1,
            pool_timeout=timeout_s,
            # (Each attempt, connecting included, is bounded by the keeper: session/replicas/leases.py.)
            connect_args={
                "command_timeout": timeout_s,
                "server_settings": {"application_name": RENEWAL_APPLICATION},
            },
        )
    )


class RenewalLane:
    """An event loop in a thread of its own for the renewals' statements (issue 32 item 4).
    A burst that saturates the server's loop delays every step of a statement run there
    (checkout, BEGIN, UPDATE, COMMIT: each waits its turn behind the burst's callbacks),
    measured past a whole lease with 1,000 sessions at once; on this loop the statement
    runs at once and the server's loop only has to take the answer. The renewals' engine
    is used only here (asyncpg's connections belong to the loop that made them)."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="lease-renewal", daemon=True)
        self._thread.start()

    async def run(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        """`fn(*args)` on the lane; cancelling the caller cancels it there too."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(fn(*args), self._loop))

    async def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join)
        self._loop.close()


def is_stale_fence(exc: BaseException) -> bool:
    """A write the database refused because its fencing token is not the lease's."""
    seen: BaseException | None = exc
    for _ in range(4):  # SQLAlchemy's wrapper → the driver's error → asyncpg's
        if seen is None:
            return False
        if getattr(seen, "sqlstate", None) == STALE_FENCE_SQLSTATE or "agentd_stale_fence" in str(seen):
            return True
        seen = getattr(seen, "orig", None) or seen.__cause__
    return False


def is_unique_violation(exc: BaseException) -> bool:
    """A write a unique index refused (e.g. a message index another replica wrote first)."""
    seen: BaseException | None = exc
    for _ in range(4):  # as `is_stale_fence`
        if seen is None:
            return False
        if (
            getattr(seen, "sqlstate", None) == UNIQUE_VIOLATION
            or getattr(seen, "pgcode", None) == UNIQUE_VIOLATION
        ):
            return True
        seen = getattr(seen, "orig", None) or seen.__cause__
    return False


class StaleFence(Exception):
    """A write refused by another of its checks (a unique index) for a session whose lease
    was taken over after the write was stamped with its token: Postgres does not order a
    statement's checks, so the index may refuse it before the fence trigger would. It is
    the stale fence it stands for: `is_stale_fence` answers True (its text says so)."""


async def lease_token(engine: AsyncEngine, session_id: str) -> int | None:
    """The session's current fencing token (None: no lease row)."""
    async with engine.connect() as conn:
        token = (await conn.execute(_TOKEN, {"sid": session_id})).scalar()
    return None if token is None else int(token)


_TOKEN = text("SELECT token FROM session_leases WHERE session_id = :sid")
