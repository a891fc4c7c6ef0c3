"""Active takeover (R-C1, R-E6): when a replica dies, another one takes its sessions over
without waiting for a client to ask for them.

Every replica on Postgres sweeps a few times per lease time for sessions whose lease ran
out while they still had work — a turn their owner was running (`sessions.running_turn`,
set and cleared by the group commit) or queued prompts — and loads each through
`SessionManager.get`: the lease acquisition decides which replica wins (the others get
`owned_elsewhere` and move on), and the load recovers the session as after a restart
(the interrupted turn closed with its partial text kept, the queue resumed once: the
winner's actor is the session's only one). A client reconnecting to any replica then
continues from its last seq. A session whose load fails waits a little longer each time
before the next try (bounded memory), so one broken session cannot take every sweep.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentd.session.errors import SessionError, SessionErrorKind

if TYPE_CHECKING:
    from agentd.session.manager import SessionManager

log = logging.getLogger(__name__)

# Sessions taken over per sweep at most (the rest: the next sweep, a fraction of a lease later).
TAKEOVER_BATCH = 32
# A failed takeover is tried again after this, doubling per failure up to the cap.
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 60.0
MAX_TRACKED_FAILURES = 1000

FindOrphans = Callable[[int], Awaitable[list[str]]]  # (at most n) → session ids


def sweep_interval(lease_ttl_s: float) -> float:
    """A quarter of the lease time: a dead owner's session is taken over at most
    `lease_ttl_s` (the lease running out) plus this after the death — 12.5 s by default."""
    return max(0.05, lease_ttl_s / 4)


@dataclass
class Backoff:
    """When each session whose takeover failed may be tried again (monotonic seconds)."""

    first_s: float = RETRY_FIRST_S
    max_s: float = RETRY_MAX_S
    limit: int = MAX_TRACKED_FAILURES
    _next: dict[str, tuple[float, float]] = field(default_factory=dict)  # sid → (not before, wait)

    def ready(self, session_id: str, now: float) -> bool:
        entry = self._next.get(session_id)
        return entry is None or now >= entry[0]

    def failed(self, session_id: str, now: float) -> float:
        """Record a failure; returns how long the session now waits."""
        previous = self._next.pop(session_id, None)
        wait = self.first_s if previous is None else min(self.max_s, previous[1] * 2)
        self._next[session_id] = (now + wait, wait)
        while len(self._next) > self.limit:  # forget the oldest: it is merely tried sooner
            self._next.pop(next(iter(self._next)))
        return wait

    def succeeded(self, session_id: str) -> None:
        self._next.pop(session_id, None)


class Takeover:
    """One replica's sweeper: finds orphaned sessions and loads them (see the module doc)."""

    def __init__(
        self,
        manager: SessionManager,
        find: FindOrphans,
        *,
        interval_s: float,
        batch: int = TAKEOVER_BATCH,
    ) -> None:
        self._manager = manager
        self._find = find
        self.interval_s = interval_s
        self._batch = batch
        self._backoff = Backoff()
        self.taken: int = 0  # sessions this replica took over (logs, tests)

    async def run(self) -> None:
        while not self._manager.closing:
            await asyncio.sleep(self.interval_s)
            try:
                await self.sweep()
            except Exception:  # the database may be away for a while: the next sweep retries
                log.exception("the takeover sweep failed")

    async def sweep(self) -> list[str]:
        """Take over what the database lists now; returns the sessions this replica took."""
        loop = asyncio.get_running_loop()
        taken: list[str] = []
        for session_id in await self._find(self._batch):
            if self._manager.closing:
                break
            if not self._backoff.ready(session_id, loop.time()):
                continue
            if self._manager.live_actor(session_id) is not None:
                continue  # ours already (its lease is being renewed)
            try:
                actor = await self._manager.get(session_id)
            except SessionError as exc:
                if exc.kind is SessionErrorKind.OWNED_ELSEWHERE:
                    continue  # another replica won it
                wait = self._backoff.failed(session_id, loop.time())
                log.warning("session %s: taking it over failed (%s); retry in %.0fs", session_id, exc, wait)
                continue
            except Exception:
                wait = self._backoff.failed(session_id, loop.time())
                log.exception("session %s: taking it over failed; next try in %.0fs", session_id, wait)
                continue
            self._backoff.succeeded(session_id)
            if actor is not None:
                taken.append(session_id)
        if taken:
            self.taken += len(taken)
            log.warning("took over %d session(s) whose owner stopped renewing: %s", len(taken), taken)
        return taken


def start_takeover(manager: SessionManager, *, lease_ttl_s: float, queued: bool) -> asyncio.Task[None] | None:
    """The replica's sweeper task (Postgres only: with SQLite one process owns everything).
    `queued`: sessions left with only queued prompts are taken over too (auto-resume)."""
    from agentd.session.leases import PostgresLeases

    leases = manager.leases
    if not isinstance(leases, PostgresLeases):
        return None

    async def find(limit: int) -> list[str]:
        return await leases.orphaned(limit, queued=queued)

    sweeper = Takeover(manager, find, interval_s=sweep_interval(lease_ttl_s))
    return asyncio.create_task(sweeper.run(), name="takeover")
