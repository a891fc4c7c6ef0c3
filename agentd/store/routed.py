"""Commands routed between replicas (R-C1, issue 15 item 2): the table and its wake-ups.

A replica a client is connected to (the caller) writes a command for a session another
replica owns (the target) into `routed_commands` and NOTIFYs the target's channel in the
same statement; the target claims the row (pending → running, stamped with its process's
incarnation), runs it and writes the outcome (→ done) while NOTIFYing the caller's channel;
the caller reads the outcome and deletes the row. A caller that gives up deletes its row
(a late outcome then updates nothing). Every wake-up is only a hint: each side re-reads
the rows after its listener (re)connects. Postgres only.

Payloads on a replica's channel: "cmd <id>" (run it) and "reply <id>" (its outcome is in),
or "reply <id> <outcome JSON>" when the outcome fits a notification: the caller then has
it without reading the row, which it deletes later in batches (issue 26 item 5: routing is
a few round trips, not a dozen). Each statement here is one autocommitted round trip; the
ones a routed command waits on (submit, claim, finish) and the batched delete go to asyncpg
directly (agentd/store/pg_driver.py: SQLAlchemy's per-statement CPU was as much as the round
trip on an idle host). The caller's forward and the owner's claim, quiet outcome write and
reply each have a form for many commands in one statement (`submit_many`, `claim_many`,
`finish_many_quiet`, `send_replies`): a replica routing or woken for many commands at once
sends each kind together (agentd/session/replicas/routing.py).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson
from sqlalchemy import text

from agentd.store.aio import AsyncConnection, AsyncEngine
from agentd.store.pg_driver import driver

MAX_ID_DIGITS = 18
# Postgres refuses a NOTIFY payload of 8000 bytes or more: a longer outcome stays in its row.
MAX_NOTIFY_PAYLOAD = 7900


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


def reply_payload(command_id: int, outcome_json: str) -> str:
    """The reply notification, carrying the outcome when it fits."""
    whole = f"{Wake.REPLY.value} {command_id} {outcome_json}"
    return whole if len(whole.encode()) <= MAX_NOTIFY_PAYLOAD else payload(Wake.REPLY, command_id)


def parse_payload(raw: str) -> tuple[Wake, int] | None:
    """(kind, command id) of a routing notification, or None for anything malformed."""
    kind_text, _, rest = raw.partition(" ")
    id_text, _, _ = rest.partition(" ")
    try:
        kind = Wake(kind_text)
    except ValueError:
        return None
    if not id_text.isdigit() or len(id_text) > MAX_ID_DIGITS:
        return None
    return kind, int(id_text)


def carried_outcome(raw: str) -> dict[str, Any] | None:
    """The outcome a reply notification carries (None: it carries none, or a malformed one)."""
    parts = raw.split(" ", 2)
    if len(parts) < 3 or parts[0] != Wake.REPLY.value:
        return None
    try:
        outcome = orjson.loads(parts[2])
    except orjson.JSONDecodeError:
        return None
    if isinstance(outcome, dict) and ("result" in outcome or isinstance(outcome.get("error"), dict)):
        return outcome
    return None


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


# The three statements a routed command waits on go to asyncpg directly (pg_driver).
# The forward commits without waiting for its WAL flush (`synchronous_commit` off for its
# own implicit transaction only: a flush is most of a write's time on a slow disk). Nothing
# is acknowledged on it: the owner's claim, a later commit that waits for the flush, makes
# it durable before the command runs; a forward lost with a crashed database was never
# claimed, so it never runs, and its caller finds no row (`route_lost`, retryable).
_SUBMIT = (
    "WITH unflushed AS (SELECT set_config('synchronous_commit', 'off', true)), "
    "ins AS (INSERT INTO routed_commands "
    "(session_id, target, caller, method, principal, teams, params, state, created_at) "
    "VALUES ($1, $2, $3, $4, $5, $6::json, $7::json, 'pending', now()) RETURNING id) "
    "SELECT id, pg_notify($8, 'cmd ' || id) FROM ins, unflushed"
)
# The forwards of several callers at once (a replica routing many prompts: one statement).
# Their ids are drawn first, in the callers' order, so each caller gets its own back (an
# INSERT's RETURNING order is not its input's).
_SUBMIT_MANY = (
    "WITH unflushed AS (SELECT set_config('synchronous_commit', 'off', true)), "
    "src AS MATERIALIZED (SELECT nextval(pg_get_serial_sequence('routed_commands', 'id')) AS id, t.* "
    "FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], "
    "$8::text[]) WITH ORDINALITY AS t(session_id, target, caller, method, principal, teams, params, "
    "channel, i)), "
    "ins AS (INSERT INTO routed_commands "
    "(id, session_id, target, caller, method, principal, teams, params, state, created_at) "
    "SELECT id, session_id, target, caller, method, principal, teams::json, params::json, 'pending', now() "
    "FROM src) "
    "SELECT src.id, pg_notify(src.channel, 'cmd ' || src.id) FROM src, unflushed ORDER BY src.i"
)
# Pending, or claimed by this very process already: a claim whose answer was lost (the
# connection dropped after its commit) is taken again on the retry, not left running.
_MINE = "(state = 'pending' OR (state = 'running' AND runner = {runner}))"
# The claim does not wait for its flush either (a flush was the routed prompt's one serial
# wait that a direct one has not: ~10 ms here). A claim lost with a crashed database would
# let a withdrawal succeed for a command that ran — but the WAL is flushed in order: the
# first flushed commit after the claim (the prompt's queued row, written before its turn
# starts; any command's own write; its outcome) makes the claim durable too. So a claim is
# lost only with everything its command wrote, and the command counts as never started:
# withdrawn and carried on, or taken again by the rescan — once, as far as the database is
# concerned. The outcome waits for its flush: a lost one would leave its row running by
# this process, whose rescan would take it again (nothing after it makes it durable).
_CLAIM = (
    "WITH unflushed AS (SELECT set_config('synchronous_commit', 'off', true)) "
    "UPDATE routed_commands SET state = 'running', runner = $3 FROM unflushed "
    "WHERE id = $1 AND target = $2 AND " + _MINE.format(runner="$3") + " "
    "RETURNING id, session_id, caller, method, principal, teams, params"
)
# The claims of several commands at once (an owner woken for many: one statement).
_CLAIM_MANY = (
    "WITH unflushed AS (SELECT set_config('synchronous_commit', 'off', true)) "
    "UPDATE routed_commands SET state = 'running', runner = $3 FROM unflushed "
    "WHERE id = ANY($1::int8[]) AND target = $2 AND " + _MINE.format(runner="$3") + " "
    "RETURNING id, session_id, caller, method, principal, teams, params"
)
_PENDING = text(
    "SELECT id FROM routed_commands WHERE target = :target AND "
    + _MINE.format(runner=":runner")
    + " ORDER BY id"
)
_FINISH = (
    "WITH u AS (UPDATE routed_commands SET state = 'done', outcome = $2::json "
    "WHERE id = $1 AND state = 'running' RETURNING id) "
    "SELECT pg_notify($3, $4) FROM u"
)
_FINISH_QUIET = (
    "UPDATE routed_commands SET state = 'done', outcome = $2::json WHERE id = $1 AND state = 'running'"
)
# Rows written or deleted many at once are locked in id order first, here and in
# `_FORGET_MANY` (a caller deletes the rows of replies it got while their owner still
# writes their outcomes): two such statements never wait on each other both ways.
_LOCKED_IN_ORDER = "SELECT id FROM routed_commands WHERE id = ANY($1::int8[]) ORDER BY id FOR UPDATE"
_FINISH_QUIET_MANY = (
    f"WITH locked AS MATERIALIZED ({_LOCKED_IN_ORDER}) "
    "UPDATE routed_commands AS r SET state = 'done', outcome = u.outcome::json "
    "FROM unnest($1::int8[], $2::text[]) AS u(id, outcome) "
    "WHERE r.id = u.id AND r.state = 'running' AND r.id IN (SELECT id FROM locked)"
)
# A reply carrying its outcome, sent beside the outcome's durable write: the caller needs
# no row then, and the NOTIFY does not wait for a flush (Postgres holds one lock for every
# NOTIFYing commit through its flush: outcomes sent that way would queue one flush each).
_REPLY = (
    "WITH unflushed AS (SELECT set_config('synchronous_commit', 'off', true)) "
    "SELECT pg_notify($1, $2) FROM unflushed"
)
_REPLY_MANY = (
    "WITH unflushed AS (SELECT set_config('synchronous_commit', 'off', true)) "
    "SELECT pg_notify(t.c, t.p) FROM unflushed, unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(c, p, i) "
    "ORDER BY t.i"
)
# A previous process of this replica (same id, another incarnation) died running these.
_ORPHANS = text(
    "UPDATE routed_commands SET state = 'done', outcome = CAST(:outcome AS json) "
    "WHERE target = :target AND state = 'running' AND runner IS DISTINCT FROM :runner "
    "RETURNING id, caller"
)
_NOTIFY = text("SELECT pg_notify(:channel, :payload)")
# The outcome (the row deleted) once done, else the state: one round trip. The CTE's
# DELETE is not seen by the outer SELECT (one snapshot): a deleted row reads 'done'.
# On asyncpg directly too: a caller reads this after each quiet interval of a long wait (a
# saturated owner: many at once), or after a reply too long to carry its outcome.
_TAKE = (
    "WITH d AS (DELETE FROM routed_commands WHERE id = $1 AND state = 'done' RETURNING outcome) "
    "SELECT (SELECT outcome FROM d) AS outcome, (SELECT state FROM routed_commands WHERE id = $1) AS state"
)
_FORGET = text("DELETE FROM routed_commands WHERE id = :id")
# Rows whose outcome was delivered: nobody reads them again, so the delete does not wait
# for its flush either (lost with a crashed database, they are purged later) — and its
# flush does not queue before the next command's.
_FORGET_MANY = (
    "WITH unflushed AS (SELECT set_config('synchronous_commit', 'off', true)), "
    f"locked AS MATERIALIZED ({_LOCKED_IN_ORDER}) "
    "DELETE FROM routed_commands USING unflushed WHERE id IN (SELECT id FROM locked)"
)
_WITHDRAW = text("DELETE FROM routed_commands WHERE id = :id AND state = 'pending' RETURNING id")
_FORGET_CALLER = text("DELETE FROM routed_commands WHERE caller = :caller")
_PURGE = text("DELETE FROM routed_commands WHERE created_at < now() - make_interval(secs => :age)")
# A waiting caller's "is the owner still there?", once per quiet check interval of every
# routed command: on asyncpg directly too (pg_driver).
_LEASE = "SELECT owner, expires_at > now() AS live FROM session_leases WHERE session_id = $1"


@contextlib.asynccontextmanager
async def _autocommit(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A pooled connection whose each statement commits by itself (one round trip; no
    BEGIN, COMMIT or reset rollback)."""
    async with engine.connect() as conn:
        yield await conn.execution_options(isolation_level="AUTOCOMMIT")


@dataclass(frozen=True)
class Forward:
    """A command as its caller submits it (`submit_many`)."""

    session_id: str
    target: str
    caller: str
    method: str
    principal: str
    teams: tuple[str, ...]
    params: dict[str, Any]


async def submit(engine: AsyncEngine, *, session_id: str, target: str, caller: str, method: str,
                 principal: str, teams: tuple[str, ...], params: dict[str, Any]) -> int:  # fmt: skip
    values = (session_id, target, caller, method, principal, _json(list(teams)), _json(params))
    async with driver(engine) as conn:
        return int(await conn.fetchval(_SUBMIT, *values, replica_channel(target)))


async def submit_many(engine: AsyncEngine, forwards: Sequence[Forward]) -> list[int]:
    """`submit` of each forward in one statement: their ids, in their order."""
    if len(forwards) == 1:  # a lone forward: the plain statement (the 1-client case)
        f = forwards[0]
        return [
            await submit(engine, session_id=f.session_id, target=f.target, caller=f.caller, method=f.method,
                         principal=f.principal, teams=f.teams, params=f.params)
        ]  # fmt: skip
    columns: list[list[str]] = [[] for _ in range(8)]
    for f in forwards:
        row = (f.session_id, f.target, f.caller, f.method, f.principal, _json(list(f.teams)), _json(f.params),
               replica_channel(f.target))  # fmt: skip
        for column, value in zip(columns, row, strict=True):
            column.append(value)
    async with driver(engine) as conn:
        rows = await conn.fetch(_SUBMIT_MANY, *columns)
    return [int(row["id"]) for row in rows]


async def claim(engine: AsyncEngine, command_id: int, target: str, runner: str) -> RoutedCommand | None:
    """Take a pending command addressed to `target` (None: not pending, or not ours)."""
    async with driver(engine) as conn:
        row = await conn.fetchrow(_CLAIM, command_id, target, runner)
    return None if row is None else _command(row)


async def claim_many(
    engine: AsyncEngine, command_ids: Sequence[int], target: str, runner: str
) -> list[RoutedCommand | None]:
    """`claim` of each command, in one statement: in their order, None where not taken."""
    if len(command_ids) == 1:  # a lone command: the plain statement (the 1-client case)
        return [await claim(engine, command_ids[0], target, runner)]
    async with driver(engine) as conn:
        rows = await conn.fetch(_CLAIM_MANY, list(command_ids), target, runner)
    taken = {int(row["id"]): _command(row) for row in rows}
    return [taken.get(command_id) for command_id in command_ids]


def _command(row: Any) -> RoutedCommand:
    teams = _loads(row["teams"])
    return RoutedCommand(
        id=int(row["id"]),
        session_id=str(row["session_id"]),
        caller=str(row["caller"]),
        method=str(row["method"]),
        principal=str(row["principal"]),
        teams=tuple(str(t) for t in teams) if isinstance(teams, list) else (),
        params=_loads(row["params"]) or {},
    )


async def pending(engine: AsyncEngine, target: str, runner: str) -> list[int]:
    """Commands for `target` to run: pending, or claimed by `runner` (this process) —
    the caller skips those it is running now."""
    async with _autocommit(engine) as conn:
        return [
            int(i) for i in (await conn.execute(_PENDING, {"target": target, "runner": runner})).scalars()
        ]


def outcome_text(outcome: dict[str, Any]) -> str:
    return _json(outcome)


def reply_carries(command_id: int, outcome_json: str) -> bool:
    """Whether the reply notification can carry this outcome (else the caller reads the row)."""
    return reply_payload(command_id, outcome_json) != payload(Wake.REPLY, command_id)


async def finish(
    engine: AsyncEngine, command: RoutedCommand, outcome_json: str, *, wake: bool = True
) -> None:
    """Store the outcome (nothing if the caller gave up meanwhile) and, with `wake`, wake the
    caller once it is stored (an outcome too long for a notification is read from the row)."""
    async with driver(engine) as conn:
        if wake:
            channel, reply = replica_channel(command.caller), reply_payload(command.id, outcome_json)
            await conn.execute(_FINISH, command.id, outcome_json, channel, reply)
        else:
            await conn.execute(_FINISH_QUIET, command.id, outcome_json)


async def finish_many_quiet(engine: AsyncEngine, outcomes: Sequence[tuple[int, str]]) -> list[None]:
    """`finish(wake=False)` of several (command id, outcome JSON) in one statement (one
    transaction, one flush waited for)."""
    ids, texts = [i for i, _ in outcomes], [t for _, t in outcomes]
    async with driver(engine) as conn:
        if len(outcomes) == 1:
            await conn.execute(_FINISH_QUIET, ids[0], texts[0])
        else:
            await conn.execute(_FINISH_QUIET_MANY, ids, texts)
    return [None for _ in outcomes]


async def send_replies(engine: AsyncEngine, replies: Sequence[tuple[RoutedCommand, str]]) -> list[None]:
    """`send_reply` of several (command, outcome JSON) in one statement, in their order."""
    channels = [replica_channel(command.caller) for command, _ in replies]
    payloads = [reply_payload(command.id, text) for command, text in replies]
    async with driver(engine) as conn:
        if len(replies) == 1:
            await conn.execute(_REPLY, channels[0], payloads[0])
        else:
            await conn.execute(_REPLY_MANY, channels, payloads)
    return [None for _ in replies]


async def send_reply(engine: AsyncEngine, command: RoutedCommand, outcome_json: str) -> None:
    """Wake the caller with the outcome in the notification (`reply_carries`), without
    waiting for the outcome's durable write (`finish(wake=False)` beside it): the command's
    effects are committed already, and the row only serves a caller that missed this."""
    async with driver(engine) as conn:
        await conn.execute(_REPLY, replica_channel(command.caller), reply_payload(command.id, outcome_json))


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
    async with driver(engine) as conn:
        row = await conn.fetchrow(_TAKE, command_id)
    if row["outcome"] is not None:
        outcome = _loads(row["outcome"])
        return State.DONE, outcome if isinstance(outcome, dict) else {}
    return (State(row["state"]) if row["state"] is not None else None), None


async def forget(engine: AsyncEngine, command_id: int) -> None:
    async with _autocommit(engine) as conn:
        await conn.execute(_FORGET, {"id": command_id})


async def forget_many(engine: AsyncEngine, command_ids: Collection[int]) -> None:
    """Delete rows whose outcome reached the caller in its notification."""
    async with driver(engine) as conn:
        await conn.execute(_FORGET_MANY, list(command_ids))


async def withdraw(engine: AsyncEngine, command_id: int) -> bool:
    """Take back a command nobody has started: True when it was still pending (now gone:
    a claim after this finds nothing, so it never runs)."""
    async with _autocommit(engine) as conn:
        return (await conn.execute(_WITHDRAW, {"id": command_id})).first() is not None


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
    async with driver(engine) as conn:
        row = await conn.fetchrow(_LEASE, session_id)
    return str(row["owner"]) if row is not None and row["live"] else None
