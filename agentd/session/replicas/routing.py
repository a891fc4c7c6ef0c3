"""Commands for a session another replica owns (R-C1, issue 15 item 2; issue 26 item 5):
routed to the owner through Postgres.

`Router.forward` (on the replica the client is connected to) writes the command into
`routed_commands` and NOTIFYs the owner (agentd/store/routed.py), then waits for the
outcome: woken by a NOTIFY on its own channel that carries the outcome when it fits (no
read; the row is deleted later, in batches), and looking by itself every
`check_interval_s` in case a notification was lost. It gives up with a clear error — never
hangs — when its deadline passes (`routed_command_timeout_s`; a prompt, whose answer comes
at its turn's end, has none), or when the owner is gone: the session's lease is no longer
the target's (it died and the lease ran out, or another replica took over). Then
`OwnerGone` says whether the command can be carried on: a command the owner never started
is withdrawn (it can no longer run there) — `ran` False — and the transport sends it again,
with the same requestId, to whoever has the session now (agentd/transport/routed.py); the
client sees latency, not an error.

On the owner, `Router.serve` claims the command and runs it through `execute` (the
transport's dispatcher, as the caller's principal and teams: authorised as a local call
would be, and never routed on again), then stores the outcome and wakes the caller (a
reply that carries the outcome goes out beside the outcome's durable write, not after its
flush). Claims, outcomes and replies of the commands that reach the owner together go out
together, one statement of each kind, as do the forwards a caller makes together
(agentd/session/replicas/batching.py). Every failure
there is caught and retried (bounded): a database that is away for a moment — a pool with
no free connection, a reset — never ends the router; `run` rescans for commands left
pending by a failed wake-up, so none waits for ever. Commands an earlier process of this
replica died running are answered `owner_restarted` when it starts again.

An outcome is `{"result": …}` or `{"error": {"code", "message", "data"?}}`, a JSON-RPC
result or error as the owner's dispatcher made it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import secrets
from collections.abc import Awaitable, Callable, Sequence
from enum import StrEnum
from typing import Any

from agentd.protocol import ErrorCode
from agentd.session.errors import SessionError, SessionErrorKind
from agentd.session.replicas.batching import Batched
from agentd.store import RoutedCommand, State, Wake
from agentd.store import routed as rows

log = logging.getLogger(__name__)

Execute = Callable[[RoutedCommand], Awaitable[dict[str, Any]]]
Observe = Callable[[str, str], None]  # (method, outcome) → the routed-commands metric
LeaseLeft = Callable[[str], float | None]  # session id → seconds this replica's lease lasts at least
Held = Callable[[str, str, float], None]  # (session id, owner, until: loop time)
# The key of an outcome under which its owner says how long its lease on the session lasts
# at least (from when it ran the command): the caller takes the owner as the session's holder
# until then — without asking the database before its next forwards (issue 26 item 5: that
# read, once per lease time per session, was a sixth of a caller's CPU at 200 sessions).
LEASE_LEFT = "_leaseS"
PURGE_AFTER_S = 86_400.0  # rows older than this are left by callers gone for good
MAX_UNREAD = 10_000  # delivered outcomes whose rows wait to be deleted (bounded: `purge` gets the rest)
DELETE_AFTER_S = 0.02  # answered outcomes' rows are deleted in a batch this long after the first
MAX_EARLY = 1_000  # replies that came before their command's submit returned (the oldest go)
RETRY_FIRST_S = 0.05  # a failed claim or finish is tried again after this, doubling
RETRY_MAX_S = 2.0


class RouteOutcome(StrEnum):
    """How a forwarded command ended, as the caller saw it (a metric label)."""

    OK = "ok"
    ERROR = "error"  # the owner answered with an error
    TIMEOUT = "timeout"
    OWNER_LOST = "owner_lost"
    ABANDONED = "abandoned"  # the caller went away first


def route_failed(reason: str, message: str, *, retryable: bool = True) -> SessionError:
    return SessionError(
        SessionErrorKind.ROUTE_FAILED,
        f"{reason}: {message}",
        {"reason": reason, "retryable": retryable},
    )


class OwnerGone(SessionError):
    """The replica a command was sent to no longer holds the session. `ran`: False — the
    command was withdrawn before it started (it never runs there: safe to send again);
    None — it may have run. `holder`: who holds the session now (None: nobody)."""

    def __init__(self, session_id: str, owner: str, holder: str | None, ran: bool | None) -> None:
        now = f"now {holder}" if holder else "no replica"
        may = "" if ran is False else " (the command may or may not have taken effect)"
        super().__init__(
            SessionErrorKind.ROUTE_FAILED,
            f"owner_lost: replica {owner}, which ran session {session_id}, is gone "
            f"({now} holds it){may}; retry",
            {"reason": "owner_lost", "retryable": True},
        )
        self.holder = holder
        self.ran = ran


class Router:
    def __init__(
        self,
        engine: Any,
        replica_id: str,
        *,
        timeout_s: float,
        check_interval_s: float,
        observe: Observe | None = None,
        lease_left: LeaseLeft | None = None,
        on_held: Held | None = None,
    ) -> None:
        self._engine = engine
        self._lease_left = lease_left
        self._on_held = on_held
        self.replica_id = replica_id
        self.channel = rows.replica_channel(replica_id)
        self.incarnation = secrets.token_hex(8)  # this process, among the replica's restarts
        self.timeout_s = timeout_s
        self.check_interval_s = check_interval_s
        self._observe = observe
        self.execute: Execute | None = None  # set by the composition root (the dispatcher)
        self._waiting: dict[int, asyncio.Event] = {}
        self._carried: dict[int, dict[str, Any]] = {}  # outcomes that came in their notification
        # Replies that beat their submit's answer here (a busy event loop, a quick command):
        # kept for `forward`, which would otherwise wait a check interval to read the row.
        self._early: dict[int, dict[str, Any] | None] = {}
        self._unread: set[int] = set()  # … whose rows are still to be deleted
        self._serving: set[int] = set()  # commands being claimed or run here
        self._running: set[asyncio.Task[None]] = set()
        self.served = 0  # commands run here for other replicas (tests, metrics)
        # The owner's statements, each kind sent together for the commands that reached it
        # at once (agentd/session/replicas/batching.py): 200 prompts routed here at once are
        # a few claims, outcomes and replies, not 200 of each.
        self._submits: Batched[rows.Forward, int] = Batched(
            lambda items: rows.submit_many(self._engine, items), name="routed-submits"
        )
        self._claims: Batched[int, RoutedCommand | None] = Batched(self._claim_many, name="routed-claims")
        self._outcomes: Batched[tuple[int, str], None] = Batched(
            lambda items: rows.finish_many_quiet(self._engine, items), name="routed-outcomes"
        )
        self._replies: Batched[tuple[RoutedCommand, str], None] = Batched(
            lambda items: rows.send_replies(self._engine, items), name="routed-replies"
        )

    # ------------------------------------------------------------------ the caller's side

    async def forward(
        self,
        *,
        session_id: str,
        owner: str,
        method: str,
        params: dict[str, Any],
        principal: str,
        teams: tuple[str, ...],
        wait_for_turn: bool = False,
        deadline: float | None = None,
    ) -> dict[str, Any]:
        """Run `method` on `owner` and return its outcome (`{"result"}` or `{"error"}`);
        `wait_for_turn`: no deadline (a prompt answers at its turn's end), only the
        owner's liveness bounds the wait; `deadline` (loop time): the request's own, when it
        began earlier. Raises OwnerGone, or SessionError(ROUTE_FAILED)."""
        loop = asyncio.get_running_loop()
        if deadline is None and not wait_for_turn:
            deadline = loop.time() + self.timeout_s
        wake, sent = asyncio.Event(), loop.time()
        command_id = await self._submits(
            rows.Forward(session_id, owner, self.replica_id, method, principal, teams, params)
        )
        self._waiting[command_id] = wake
        if command_id in self._early:
            early = self._early.pop(command_id)
            if early is not None:
                self._carried[command_id] = early
            wake.set()
        label = RouteOutcome.ABANDONED
        try:
            outcome, label = await self._await_outcome(command_id, session_id, owner, wake, deadline)
            left = outcome.pop(LEASE_LEFT, None)
            # It said so after the command reached it, so after `sent`: its lease ends after this.
            if isinstance(left, (int, float)) and left > 0 and self._on_held is not None:
                self._on_held(session_id, owner, sent + left)
            return outcome
        except OwnerGone:
            label = RouteOutcome.OWNER_LOST
            raise
        except SessionError as exc:
            if (exc.data or {}).get("reason") == "route_timeout":
                label = RouteOutcome.TIMEOUT
            raise
        finally:
            self._waiting.pop(command_id, None)
            self._carried.pop(command_id, None)
            if label in (RouteOutcome.ABANDONED, RouteOutcome.TIMEOUT, RouteOutcome.OWNER_LOST):
                with contextlib.suppress(Exception):  # a late outcome then updates nothing
                    await asyncio.shield(rows.forget(self._engine, command_id))
            if self._observe is not None:
                self._observe(method, label.value)

    async def _await_outcome(
        self, command_id: int, session_id: str, owner: str, wake: asyncio.Event, deadline: float | None
    ) -> tuple[dict[str, Any], RouteOutcome]:
        loop = asyncio.get_running_loop()
        owner_gone_seen = False
        look = False  # read the row: after a bare wake-up, after a quiet interval (not at once: just sent)
        while True:
            carried = self._carried.pop(command_id, None)
            if carried is not None:
                self._delete_later(command_id)
                return carried, RouteOutcome.ERROR if "error" in carried else RouteOutcome.OK
            state: State | None = State.PENDING
            if look:
                state, outcome = await self._read(command_id)
                if outcome is not None:
                    return outcome, RouteOutcome.ERROR if "error" in outcome else RouteOutcome.OK
                if state is None:
                    raise route_failed("route_lost", f"the command for session {session_id} was withdrawn")
            wait = self.check_interval_s
            if deadline is not None:
                left = deadline - loop.time()
                if left <= 0:
                    raise route_failed(
                        "route_timeout",
                        f"replica {owner} did not answer in time "
                        "(the command may or may not have taken effect)",
                    )
                wait = min(wait, left)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), wait)
            if wake.is_set():
                wake.clear()
                look = command_id not in self._carried
                continue
            look = True
            # No word for an interval: is the owner still there?
            holder = await self._holder(session_id, owner)
            if holder == owner:
                owner_gone_seen = False
                continue
            if await self._withdraw(command_id):
                raise OwnerGone(session_id, owner, holder, ran=False)  # never started: carry it on
            if owner_gone_seen:
                raise OwnerGone(session_id, owner, holder, ran=None)
            owner_gone_seen = True  # it was running: its outcome may be on the way

    async def _read(self, command_id: int) -> tuple[State | None, dict[str, Any] | None]:
        """The row's state and outcome; a database that failed for a moment reads as
        'still pending' (the next look reads again)."""
        try:
            return await rows.take_outcome(self._engine, command_id)
        except Exception as exc:
            log.warning("reading routed command %s failed (%s); looking again shortly", command_id, exc)
            return State.PENDING, None

    async def _holder(self, session_id: str, owner: str) -> str | None:
        try:
            return await rows.lease_holder(self._engine, session_id)
        except Exception as exc:  # unknown: count the owner as there, look again
            log.warning("reading the lease of session %s failed (%s)", session_id, exc)
            return owner

    async def _withdraw(self, command_id: int) -> bool:
        try:
            return await rows.withdraw(self._engine, command_id)
        except Exception as exc:
            log.warning("withdrawing routed command %s failed (%s)", command_id, exc)
            return False

    def _delete_later(self, command_id: int) -> None:
        """The outcome came in its notification: its row goes with the next batch."""
        if len(self._unread) >= MAX_UNREAD:
            return  # `purge` removes it in a day
        first = not self._unread
        self._unread.add(command_id)
        if first:
            self._spawn(self._delete_unread())

    async def _delete_unread(self) -> None:
        # After the answers that are on their way (not a statement's CPU before them); the
        # outcomes delivered meanwhile join this batch.
        await asyncio.sleep(DELETE_AFTER_S)
        while self._unread:
            batch, self._unread = self._unread, set()
            try:
                await rows.forget_many(self._engine, batch)
            except Exception as exc:  # left for `purge`
                log.warning("deleting %d answered routed command(s) failed (%s)", len(batch), exc)
                return

    # ------------------------------------------------------------------ the owner's side

    def on_notification(self, raw: str) -> None:
        """A PgListener handler for this replica's channel."""
        parsed = rows.parse_payload(raw)
        if parsed is None:
            log.debug("ignored a malformed routing notification %r", raw[:100])
            return
        kind, command_id = parsed
        if kind is Wake.REPLY:
            wake = self._waiting.get(command_id)
            carried = rows.carried_outcome(raw)
            if wake is None:  # (or nobody waits any more: bounded, forgotten in time)
                self._early[command_id] = carried
                while len(self._early) > MAX_EARLY:
                    self._early.pop(next(iter(self._early)))
                return
            if carried is not None:
                self._carried[command_id] = carried
            wake.set()
        else:
            self._spawn(self.serve(command_id))

    async def on_connect(self) -> None:
        """The listener (re)connected: run what was sent meanwhile, look for outcomes."""
        for wake in self._waiting.values():
            wake.set()
        await self.rescan()

    async def rescan(self) -> None:
        """Serve the commands addressed here that nobody here is serving (a lost wake-up,
        a claim the database refused for a moment, or one whose answer was lost)."""
        for command_id in await rows.pending(self._engine, self.replica_id, self.incarnation):
            if command_id not in self._serving:
                self._spawn(self.serve(command_id))

    async def run(self) -> None:
        """Rescan every interval until cancelled; never ends on an error."""
        while True:
            await asyncio.sleep(self.check_interval_s)
            try:
                await self.rescan()
            except Exception as exc:
                log.warning(
                    "looking for pending routed commands failed (%s); again in %.1fs",
                    exc,
                    self.check_interval_s,
                )

    async def start(self) -> None:
        """At start-up: an earlier process of this replica is gone with what it ran and
        what it waited for."""
        await rows.forget_caller(self._engine, self.replica_id)
        await rows.purge(self._engine, PURGE_AFTER_S)
        answer = {
            "error": {
                "code": int(ErrorCode.ROUTE_FAILED),
                "message": "owner_restarted: the replica running the command restarted; retry",
                "data": {"reason": "owner_restarted", "retryable": True},
            }
        }
        failed = await rows.fail_orphans(self._engine, self.replica_id, self.incarnation, answer)
        if failed:
            log.warning("answered %d routed command(s) an earlier process left running", failed)

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._running.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if not task.cancelled() and task.exception() is not None:  # a bug: said, never silent
            log.error("a routing task failed", exc_info=task.exception())

    async def serve(self, command_id: int) -> None:
        if command_id in self._serving:
            return  # a wake-up and a rescan: served once
        self._serving.add(command_id)
        try:
            command = await self._retrying(
                lambda: self._claims(command_id),
                f"claiming routed command {command_id}",
                self.timeout_s,
            )
            if command is None:
                return  # another wake-up took it, it is not ours, or it was withdrawn
            self.served += 1
            try:
                assert self.execute is not None, "the router has no executor"
                outcome = await self.execute(command)
            except Exception as exc:  # the executor answers errors itself: this is a bug
                log.exception("routed command %s (%s) failed", command.id, command.method)
                outcome = {"error": {"code": -32603, "message": f"Internal error while routing: {exc}"}}
            # The command ran: its outcome goes out, however long the database needs. One
            # that fits a notification wakes the caller beside its durable write (no flush
            # waited for on the way; a lost wake-up is found by the caller's own look).
            left = None if self._lease_left is None else self._lease_left(command.session_id)
            if left is not None:
                outcome = {**outcome, LEASE_LEFT: math.floor(left * 1000) / 1000}
            text = rows.outcome_text(outcome)
            carried = rows.reply_carries(command.id, text)
            if carried:
                self._spawn(self._reply(command, text))
            await self._retrying(
                (lambda: self._outcomes((command.id, text)))
                if carried
                else (lambda: rows.finish(self._engine, command, text)),
                f"storing the outcome of routed command {command.id}",
                None,
            )
        finally:
            self._serving.discard(command_id)

    async def _claim_many(self, command_ids: Sequence[int]) -> list[RoutedCommand | None]:
        return await rows.claim_many(self._engine, command_ids, self.replica_id, self.incarnation)

    async def _reply(self, command: RoutedCommand, text: str) -> None:
        try:
            await self._replies((command, text))
        except Exception as exc:  # the caller reads the stored outcome at its next look
            log.warning("waking the caller of routed command %s failed (%s)", command.id, exc)

    async def _retrying(self, step: Callable[[], Awaitable[Any]], what: str, within: float | None) -> Any:
        """`step()`, tried again after a database failure (backing off) until it goes
        through or `within` seconds have passed (None: until cancelled); None then."""
        loop = asyncio.get_running_loop()
        give_up = None if within is None else loop.time() + within
        delay = RETRY_FIRST_S
        while True:
            try:
                return await step()
            except Exception as exc:
                if give_up is not None and loop.time() + delay > give_up:
                    log.error("%s failed (%s); left for the next rescan", what, exc)
                    return None
                log.warning("%s failed (%s); retrying in %.2fs", what, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)

    async def stop(self, grace_s: float = 5.0) -> None:
        """After the actors stopped: the outcomes still being written go out first."""
        if self._running:
            await asyncio.wait(set(self._running), timeout=grace_s)
        for task in list(self._running):
            task.cancel()
        for batched in (self._submits, self._claims, self._outcomes, self._replies):
            await batched.stop()
