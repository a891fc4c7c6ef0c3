"""Commands for a session another replica owns (R-C1, issue 15 item 2): routed to the
owner through Postgres, with no broker of their own.

`Router.forward` (on the replica the client is connected to) writes the command into
`routed_commands` and NOTIFYs the owner (agentd/store/routed.py), then waits for the
outcome: woken by a NOTIFY on its own channel, and looking by itself every
`check_interval_s` in case a notification was lost. It gives up with a clear error — never
hangs — when its deadline passes (`routed_command_timeout_s`; a prompt, whose answer
comes at its turn's end, has none), or when the owner is gone: the session's lease is no
longer the target's (it died and the lease ran out, or another replica took over) and
still no outcome came after one more interval.

On the owner, `Router.serve` claims the command and runs it through `execute` (the
transport's dispatcher, as the caller's principal and teams: authorised as a local call
would be, and never routed on again), then stores the outcome and wakes the caller.
Commands an earlier process of this replica died running are answered `owner_restarted`
when it starts again.

An outcome is `{"result": …}` or `{"error": {"code", "message", "data"?}}`, a JSON-RPC
result or error as the owner's dispatcher made it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Any

from agentd.protocol.jsonrpc import ErrorCode
from agentd.session.errors import SessionError, SessionErrorKind
from agentd.store import routed as rows
from agentd.store.routed import RoutedCommand, Wake

log = logging.getLogger(__name__)

Execute = Callable[[RoutedCommand], Awaitable[dict[str, Any]]]
Observe = Callable[[str, str], None]  # (method, outcome) → the routed-commands metric
PURGE_AFTER_S = 86_400.0  # rows older than this are left by callers gone for good


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


class Router:
    def __init__(
        self,
        engine: Any,
        replica_id: str,
        *,
        timeout_s: float,
        check_interval_s: float,
        observe: Observe | None = None,
    ) -> None:
        self._engine = engine
        self.replica_id = replica_id
        self.channel = rows.replica_channel(replica_id)
        self.incarnation = secrets.token_hex(8)  # this process, among the replica's restarts
        self.timeout_s = timeout_s
        self.check_interval_s = check_interval_s
        self._observe = observe
        self.execute: Execute | None = None  # set by the composition root (the dispatcher)
        self._waiting: dict[int, asyncio.Event] = {}
        self._running: set[asyncio.Task[None]] = set()
        self.served = 0  # commands run here for other replicas (tests, metrics)

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
    ) -> dict[str, Any]:
        """Run `method` on `owner` and return its outcome (`{"result"}` or `{"error"}`);
        `wait_for_turn`: no deadline (a prompt answers at its turn's end), only the
        owner's liveness bounds the wait. Raises SessionError(ROUTE_FAILED)."""
        wake = asyncio.Event()
        command_id = await rows.submit(
            self._engine,
            session_id=session_id,
            target=owner,
            caller=self.replica_id,
            method=method,
            principal=principal,
            teams=teams,
            params=params,
        )
        self._waiting[command_id] = wake
        loop = asyncio.get_running_loop()
        deadline = None if wait_for_turn else loop.time() + self.timeout_s
        label = RouteOutcome.ABANDONED
        try:
            outcome, label = await self._await_outcome(command_id, session_id, owner, wake, deadline)
            return outcome
        finally:
            self._waiting.pop(command_id, None)
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
        while True:
            state, outcome = await rows.take_outcome(self._engine, command_id)
            if outcome is not None:
                failed = "error" in outcome
                return outcome, RouteOutcome.ERROR if failed else RouteOutcome.OK
            if state is None:
                raise route_failed("route_lost", f"the command for session {session_id} was withdrawn")
            wait = self.check_interval_s
            if deadline is not None:
                left = deadline - loop.time()
                if left <= 0:
                    raise route_failed(
                        "route_timeout",
                        f"replica {owner} did not answer within {self.timeout_s:g}s "
                        "(the command may or may not have taken effect)",
                    )
                wait = min(wait, left)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), wait)
            if wake.is_set():
                wake.clear()
                continue
            # No word for an interval: is the owner still there?
            holder = await rows.lease_holder(self._engine, session_id)
            if holder == owner:
                owner_gone_seen = False
            elif owner_gone_seen:
                raise route_failed(
                    "owner_lost",
                    f"replica {owner}, which ran session {session_id}, is gone "
                    f"({'now ' + holder if holder else 'no replica'} holds it); retry",
                )
            else:
                owner_gone_seen = True  # one more interval: its outcome may be on the way

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
            if wake is not None:
                wake.set()
        else:
            self._spawn(self.serve(command_id))

    async def on_connect(self) -> None:
        """The listener (re)connected: run what was sent meanwhile, look for outcomes."""
        for wake in self._waiting.values():
            wake.set()
        for command_id in await rows.pending(self._engine, self.replica_id):
            self._spawn(self.serve(command_id))

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
        task.add_done_callback(self._running.discard)

    async def serve(self, command_id: int) -> None:
        command = await rows.claim(self._engine, command_id, self.replica_id, self.incarnation)
        if command is None:
            return  # another wake-up took it, or it is not ours
        self.served += 1
        try:
            assert self.execute is not None, "the router has no executor"
            outcome = await self.execute(command)
        except Exception as exc:  # the executor answers errors itself: this is a bug
            log.exception("routed command %s (%s) failed", command.id, command.method)
            outcome = {"error": {"code": -32603, "message": f"Internal error while routing: {exc}"}}
        try:
            await rows.finish(self._engine, command, outcome)
        except Exception:
            log.exception("storing the outcome of routed command %s failed", command.id)

    async def stop(self, grace_s: float = 5.0) -> None:
        """After the actors stopped: the outcomes still being written go out first."""
        if self._running:
            await asyncio.wait(set(self._running), timeout=grace_s)
        for task in list(self._running):
            task.cancel()
