"""The takeover sweep's decisions (R-C1, R-E6): how often it runs, which sessions it loads,
and how a failing one waits longer each time — with a stand-in manager and finder (the
sweep against real replicas: tests/e2e/session/test_failover.py)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from agentd.infra.config import Settings
from agentd.session.errors import SessionError, SessionErrorKind
from agentd.session.leases import owned_elsewhere
from agentd.session.manager import SessionManager
from agentd.session.takeover import RETRY_FIRST_S, Backoff, Takeover, sweep_interval


class FakeManager:
    def __init__(self, outcomes: dict[str, Any]) -> None:
        self.outcomes = outcomes  # sid → an actor stand-in, None (gone) or an exception
        self.loaded: list[str] = []
        self.live: set[str] = set()
        self.closing = False

    def live_actor(self, session_id: str) -> object | None:
        return object() if session_id in self.live else None

    async def get(self, session_id: str) -> object | None:
        self.loaded.append(session_id)
        outcome = self.outcomes[session_id]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def _sweeper(manager: FakeManager, found: list[str], batch: int = 8) -> tuple[Takeover, list[int]]:
    asked: list[int] = []

    async def find(limit: int) -> list[str]:
        asked.append(limit)
        return found[:limit]

    return Takeover(cast(SessionManager, manager), find, interval_s=1.0, batch=batch), asked


def test_the_sweep_runs_a_quarter_of_a_lease_so_the_default_takeover_is_within_15_s() -> None:
    ttl = Settings.model_fields["lease_ttl_s"].default
    # A dead owner's lease runs out at most `ttl` after its death (renewed every third of
    # it), and the next sweep comes at most an interval later.
    assert ttl + sweep_interval(ttl) <= 15.0
    assert sweep_interval(0.01) > 0  # never a busy loop


async def test_a_sweep_takes_what_it_wins_and_skips_what_another_replica_won() -> None:
    manager = FakeManager(
        {"won": object(), "lost": owned_elsewhere("lost", "replica-c", 3.0), "gone": None, "mine": object()}
    )
    manager.live.add("mine")
    sweeper, asked = _sweeper(manager, ["won", "lost", "gone", "mine"], batch=8)
    assert await sweeper.sweep() == ["won"]
    assert asked == [8]  # bounded by the batch
    assert manager.loaded == ["won", "lost", "gone"]  # its own live actor is not loaded again
    assert sweeper.taken == 1


async def test_a_failing_session_waits_longer_each_time_and_others_go_on() -> None:
    broken = SessionError(SessionErrorKind.INTERNAL, "the database refused its recovery writes")
    manager = FakeManager({"broken": broken, "fine": object()})
    sweeper, _ = _sweeper(manager, ["broken", "fine"])
    assert await sweeper.sweep() == ["fine"]
    manager.live.add("fine")
    assert await sweeper.sweep() == []  # within its wait: not tried again
    assert manager.loaded == ["broken", "fine"]


async def test_a_closing_manager_stops_the_sweep() -> None:
    manager = FakeManager({"a": object()})
    manager.closing = True
    sweeper, _ = _sweeper(manager, ["a"])
    assert await sweeper.sweep() == []
    assert manager.loaded == []


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
