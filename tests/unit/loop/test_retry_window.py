"""Retry buckets outlive success, turns and restarts, within a sliding window (issue 16 item 10).

Seed 003: "PersistentRetryStateGuard…在构造时加载、drop 时写回，让桶计数跨 turn 存活，同一
session 里昨天烧掉的三次 network 重试今天仍然计入桶". The decay rule (ours): a failure counts
for `window_s` (48 h): yesterday's still count today, last week's no longer do.
"""

from __future__ import annotations

import pytest

from agentd.core.errors import ErrorKind, HarnessError
from agentd.loop.retry import Bucket, Decision, RetryLimits, RetryState
from tests.support.clock import DAY, FakeClock


def network(state: RetryState) -> Decision:
    return state.observe(HarnessError(ErrorKind.NETWORK, "reset"), has_fallback=False).decision


def test_yesterdays_three_network_retries_still_count_today() -> None:
    clock = FakeClock()
    state = RetryState(clock=clock)
    for _ in range(3):
        assert network(state) is Decision.CONTINUE
    clock.advance(DAY)  # a day later, after a restart
    today = RetryState.from_dict(state.to_dict(), clock=clock)
    assert today.count(Bucket.NETWORK) == 3
    assert network(today) is Decision.CONTINUE  # the 4th of 4
    fifth = today.observe(HarnessError(ErrorKind.NETWORK, "reset"), has_fallback=False)
    assert fifth.decision is Decision.EXHAUSTED  # the 5th in two days
    assert fifth.reason == "network: 5 failures exceed the limit of 4 in 48 h"


def test_a_burst_spread_over_turns_exhausts_its_bucket() -> None:
    """Between the failures the calls succeed (nothing resets provider buckets any more)."""
    clock = FakeClock()
    state = RetryState(clock=clock)
    decisions = []
    for _turn in range(5):
        decisions.append(network(state))
        clock.advance(600)  # a successful turn every ten minutes
    assert decisions == [Decision.CONTINUE] * 4 + [Decision.EXHAUSTED]


def test_a_session_that_hit_its_limits_last_week_works_today() -> None:
    clock = FakeClock()
    state = RetryState(clock=clock)
    while network(state) is not Decision.EXHAUSTED:
        pass
    clock.advance(7 * DAY)
    restored = RetryState.from_dict(state.to_dict(), clock=clock)
    assert restored.count(Bucket.NETWORK) == 0
    assert restored.to_dict() == {"version": 2, "failures": {}}
    assert network(restored) is Decision.CONTINUE


def test_the_window_slides_one_failure_at_a_time() -> None:
    clock = FakeClock()
    limits = RetryLimits(window_s=10 * 3600)
    state = RetryState(limits, clock=clock)
    for _ in range(4):
        network(state)
        clock.advance(3600)
    assert state.count(Bucket.NETWORK) == 4  # at START + 4 h
    clock.advance(6 * 3600 + 1)  # the first failure (at START) has left the window
    assert state.count(Bucket.NETWORK) == 3
    assert network(state) is Decision.CONTINUE


def test_only_the_newest_limit_plus_one_failures_are_kept() -> None:
    state = RetryState(clock=FakeClock())
    for _ in range(20):
        network(state)
    assert len(state.to_dict()["failures"]["network"]) == RetryLimits().limit(Bucket.NETWORK) + 1


def test_snapshot_shows_counts_limits_and_when_they_free_up() -> None:
    clock = FakeClock()
    state = RetryState(clock=clock)
    network(state)
    clock.advance(60)
    network(state)
    snap = state.snapshot()
    assert snap["windowSeconds"] == 48 * 3600
    assert snap["buckets"] == {
        "network": {
            "count": 2,
            "limit": 4,
            "exhausted": False,
            "lastFailureAt": "2027-01-15T08:01:00+00:00",
            "oldestExpiresAt": "2027-01-17T08:00:00+00:00",
        }
    }


def test_version_1_counts_are_failures_of_load_time() -> None:
    clock = FakeClock()
    old = RetryState.from_dict({"version": 1, "counts": {"network": 5}}, clock=clock)
    assert network(old) is Decision.EXHAUSTED  # no fresh allowance from an upgrade...
    clock.advance(3 * DAY)
    assert network(old) is Decision.CONTINUE  # ...but it ages out like any other


@pytest.mark.parametrize(
    "bad",
    [{"failures": {"network": [-1]}}, {"failures": {"network": "x"}}, {"failures": []}, {"counts": []}],
)
def test_garbage_is_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        RetryState.from_dict(bad)


def test_window_must_be_positive() -> None:
    with pytest.raises(ValueError):
        RetryLimits(window_s=0)


def test_failing_names_the_buckets_with_failures_in_the_window() -> None:
    """`failing` is `count` of each bucket in one call: empty buckets and failures past the
    window count for nothing."""
    clock = FakeClock()
    state = RetryState(clock=clock)
    both = (Bucket.NETWORK, Bucket.DEGENERATE_OUTPUT)
    assert state.failing(both) == []
    network(state)
    assert state.failing(both) == [Bucket.NETWORK]
    clock.advance(3 * DAY)  # past the 48 h window: forgotten, though still on the list
    assert state.failing(both) == []
    assert state.count(Bucket.NETWORK) == 0
