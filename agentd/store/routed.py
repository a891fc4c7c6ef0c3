"""Commands routed between replicas (R-C1, issue 15 item 2): the table and its wake-ups.

A replica a client is connected to (the caller) writes a command for a session another
replica owns (the target) into `routed_commands` and NOTIFYs the target's channel in the
same statement; the target claims the row (pending → running, stamped with its process's
incarnation), runs it and writes the outcome (→ done) while NOTIFYing the caller's channel;
the caller reads the outcome and deletes the row. A caller that gives up deletes its row
(a late outcome then updates nothing). Every wake-up is only a hint: each side re-reads
the rows after its listener (re)connects. Postgres only.

Payloads on a replica's channel: "cmd <id>" (run it) and "reply <id>" (its outcome is in).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

MAX_ID_DIGITS = 18


class Wake(StrEnum):
    COMMAND = "cmd"  # a command for this replica to run
    REPLY = "reply"  # the outcome of a command this replica sent


class State(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"


def replica_channel(replica_id: str) -> str:
    """The NOTIFY channel of one replica (an identifier whatever the replica id holds)."""
    return "agentd_r_" + hashlib.sha256(replica_id.encode()).hexdigest()[:24]


def payload(kind: Wake, command_id: int) -> str:
    return f"{kind.value} {command_id}"


def parse_payload(raw: str) -> tuple[Wake, int] | None:
    """(kind, command id) of a routing notification, or None for anything malformed."""
    kind_text, _, id_text = raw.partition(" ")
    try:
        kind = Wake(kind_text)
    except ValueError:
        return None
    if not id_text.isdigit() or len(id_text) > MAX_ID_DIGITS:
        return None
    return kind, int(id_text)


@dataclass(frozen=True)
class RoutedCommand:
    id: int
    session_id: str
    caller: str
    method: str
    principal: str
    teams: tuple[str, ...]
    params: dict[str, Any]


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _loads(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, (str, bytes)) else value


_SUBMIT = text(
    "WITH ins AS (INSERT INTO routed_commands "
    "(session_id, target, caller, method, principal, teams, params, state, created_at) "
    "VALUES (:sid, :target, :caller, :method, :principal, CAST(:teams AS json), CAST(:params AS json), "
    "'pending', now()) RETURNING id) "
    "SELECT id, pg_notify(:channel, 'cmd ' || id) FROM ins"
)
_CLAIM = text(
    "UPDATE routed_commands SET state = 'running', runner = :runner "
    "WHERE id = :id AND target = :target AND state = 'pending' "
    "RETURNING id, session_id, caller, method, principal, teams, params"
)
_PENDING = text("SELECT id FROM routed_commands WHERE target = :target AND state = 'pending' ORDER BY id")
_FINISH = text(
    "WITH u AS (UPDATE routed_commands SET state = 'done', outcome = CAST(:outcome AS json) "
    "WHERE id = :id AND state = 'running' RETURNING id) "
    "SELECT pg_notify(:channel, 'reply ' || id) FROM u"
)
# A previous process of this replica (same id, another incarnation) died running these.
_ORPHANS = text(
    "UPDATE routed_commands SET state = 'done', outcome = CAST(:outcome AS json) "
    "WHERE target = :target AND state = 'running' AND runner IS DISTINCT FROM :runner "
    "RETURNING id, caller"
)
_NOTIFY = text("SELECT pg_notify(:channel, :payload)")
_TAKE = text("DELETE FROM routed_commands WHERE id = :id AND state = 'done' RETURNING outcome")
_STATE = text("SELECT state FROM routed_commands WHERE id = :id")
_FORGET = text("DELETE FROM routed_commands WHERE id = :id")
_FORGET_CALLER = text("DELETE FROM routed_commands WHERE caller = :caller")
_PURGE = text("DELETE FROM routed_commands WHERE created_at < now() - make_interval(secs => :age)")
_LEASE = text("SELECT owner, expires_at > now() AS live FROM session_leases WHERE session_id = :sid")


async def submit(engine: AsyncEngine, *, session_id: str, target: str, caller: str, method: str,
                 principal: str, teams: tuple[str, ...], params: dict[str, Any]) -> int:  # fmt: skip
    values = {
        "sid": session_id,
        "target": target,
        "caller": caller,
        "method": method,
        "principal": principal,
        "teams": _json(list(teams)),
        "params": _json(params),
        "channel": replica_channel(target),
    }
    async with engine.begin() as conn:
        return int((await conn.execute(_SUBMIT, values)).scalar_one())


async def claim(engine: AsyncEngine, command_id: int, target: str, runner: str) -> RoutedCommand | None:
    """Take a pending command addressed to `target` (None: not pending, or not ours)."""
    async with engine.begin() as conn:
        row = (await conn.execute(_CLAIM, {"id": command_id, "target": target, "runner": runner})).first()
    if row is None:
        return None
    teams = _loads(row.teams)
    return RoutedCommand(
        id=int(row.id),
        session_id=str(row.session_id),
        caller=str(row.caller),
        method=str(row.method),
        principal=str(row.principal),
        teams=tuple(str(t) for t in teams) if isinstance(teams, list) else (),
        params=_loads(row.params) or {},
    )


async def pending(engine: AsyncEngine, target: str) -> list[int]:
    async with engine.connect() as conn:
        return [int(i) for i in (await conn.execute(_PENDING, {"target": target})).scalars()]


async def finish(engine: AsyncEngine, command: RoutedCommand, outcome: dict[str, Any]) -> None:
    """Store the outcome and wake the caller (nothing if the caller gave up meanwhile)."""
    values = {"id": command.id, "outcome": _json(outcome), "channel": replica_channel(command.caller)}
    async with engine.begin() as conn:
        await conn.execute(_FINISH, values)


async def fail_orphans(engine: AsyncEngine, target: str, runner: str, outcome: dict[str, Any]) -> int:
    """Commands an earlier process of this replica was running when it died: answered
    with `outcome`, their callers woken. Returns how many."""
    async with engine.begin() as conn:
        rows = (
            await conn.execute(_ORPHANS, {"target": target, "runner": runner, "outcome": _json(outcome)})
        ).all()
        for row in rows:
            await conn.execute(
                _NOTIFY,
                {"channel": replica_channel(str(row.caller)), "payload": payload(Wake.REPLY, int(row.id))},
            )
    return len(rows)


async def take_outcome(engine: AsyncEngine, command_id: int) -> tuple[State | None, dict[str, Any] | None]:
    """The command's outcome, deleting its row, once it is done; else (its state, None)
    (state None: there is no such row)."""
    async with engine.begin() as conn:
        row = (await conn.execute(_TAKE, {"id": command_id})).first()
        if row is not None:
            outcome = _loads(row.outcome)
            return State.DONE, outcome if isinstance(outcome, dict) else {}
        state = (await conn.execute(_STATE, {"id": command_id})).scalar()
    return (State(state) if state is not None else None), None


async def forget(engine: AsyncEngine, command_id: int) -> None:
    async with engine.begin() as conn:
        await conn.execute(_FORGET, {"id": command_id})


async def forget_caller(engine: AsyncEngine, caller: str) -> None:
    """At start-up: rows an earlier process of this replica was waiting on (nobody will)."""
    async with engine.begin() as conn:
        await conn.execute(_FORGET_CALLER, {"caller": caller})


async def purge(engine: AsyncEngine, older_than_s: float) -> int:
    """Rows nobody will read: their caller died and never came back (a replica id that
    changed). Returns how many went."""
    async with engine.begin() as conn:
        return int((await conn.execute(_PURGE, {"age": older_than_s})).rowcount or 0)


async def lease_holder(engine: AsyncEngine, session_id: str) -> str | None:
    """The replica holding a live lease on the session, if any."""
    async with engine.connect() as conn:
        row = (await conn.execute(_LEASE, {"sid": session_id})).first()
    return str(row.owner) if row is not None and row.live else None
