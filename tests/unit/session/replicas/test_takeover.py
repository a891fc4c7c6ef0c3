"""The takeover sweep's decisions (R-C1, R-E6): how often it runs, which sessions it loads,
and how a failing one waits longer each time — with a stand-in manager and finder (the
sweep against real replicas: tests/e2e/session/test_failover.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection
from typing import Any, cast

import pytest
from sqlalchemy import exc as sa_exc

from agentd.infra.config import Settings
from agentd.session.errors import SessionError, SessionErrorKind
from agentd.session.manager import SessionManager
from agentd.session.replicas.leases import owned_elsewhere
from agentd.session.replicas.takeover import RETRY_FIRST_S, Backoff, Takeover, sweep_interval
from tests.support.polling import until


class FakeLeases:
    def __init__(self) -> None:
        self.released: list[str] = []

    def release(self, session_id: str) -> None:
        self.released.append(session_id)


class FakeManager:
    def __init__(self, outcomes: dict[str, Any], *, gate: asyncio.Event | None = None) -> None:
        self.outcomes = outcomes  # sid → an actor stand-in, None (gone) or an exception
        self.loaded: list[str] = []
        self.closing = False
        self.leases = FakeLeases()
        self.gate = gate  # loads wait for it (to see them run side by side)
        self.loading = 0
        self.most_at_once = 0

    async def get(self, session_id: str) -> object | None:
        self.loaded.append(session_id)
        self.loading += 1
        self.most_at_once = max(self.most_at_once, self.loading)
        try:
            if self.gate is not None:
                await self.gate.wait()
            outcome = self.outcomes[session_id]
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome
        finally:
            self.loading -= 1


class FakeClaims:
    """The database's side: each orphan is handed out once (as SKIP LOCKED does)."""

    def __init__(self, orphans: list[str]) -> None:
        self.orphans = list(orphans)
        self.asked: list[tuple[int, frozenset[str]]] = []

    async def __call__(self, limit: int, skip: Collection[str]) -> list[str]:
        self.asked.append((limit, frozenset(skip)))
        got = [s for s in self.orphans if s not in skip][:limit]
        for s in got:
            self.orphans.remove(s)
        return got


def _sweeper(
    manager: FakeManager, claims: FakeClaims, parallel: int = 8, announce: Announcements | None = None
) -> Takeover:
    manager_ = cast(SessionManager, manager)
    return Takeover(manager_, claims, interval_s=1.0, parallel=parallel, announce=announce)


def test_the_sweep_runs_a_quarter_of_a_lease_so_the_default_takeover_is_within_15_s() -> None:
    ttl = Settings.model_fields["lease_ttl_s"].default
    # A dead owner's lease runs out at most `ttl` after its death (renewed every third of
    # it), and the next sweep comes at most an interval later.
    assert ttl + sweep_interval(ttl) <= 15.0
    assert sweep_interval(0.01) > 0  # never a busy loop


async def test_a_sweep_claims_as_many_as_it_has_free_slots_and_claims_again_as_they_free() -> None:
    sids = [f"s{i}" for i in range(10)]
    manager = FakeManager(dict.fromkeys(sids, object()))
    claims = FakeClaims(sids)
    sweeper = _sweeper(manager, claims, parallel=4)
    assert sorted(await sweeper.sweep()) == sorted(sids)
    assert sorted(manager.loaded) == sorted(sids)  # each loaded once
    assert claims.asked[0][0] == 4  # the first claim fills the slots
    assert all(limit <= 4 for limit, _ in claims.asked)
    assert claims.orphans == [] and sweeper.taken == 10


async def test_the_claimed_sessions_load_side_by_side_up_to_the_bound() -> None:
    sids = [f"s{i}" for i in range(6)]
    gate = asyncio.Event()
    manager = FakeManager(dict.fromkeys(sids, object()), gate=gate)
    sweeper = _sweeper(manager, FakeClaims(sids), parallel=4)
    sweep = asyncio.create_task(sweeper.sweep())
    await until(lambda: manager.loading == 4, 5)
    gate.set()
    assert len(await sweep) == 6
    assert manager.most_at_once == 4  # concurrent, and bounded


async def test_a_session_another_replica_won_or_that_is_gone_is_not_counted() -> None:
    manager = FakeManager({"won": object(), "lost": owned_elsewhere("lost", "replica-c", 3.0), "gone": None})
    sweeper = _sweeper(manager, FakeClaims(["won", "lost", "gone"]))
    assert await sweeper.sweep() == ["won"]
    assert sweeper.taken == 1


async def test_a_failing_session_waits_longer_each_time_and_others_go_on() -> None:
    broken = SessionError(SessionErrorKind.INTERNAL, "the database refused its recovery writes")
    manager = FakeManager({"broken": broken, "fine": object()})
    claims = FakeClaims(["broken", "fine"])
    sweeper = _sweeper(manager, claims)
    assert await sweeper.sweep() == ["fine"]
    claims.orphans.append("broken")  # released by the failed load: orphaned again
    assert await sweeper.sweep() == []
    assert "broken" in claims.asked[-1][1]  # within its wait: not claimed again
    assert manager.loaded == ["broken", "fine"]


async def test_a_failing_claim_lets_the_loads_under_way_finish() -> None:
    manager = FakeManager({"a": object()})
    calls = 0

    async def claim(limit: int, skip: Collection[str]) -> list[str]:
        nonlocal calls
        calls += 1
        if calls == 1:
            return ["a"]
        raise OSError("connection lost")

    sweeper = Takeover(cast(SessionManager, manager), claim, interval_s=1.0, parallel=1)
    assert await sweeper.sweep() == ["a"]


async def test_a_closing_manager_claims_nothing_and_releases_what_it_had_claimed() -> None:
    manager = FakeManager({"a": object()})
    manager.closing = True
    claims = FakeClaims(["a"])
    assert await _sweeper(manager, claims).sweep() == []
    assert claims.asked == [] and manager.loaded == []


async def test_a_claimed_session_the_closing_manager_will_not_load_is_released() -> None:
    manager = FakeManager({"a": object()})

    async def claim(limit: int, skip: Collection[str]) -> list[str]:
        manager.closing = True  # the server began stopping while the claim ran
        return ["a"]

    sweeper = Takeover(cast(SessionManager, manager), claim, interval_s=1.0)
    assert await sweeper.sweep() == []
    assert manager.leases.released == ["a"] and manager.loaded == []


def test_backoff_doubles_up_to_its_cap_and_forgets_on_success() -> None:
    backoff = Backoff(first_s=1.0, max_s=4.0, limit=2)
    assert backoff.ready("s", 0.0)
    assert backoff.failed("s", 0.0) == 1.0
    assert not backoff.ready("s", 0.5) and backoff.ready("s", 1.0)
    assert [backoff.failed("s", 1.0), backoff.failed("s", 3.0), backoff.failed("s", 7.0)] == [2.0, 4.0, 4.0]
    backoff.succeeded("s")
    assert backoff.ready("s", 7.0)
    for sid in ("a", "b", "c"):  # bounded: the oldest failure is forgotten (tried sooner)
        backoff.failed(sid, 0.0)
    assert backoff.ready("a", 0.0) and not backoff.ready("c", 0.0)
    assert RETRY_FIRST_S > 0


@pytest.mark.parametrize("ttl", [1.0, 2.0, 10.0])
def test_the_interval_follows_the_lease(ttl: float) -> None:
    assert sweep_interval(ttl) == ttl / 4


@pytest.mark.parametrize(
    ("error", "level", "traceback"),
    [
        (sa_exc.TimeoutError("QueuePool limit of size 5 overflow 10 reached"), logging.WARNING, False),
        (OSError("connection lost"), logging.ERROR, True),
    ],
)
async def test_a_busy_pool_is_one_warning_line_and_other_failures_keep_their_traceback(
    caplog: pytest.LogCaptureFixture, error: Exception, level: int, traceback: bool
) -> None:
    async def claim(limit: int, skip: Collection[str]) -> list[str]:
        raise error

    sweeper = Takeover(cast(SessionManager, FakeManager({})), claim, interval_s=1.0, parallel=1)
    with caplog.at_level(logging.WARNING, logger="agentd.session.replicas.takeover"):
        assert await sweeper.sweep() == []
    [record] = [r for r in caplog.records if "claiming orphaned sessions failed" in r.getMessage()]
    assert record.levelno == level
    assert (record.exc_info is not None) is traceback


class Announcements:
    """The NOTIFY telling the other replicas' sweeps to claim now (counted)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.sent = 0
        self.error = error
        self.done = asyncio.Event()

    async def __call__(self) -> None:
        self.sent += 1
        self.done.set()
        if self.error is not None:
            raise self.error


async def test_a_full_claim_wakes_the_other_replicas_once_per_sweep_and_a_partial_one_does_not() -> None:
    sids = [f"s{i}" for i in range(10)]
    announce = Announcements()
    sweeper = _sweeper(FakeManager(dict.fromkeys(sids, object())), FakeClaims(sids), 4, announce)
    assert len(await sweeper.sweep()) == 10  # claims of 4, 4 (full: more to share), then 2
    await announce.done.wait()
    assert announce.sent == 1

    few = ["t0", "t1"]
    quiet = Announcements()
    sweeper = _sweeper(FakeManager(dict.fromkeys(few, object())), FakeClaims(few), 4, quiet)
    assert sorted(await sweeper.sweep()) == few
    await asyncio.sleep(0)  # (an announcement would have been started by now)
    assert quiet.sent == 0  # all there was fitted one claim: nothing left to share


async def test_a_failed_announcement_does_not_stop_the_sweep(caplog: pytest.LogCaptureFixture) -> None:
    sids = [f"s{i}" for i in range(6)]
    announce = Announcements(OSError("connection lost"))
    sweeper = _sweeper(FakeManager(dict.fromkeys(sids, object())), FakeClaims(sids), 2, announce)
    with caplog.at_level(logging.WARNING, logger="agentd.session.replicas.takeover"):
        assert len(await sweeper.sweep()) == 6
        await until(lambda: any("announcing a takeover" in r.getMessage() for r in caplog.records), 5)
    assert announce.sent == 1


async def test_another_replicas_announcement_makes_the_sweep_run_at_once() -> None:
    class Warm(FakeManager):
        async def warm_up(self) -> None:
            return None

    swept = asyncio.Event()

    async def claim(limit: int, skip: Collection[str]) -> list[str]:
        swept.set()
        return []

    manager = Warm({})
    # An hour between sweeps: only a wake-up can make one happen within the test.
    sweeper = Takeover(cast(SessionManager, manager), claim, interval_s=3600.0)
    running = asyncio.create_task(sweeper.run())
    try:
        await asyncio.sleep(0)
        assert not swept.is_set()
        sweeper.wake()
        await asyncio.wait_for(swept.wait(), 30)  # a deadline against a hang, not a timing
    finally:
        manager.closing = True
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
