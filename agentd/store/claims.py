"""Claiming the sessions a dead replica left with work, in batches (R-C1, R-E6; issue 26
item 6).

One statement takes up to `limit` expired leases of sessions with work — a turn their
owner was running (`sessions.running_turn`) or, when asked, queued prompts — for the
claiming replica: the next fencing token, a fresh expiry. `FOR UPDATE … SKIP LOCKED`
lets survivors sweeping at the same moment each take different rows instead of queueing
behind each other, and a row another replica claimed meanwhile is re-checked by Postgres
(READ COMMITTED) and no longer expired: a session is claimed by one replica only, so it
is loaded once. A row locked by a write in flight (a paused owner mid-commit) is skipped
and tried at the next sweep.

`mine`: also the replica's own live leases — a replica restarted with the same id takes
back at once what its previous process held, instead of waiting for the leases to run
out. Sessions with work and no lease row at all get one. Every time is the database's.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import TextClause, text

from agentd.store.aio import AsyncEngine
from agentd.store.notify import TAKEOVER_CHANNEL

_RUNNING = "SELECT id FROM sessions WHERE running_turn IS NOT NULL"
_QUEUED = "SELECT session_id FROM queued_prompts"


def _claim(work: str, *, mine: bool) -> TextClause:
    expired = "(l.expires_at <= now() OR l.owner = :me)" if mine else "l.expires_at <= now()"
    return text(
        "WITH picked AS (SELECT l.session_id FROM session_leases AS l "
        f"WHERE {expired} AND l.session_id IN ({work}) "
        "AND NOT (l.session_id = ANY(CAST(:skip AS varchar[]))) "
        "ORDER BY l.expires_at, l.session_id LIMIT :limit FOR UPDATE OF l SKIP LOCKED) "
        "UPDATE session_leases AS s SET owner = :me, token = s.token + 1, "
        "expires_at = now() + make_interval(secs => :ttl) "
        "FROM picked WHERE s.session_id = picked.session_id RETURNING s.session_id, s.token"
    )


def _unleased(work: str) -> TextClause:
    return text(
        "INSERT INTO session_leases (session_id, owner, token, expires_at) "
        f"SELECT w.id, CAST(:me AS varchar), 1, now() + make_interval(secs => :ttl) FROM ({work}) AS w(id) "
        "WHERE NOT EXISTS (SELECT 1 FROM session_leases AS l WHERE l.session_id = w.id) "
        "AND NOT (w.id = ANY(CAST(:skip AS varchar[]))) "
        "LIMIT :limit ON CONFLICT (session_id) DO NOTHING RETURNING session_id, token"
    )


_ANY = f"{_RUNNING} UNION {_QUEUED}"
_STATEMENTS = {
    (queued, mine): (_claim(_ANY if queued else _RUNNING, mine=mine), _unleased(_ANY if queued else _RUNNING))
    for queued in (False, True)
    for mine in (False, True)
}


async def claim_orphans(
    engine: AsyncEngine,
    replica_id: str,
    limit: int,
    ttl_s: float,
    *,
    queued: bool,
    mine: bool = False,
    skip: Sequence[str] = (),
) -> dict[str, int]:
    """Up to `limit` orphaned sessions now leased to `replica_id`: session id → its new
    fencing token. `skip`: sessions not to claim (held here already, or backing off)."""
    if limit <= 0:
        return {}
    claim, unleased = _STATEMENTS[(queued, mine)]
    values = {"me": replica_id, "limit": limit, "ttl": ttl_s, "skip": list(skip)}
    async with engine.begin() as conn:
        rows = (await conn.execute(claim, values)).all()
        got = {str(r.session_id): int(r.token) for r in rows}
        if len(got) < limit:
            values["limit"] = limit - len(got)
            for r in (await conn.execute(unleased, values)).all():
                got[str(r.session_id)] = int(r.token)
    return got


_ANNOUNCE = text("SELECT pg_notify(:channel, :me)")


async def announce_claiming(engine: AsyncEngine, replica_id: str) -> None:
    """Tell the other replicas' sweeps that orphans are being claimed (they sweep at once)."""
    async with engine.begin() as conn:
        await conn.execute(_ANNOUNCE, {"channel": TAKEOVER_CHANNEL, "me": replica_id})
