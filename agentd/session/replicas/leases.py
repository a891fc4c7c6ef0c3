"""Session ownership across replicas (R-C1): one replica at a time runs a session's actor.

An actor is made only under a lease (`acquire` before the session is read from the store,
so it sees everything the previous owner committed). The lease's fencing token is kept in
`fences`, which the event writer stamps on every write it takes (`EventWriter.submit`);
on Postgres the database refuses a row whose token is no longer the session's (migration
0010), so a replica that was paused past its lease cannot add to the log after another
took the session over. One background task per replica renews all its leases in one
statement every third of the lease time, on a connection of its own; a failed attempt (a
connection reset) is retried at once on a fresh connection, so a reset shorter than the
lease costs no lease. Whether a lease is still ours is the database's answer: its row
still holds our token (a takeover, on the database's clock, bumps it). A lease not renewed
(taken over, or the database unreachable until it ran out by our own clock, which never
runs ahead of the database's) is lost: `on_lost` drops the actor and its clients are told
to resync (they re-attach, and for now get `owned_elsewhere` here — routing to the owner
is the seam `SessionManager.get` raises at).

SQLite is single-process (a second `agentd serve` refuses to start: store/file_lock.py):
`SessionLeases` itself is the no-op implementation behind the same interface.

`health()` is what `/readyz` and `/metrics` report (issue 15 item 6): the leases owned,
the renewals done and failed, the leases lost, and whether the renewer keeps up. It falls
behind once two renewal rounds in a row have failed (two thirds of the lease time without
one: the next failure loses every session this replica owns), or when no round has ended
for a whole lease time (the renewer is stuck: its leases have run out by now). Then the
replica is not ready, so a load balancer sends new clients elsewhere until a renewal
succeeds again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection, Coroutine
from pathlib import Path
from typing import IO, Any, TypeVar

from agentd.session.errors import SessionError, SessionErrorKind
from agentd.session.replicas.health import LeaseHealth, LeaseMode
from agentd.session.replicas.identity import default_replica_id, home_replica_id
from agentd.store import claims
from agentd.store import leases as store_leases

log = logging.getLogger(__name__)

LostLease = Callable[[str], None]
T = TypeVar("T")

# Renewals failed in a row from which the replica is not ready (see the module docstring).
UNHEALTHY_AFTER_FAILURES = 2
# A lease counts as run out by this process's own clock this long after its computed end
# (which is conservative: from before the statement that set it was sent). A renewal
# merely delayed by a busy machine then still goes through; a process paused or starved
# for longer drops the session and tells its clients (`lease_lost`) — within the lease
# time + 2 s of its last renewal.
LATE_GRACE_S = 1.5

# A session found held by another replica is taken as held there until the end of the
# lease seen, without asking the database again: each command routed to the owner would
# otherwise begin with a locking read of the lease row (issue 26 item 5). Nobody else can
# take it before then; a holder that let go early is asked anyway — it takes the session
# back, or, gone, the router carries the command on (agentd/transport/routed.py).
MAX_HOLDER_MEMOS = 10_000

# A failed renewal is tried again this soon (doubling, at most a twelfth of the lease).
RETRY_FIRST_S = 0.05


def owned_elsewhere(session_id: str, owner: str, expires_in_s: float) -> SessionError:
    return SessionError(
        SessionErrorKind.OWNED_ELSEWHERE,
        f"owned_elsewhere: session {session_id} is run by another replica ({owner}); "
        "connect to that replica, or retry once its lease has run out",
        {
            "reason": "owned_elsewhere",
            "owner": owner,
            "retryable": True,
            "retryAfter": round(max(0.1, expires_in_s), 3),
        },
    )


class SessionLeases:
    """No leases (SQLite, one process): every session is this process's."""

    def __init__(self, replica_id: str = "") -> None:
        # session id → fencing token; the event writer reads it on every submit.
        self.fences: dict[str, int] = {}
        self.replica_id = replica_id or default_replica_id()

    def health(self) -> LeaseHealth:
        return LeaseHealth(self.replica_id, LeaseMode.SINGLE_PROCESS)

    def fenced_out(self, session_id: str) -> None:
        """The database refused one of the session's writes for a stale fencing token."""
        return None

    async def acquire(self, session_id: str) -> None:
        return None

    def release(self, session_id: str) -> None:
        return None

    def forget_holder(self, session_id: str) -> None:
        """The replica last seen holding the session is gone: ask the database next time."""
        return None

    def held_for(self, session_id: str) -> float | None:
        """Seconds this replica's lease on the session lasts at least (None: not held here)."""
        return None

    def held_elsewhere(self, session_id: str, owner: str, until: float) -> None:
        """`owner` said (a routed command's outcome) that it holds the session until `until`
        (loop time) at least: taken as its holder until then, as when read from the database."""
        return None

    def start(self, on_lost: LostLease) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def orphaned(self, limit: int, *, queued: bool) -> list[str]:
        """Sessions with unfinished work whose owner's lease ran out (none: one process)."""
        return []

    async def claim_orphans(
        self, limit: int, *, queued: bool, mine: bool = False, skip: Collection[str] = ()
    ) -> list[str]:
        """Lease up to `limit` sessions with unfinished work whose owner's lease ran out
        (`mine`: or is this replica's, from a previous process) to this replica, for the
        takeover to load (none: one process)."""
        return []


class PostgresLeases(SessionLeases):
    def __init__(self, engine: Any, replica_id: str, ttl_s: float, id_lock: IO[str] | None = None) -> None:
        super().__init__(replica_id)
        self._engine = engine
        self._id_lock = id_lock  # held while this process is that replica
        self.ttl_s = ttl_s
        # How long to wait for a write in flight on the lease row (a paused replica
        # mid-commit) before the session counts as held.
        self._lock_wait_s = min(2.0, ttl_s / 2)
        self._renew_engine = store_leases.renewal_engine(engine, ttl_s / 3)  # used on the lane only
        self._lane: store_leases.RenewalLane | None = None  # a thread's loop, once started
        self._valid_until: dict[str, float] = {}  # our own (monotonic) view of each lease's end
        self._task: asyncio.Task[None] | None = None
        self._deadlines: asyncio.Task[None] | None = None
        self._round_since: float | None = None  # loop time the renewal statement in flight began
        # The renewal statement's own bounds: the pool's wait and the command's timeout.
        self._round_limit = 2 * ttl_s / 3
        self._on_lost: LostLease | None = None
        self._releasing: set[asyncio.Task[None]] = set()  # the one sending `_to_release`
        self._to_release: dict[str, int] = {}  # sid → token released, not yet sent
        self.renewals = 0  # for tests and metrics
        self.renewal_failures = 0
        self.consecutive_failures = 0
        self.lost = 0
        self._last_ok: float | None = None  # time.monotonic() of the last round that succeeded
        self._last_round: float | None = None  # … that ended, either way (or the start)
        self._fenced_out: set[tuple[str, int]] = set()  # losses counted already (bounded by fences)
        self._holders: dict[str, tuple[str, float]] = {}  # sid → (other replica, until: loop time)
        # Our token-taking statements must not cross (issue 26: a recovery fenced out by our
        # own take-back): acquisitions in flight (sid → how many), the take-back in flight.
        self._acquiring: dict[str, int] = {}
        self._taking_back: asyncio.Future[None] | None = None

    async def orphaned(self, limit: int, *, queued: bool) -> list[str]:
        return await store_leases.orphaned(self._engine, limit, queued=queued)

    async def claim_orphans(
        self, limit: int, *, queued: bool, mine: bool = False, skip: Collection[str] = ()
    ) -> list[str]:
        """Never claims what is held or being acquired here (a claim bumps the token under
        its load's writes). `mine` takes this replica id's live leases: acquisitions wait
        for it (one statement), or one committed before it ran would be taken from its load."""
        loop = asyncio.get_running_loop()
        taking_back: asyncio.Future[None] | None = None
        if mine:
            while self._taking_back is not None:
                await asyncio.shield(self._taking_back)
            taking_back = self._taking_back = loop.create_future()
        try:
            started = loop.time()
            got = await claims.claim_orphans(
                self._engine,
                self.replica_id,
                limit,
                self.ttl_s,
                queued=queued,
                mine=mine,
                skip=[*self.fences, *self._acquiring, *skip],
            )
            for session_id, token in got.items():  # ours now: the load that follows finds it held
                self._hold(session_id, token, started)
        finally:
            if taking_back is not None:
                self._taking_back = None
                taking_back.set_result(None)
        return list(got)

    def _hold(self, session_id: str, token: int, started: float) -> None:
        """A token got here; a late answer with an older one (a claim committed before our
        acquisition bumped it again) never replaces the newer, which the database holds."""
        if token > self.fences.get(session_id, 0):
            self.fences[session_id] = token
            self._valid_until[session_id] = started + self.ttl_s

    async def acquire(self, session_id: str) -> None:
        while self._taking_back is not None:  # it may be taking this very session (see claim_orphans)
            await asyncio.shield(self._taking_back)
        started = asyncio.get_running_loop().time()
        if session_id in self.fences and self._valid_until.get(session_id, 0.0) > started:
            return  # claimed by the takeover (claim_orphans) for the load that asks now
        memo = self._holders.get(session_id)
        if memo is not None:
            if memo[1] > started:
                raise owned_elsewhere(session_id, memo[0], memo[1] - started)
            del self._holders[session_id]
        self._acquiring[session_id] = self._acquiring.get(session_id, 0) + 1
        loop, began = asyncio.get_running_loop(), [started]  # the lease starts once a connection
        try:  # is ours, not when we asked for one: a burst may keep it waiting for longer than a lease
            got = await store_leases.acquire(
                self._engine, session_id, self.replica_id, self.ttl_s, self._lock_wait_s,
                connected=lambda: began.append(loop.time()),
            )  # fmt: skip
        finally:
            if (left := self._acquiring.pop(session_id) - 1) > 0:
                self._acquiring[session_id] = left
        if isinstance(got, store_leases.Holder):
            if not any(c.isspace() for c in got.owner):  # a replica id (not "a replica with a write …")
                self._remember_holder(session_id, got.owner, started + min(got.expires_in_s, self.ttl_s))
            raise owned_elsewhere(session_id, got.owner, got.expires_in_s)
        if got is None:
            return  # no such session (the load that follows finds none either)
        self._hold(session_id, got, began[-1])

    def _remember_holder(self, session_id: str, owner: str, until: float) -> None:
        self._holders.pop(session_id, None)
        self._holders[session_id] = (owner, until)
        while len(self._holders) > MAX_HOLDER_MEMOS:  # the oldest goes: merely asked again
            self._holders.pop(next(iter(self._holders)))

    def forget_holder(self, session_id: str) -> None:
        self._holders.pop(session_id, None)

    def held_for(self, session_id: str) -> float | None:
        # Our own view of the lease's end, which the database's never precedes.
        left = self._valid_until.get(session_id, 0.0) - asyncio.get_running_loop().time()
        return left if left > 0 and session_id in self.fences else None

    def held_elsewhere(self, session_id: str, owner: str, until: float) -> None:
        if session_id not in self.fences and not any(c.isspace() for c in owner):
            self._remember_holder(session_id, owner, until)

    def release(self, session_id: str) -> None:
        """The session's actor has ended (its writes are stamped): nothing more is written
        under this lease, which another replica may take at once (in the background)."""
        token = self.fences.pop(session_id, None)
        self._valid_until.pop(session_id, None)
        if token is None:
            return
        self._fenced_out.discard((session_id, token))
        # Those released meanwhile go out together, in one statement: a thousand sessions
        # unloaded at once must not queue a thousand on the renewals' two connections.
        self._to_release[session_id] = token
        if not self._releasing:
            task = asyncio.get_running_loop().create_task(self._release())
            self._releasing.add(task)
            task.add_done_callback(self._releasing.discard)

    async def _release(self) -> None:
        while self._to_release:
            tokens, self._to_release = self._to_release, {}
            try:
                await self._on_lane(store_leases.release_many, self._renew_engine, self.replica_id, tokens)
            except Exception as exc:  # they run out by themselves
                log.warning(
                    "releasing %d session lease(s) failed (%s); they expire in %.0fs",
                    len(tokens),
                    exc,
                    self.ttl_s,
                )

    async def _on_lane(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        """The renewals' statements run on their own loop once started (RenewalLane)."""
        return await (self._lane.run(fn, *args) if self._lane is not None else fn(*args))

    def start(self, on_lost: LostLease) -> None:
        self._on_lost = on_lost
        self._lane = store_leases.RenewalLane()
        self._last_round = time.monotonic()
        self._task = asyncio.create_task(self._run(), name="lease-renewal")
        self._deadlines = asyncio.create_task(self._watch_deadlines(), name="lease-deadlines")

    async def _watch_deadlines(self) -> None:
        """Wakes at the earliest lease end (renewals only push ends later, a new lease's
        is a whole lease time away), so a lease that ran out unrenewed is dropped at once
        when the process was paused (SIGSTOP) or starved past it: the first thing it does
        when it runs again. A renewal round that started in time decides for itself (the
        database may have renewed the lease: nobody else held it meanwhile) — unless the
        round hangs past its own bound."""
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            wake = min(self._valid_until.values(), default=now - LATE_GRACE_S + self.ttl_s / 3) + LATE_GRACE_S
            if self._round_since is not None:
                wake = max(wake, self._round_since + self._round_limit)
            await asyncio.sleep(max(0.0, wake - now) + 0.001)
            if self._round_since is None or loop.time() - self._round_since >= self._round_limit:
                self.expire_overdue()

    def expire_overdue(self) -> list[str]:
        """Lose every lease whose end by this process's own clock has passed unrenewed:
        another replica may hold the session by now, so its clients must not wait on this
        actor (they resync, `lease_lost`); returns the sessions lost."""
        now = asyncio.get_running_loop().time() - LATE_GRACE_S
        overdue = [s for s, until in self._valid_until.items() if until <= now]
        for s in overdue:
            token = self.fences.pop(s, None)
            del self._valid_until[s]
            if token is not None and (s, token) in self._fenced_out:
                self._fenced_out.discard((s, token))  # counted when the write was refused
            else:
                self.lost += 1
            log.error(
                "session %s: its lease ran out unrenewed by this replica's clock; dropping its actor", s
            )
            if self._on_lost is not None:
                try:
                    self._on_lost(s)
                except Exception:  # the other sessions are still to be dropped
                    log.exception("session %s: dropping it after its lease ran out failed", s)
        return overdue

    def fenced_out(self, session_id: str) -> None:
        token = self.fences.get(session_id)
        if token is not None and (session_id, token) not in self._fenced_out:
            self._fenced_out.add((session_id, token))
            self.lost += 1

    def health(self) -> LeaseHealth:
        now = time.monotonic()
        age = None if self._last_ok is None else now - self._last_ok
        detail = ""
        if self.consecutive_failures >= UNHEALTHY_AFTER_FAILURES:
            detail = f"lease renewals failing: {self.consecutive_failures} in a row"
        elif self._last_round is not None and now - self._last_round > self.ttl_s:
            stuck = now - self._last_round
            detail = f"no lease renewal round ended for {stuck:.1f}s (lease time {self.ttl_s:g}s)"
        return LeaseHealth(
            self.replica_id,
            LeaseMode.POSTGRES,
            owned=len(self.fences),
            ttl_s=self.ttl_s,
            renewals=self.renewals,
            renewal_failures=self.renewal_failures,
            consecutive_failures=self.consecutive_failures,
            last_renewal_age_s=age,
            lost=self.lost,
            healthy=not detail,
            detail=detail,
        )

    async def stop(self) -> None:
        """After the actors have stopped: the releases go out, the renewal ends."""
        if self._releasing:
            await asyncio.wait(set(self._releasing), timeout=self.ttl_s)
        for task in (self._task, self._deadlines):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self._on_lane(self._renew_engine.dispose)
        if self._lane is not None:
            await self._lane.close()
        if self._id_lock is not None:
            self._id_lock.close()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.ttl_s / 3)
            await self.renew_round()

    async def renew_round(self) -> None:
        """One renewal round. A failed attempt (a connection reset, a failover) is retried
        at once on a fresh connection, backing off briefly, until it goes through or every
        lease has run out: a reset shorter than the lease costs no lease (issue 26). With
        no lease held, one attempt (it only tells the health)."""
        delay = RETRY_FIRST_S
        while True:
            try:
                await self.renew()
            except Exception:  # the renewal must go on for every other session
                log.exception("renewing session leases failed")
            if self.consecutive_failures == 0 or not self.fences:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.ttl_s / 12)

    async def renew(self) -> list[str]:
        """Renew every lease held (one statement); returns the sessions whose lease was lost.
        Holding none, the round still checks the renewals' connection (health)."""
        overdue = self.expire_overdue()  # ran out before this round: lost, whatever the database says
        tokens = dict(self.fences)
        loop = asyncio.get_running_loop()
        started, round_started = loop.time(), time.monotonic()
        self._round_since = started
        # An attempt (connecting included) may take until the soonest lease runs out, never
        # longer: past that, retrying is pointless (and a third of the lease at least).
        soonest = min((self._valid_until.get(s, started) for s in tokens), default=started + self.ttl_s)
        try:
            async with asyncio.timeout(max(self.ttl_s / 3, soonest - started)):
                if tokens:
                    renew = store_leases.renew
                    kept = await self._on_lane(renew, self._renew_engine, self.replica_id, tokens, self.ttl_s)
                else:
                    await self._on_lane(store_leases.ping, self._renew_engine)
                    kept = set()
        except Exception as exc:
            self._round_since = None
            # Unknown whether it reached the database: a lease is lost once it has run out
            # by our own clock (another replica may have taken it over since).
            log.warning("renewing %d session lease(s) failed: %r", len(tokens), exc)
            self.renewal_failures += 1
            self.consecutive_failures += 1
            self._last_round = time.monotonic()
            now = loop.time()
            lost = [s for s in tokens if self._valid_until.get(s, 0.0) <= now]
        else:
            self._round_since = None
            self._last_ok, self._last_round = round_started, time.monotonic()
            self.consecutive_failures = 0
            if not tokens:
                return overdue
            self.renewals += 1
            for s in kept:
                if self.fences.get(s) == tokens[s]:
                    self._valid_until[s] = started + self.ttl_s
            lost = [s for s in tokens if s not in kept]
        gone = [s for s in lost if self.fences.get(s) == tokens[s]]  # not re-acquired meanwhile
        for s in gone:
            del self.fences[s]
            self._valid_until.pop(s, None)
            if (s, tokens[s]) in self._fenced_out:
                self._fenced_out.discard((s, tokens[s]))  # counted when the write was refused
            else:
                self.lost += 1
            log.error(
                "session %s: its lease was lost (taken over, or not renewable in time); dropping its actor", s
            )
            if self._on_lost is not None:
                self._on_lost(s)
        return overdue + gone


def session_leases(
    engine: Any, *, postgres: bool, replica_id: str, ttl_s: float, home: Path
) -> SessionLeases:
    """`replica_id` empty: the one kept in `home` (see `home_replica_id`)."""
    if not postgres:
        return SessionLeases(replica_id)
    if replica_id:
        return PostgresLeases(engine, replica_id, ttl_s)
    kept, lock = home_replica_id(home)
    return PostgresLeases(engine, kept, ttl_s, lock)
