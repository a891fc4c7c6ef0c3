"""Active takeover (R-C1, R-E6; issue 26 item 6): when a replica dies, the others take its
sessions over without waiting for a client to ask for them, in parallel.

Every replica on Postgres sweeps a few times per lease time. A sweep claims, in one
statement, expired leases of sessions that still had work — a turn their owner was
running (`sessions.running_turn`) or queued prompts — as many as it has free load slots
(agentd/store/claims.py: `FOR UPDATE SKIP LOCKED`, so survivors sweeping together take
different sessions and none is loaded twice), and loads them concurrently through
`SessionManager.get` (the lease is already this replica's). Each time a load ends and the
last claim was full, it claims again at once: the survivors share a dead replica's
sessions in proportion to how fast they load them, and all are resumed within the lease
time plus one sweep interval (plus the loads themselves) however many there were. A sweep
whose claim came back full also wakes the other replicas' sweeps (NOTIFY on
`TAKEOVER_CHANNEL`), so they claim at once instead of at their next interval: otherwise a
survivor that loads quickly could take every session before another one swept. A load
recovers the session as after a restart (the interrupted turn closed with its partial
text kept, the queue resumed once). A replica restarted with the same id claims its own
sessions with work at start (`mine`), at once, instead of after their leases ran out.

A session whose load fails is released (another replica may try) and waits a little
longer each time before this replica claims it again (bounded memory), so one broken
session cannot take every sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import exc as sa_exc

from agentd.session.errors import SessionError, SessionErrorKind

if TYPE_CHECKING:
    from agentd.session.manager import SessionManager

log = logging.getLogger(__name__)

# Sessions loaded at the same time by one replica's sweep (each is a few reads and a commit).
TAKEOVER_PARALLEL = 32
# A failed takeover is tried again after this, doubling per failure up to the cap.
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 60.0
MAX_TRACKED_FAILURES = 1000

# (at most n, not these) → the session ids now leased to this replica
ClaimOrphans = Callable[[int, Collection[str]], Awaitable[list[str]]]


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

    def waiting(self, now: float) -> list[str]:
        """The sessions not to be claimed now."""
        return [sid for sid, (not_before, _) in self._next.items() if now < not_before]


class Takeover:
    """One replica's sweeper: claims orphaned sessions and loads them (see the module doc)."""

    def __init__(
        self,
        manager: SessionManager,
        claim: ClaimOrphans,
        *,
        interval_s: float,
        parallel: int = TAKEOVER_PARALLEL,
        announce: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._manager = manager
        self._claim = claim
        self.interval_s = interval_s
        self._parallel = max(1, parallel)
        self._announce = announce  # wakes the other replicas' sweeps (a full claim: more to share)
        self._woken = asyncio.Event()
        self._announcing: set[asyncio.Task[None]] = set()
        self.task: asyncio.Task[None] | None = None  # `run`, as `start_takeover` started it
        self._backoff = Backoff()
        self.taken: int = 0  # sessions this replica took over (logs, tests)

    async def run(self, *, first: Callable[[], Awaitable[list[str]]] | None = None) -> None:
        """Sweep until the manager closes. `first`: a sweep of its own at once (the
        sessions a previous process of this replica held)."""
        try:
            await self._manager.warm_up()  # a takeover then loads at once
        except Exception:  # the first load reports the problem to its caller
            log.exception("preparing the turn machinery for takeovers failed")
        if first is not None:
            try:
                await first()
            except Exception as exc:
                _failed("taking back this replica's sessions", exc)
        while not self._manager.closing:
            # The interval, or less when another replica announces that it is claiming.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), self.interval_s)
            self._woken.clear()
            try:
                await self.sweep()
            except Exception as exc:  # the database may be away for a while: the next sweep retries
                _failed("the takeover sweep", exc)

    async def sweep(self, claim: ClaimOrphans | None = None) -> list[str]:
        """Claim and load until nothing is left to claim; returns the sessions this
        replica took (loaded here)."""
        claim = claim or self._claim
        loop = asyncio.get_running_loop()
        taken: list[str] = []
        loads: set[asyncio.Task[bool]] = set()
        names: dict[asyncio.Task[bool], str] = {}
        more = True
        announced = False
        try:
            while True:
                free = self._parallel - len(loads)
                if more and free > 0 and not self._manager.closing:
                    try:
                        got = await claim(free, self._backoff.waiting(loop.time()))
                    except Exception as exc:  # the loads under way finish; the next sweep claims again
                        _failed("claiming orphaned sessions", exc)
                        got = []
                    more = len(got) == free  # a full claim: there may be more once a slot frees
                    if more and not announced:
                        announced = True
                        self._announce_soon()
                    for session_id in got:
                        task = asyncio.create_task(self._load(session_id))
                        loads.add(task)
                        names[task] = session_id
                if not loads:
                    break
                done, loads = await asyncio.wait(loads, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    if task.result():
                        taken.append(names[task])
                    del names[task]
        finally:
            for task in loads:  # cancelled (the server stops): what was claimed is released
                task.cancel()
        if taken:
            self.taken += len(taken)
            log.warning("took over %d session(s) whose owner stopped renewing: %s", len(taken), taken)
        return taken

    def wake(self) -> None:
        """Sweep now: another replica is claiming orphans (there may be more to share)."""
        self._woken.set()

    def _announce_soon(self) -> None:
        """Tell the other replicas, without holding up this sweep's loads (best effort:
        they sweep at their interval anyway)."""
        if self._announce is None:
            return

        async def announce(send: Callable[[], Awaitable[None]]) -> None:
            try:
                await send()
            except Exception as exc:
                _failed("announcing a takeover to the other replicas", exc)

        task = asyncio.create_task(announce(self._announce))
        self._announcing.add(task)
        task.add_done_callback(self._announcing.discard)

    async def _load(self, session_id: str) -> bool:
        """Load a claimed session; False (its claim released) when that failed."""
        loop = asyncio.get_running_loop()
        if self._manager.closing:
            self._manager.leases.release(session_id)
            return False
        try:
            actor = await self._manager.get(session_id)  # releases the lease if it fails
        except SessionError as exc:
            if exc.kind is SessionErrorKind.OWNED_ELSEWHERE:
                return False  # (the claim was lost meanwhile)
            wait = self._backoff.failed(session_id, loop.time())
            log.warning("session %s: taking it over failed (%s); retry in %.0fs", session_id, exc, wait)
            return False
        except asyncio.CancelledError:
            self._manager.leases.release(session_id)
            raise
        except Exception:
            wait = self._backoff.failed(session_id, loop.time())
            log.exception("session %s: taking it over failed; next try in %.0fs", session_id, wait)
            return False
        self._backoff.succeeded(session_id)
        return actor is not None


def start_takeover(manager: SessionManager, *, lease_ttl_s: float, queued: bool) -> Takeover | None:
    """The replica's sweeper, started (its `task`; Postgres only: with SQLite one process
    owns everything; `wake` is for the listener of `TAKEOVER_CHANNEL`).
    `queued`: sessions left with only queued prompts are taken over too (auto-resume). It
    first takes back, at once, the sessions with work a previous process of this replica
    (the same replica id) held."""
    from agentd.session.replicas.leases import PostgresLeases
    from agentd.store import claims

    leases = manager.leases
    if not isinstance(leases, PostgresLeases):
        return None

    async def claim(limit: int, skip: Collection[str]) -> list[str]:
        return await leases.claim_orphans(limit, queued=queued, skip=skip)

    async def claim_mine(limit: int, skip: Collection[str]) -> list[str]:
        return await leases.claim_orphans(limit, queued=queued, mine=True, skip=skip)

    async def announce() -> None:
        await claims.announce_claiming(manager.store.engine, leases.replica_id)

    sweeper = Takeover(manager, claim, interval_s=sweep_interval(lease_ttl_s), announce=announce)

    async def take_back() -> list[str]:
        return await sweeper.sweep(claim_mine)

    sweeper.task = asyncio.create_task(sweeper.run(first=take_back), name="takeover")
    return sweeper


def _failed(what: str, exc: Exception) -> None:
    """A busy pool (a burst holds every connection) is load, not a fault: one warning line,
    and the next sweep tries again; anything else is logged with its traceback."""
    if isinstance(exc, sa_exc.TimeoutError):
        log.warning("%s failed: no database connection free in time (%s); the next sweep retries", what, exc)
    else:
        log.error("%s failed", what, exc_info=exc)
