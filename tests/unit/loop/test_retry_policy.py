"""Recovery hints (R-R1) and typed retry buckets (R-R2)."""

from __future__ import annotations

import json
import random

import pytest

from agentd.core.errors import ErrorKind, HarnessError, RecoveryHint, hint
from agentd.loop.retry import Bucket, Decision, LoopDecision, RetryLimits, RetryState
from tests.support.clock import START, FakeClock

LIMITS = {
    "rate_limited": 5,
    "context_overflow": 2,
    "authentication": 1,
    "quota": 1,
    "invalid_request": 2,
    "content_filtered": 1,
    "provider_unavailable": 4,
    "network": 4,
    "timeout": 3,
    "tool_execution": 5,
    "mcp_spawn": 2,
    "mcp_timeout": 3,
    "mcp_protocol": 2,
    "delegate_depth_exceeded": 1,
    "internal": 1,
    "shell_spiral": 1,
    "degenerate_output": 3,
}


def err(kind: ErrorKind, retry_after: float | None = None) -> HarnessError:
    return HarnessError(kind, f"{kind.value} happened", retry_after=retry_after)


def rng() -> random.Random:
    return random.Random(1234)


# --- hints ------------------------------------------------------------------------------------


HINTS = {
    RecoveryHint.BACKOFF_RETRY: {"rate_limited", "network", "timeout", "mcp_timeout"},
    RecoveryHint.SWITCH_PROVIDER: {"provider_unavailable", "quota"},
    RecoveryHint.COMPACT_CONTEXT: {"context_overflow"},
    # 000 "认证重试有独立 schedule" wins over the spec's fail_fast for authentication (issue 30).
    RecoveryHint.AUTH_SCHEDULE: {"authentication"},
    RecoveryHint.FAIL_FAST: {
        "invalid_request",
        "content_filtered",
        "delegate_depth_exceeded",
        "tool_execution",
        "mcp_spawn",
        "mcp_protocol",
    },
    RecoveryHint.BUG: {"internal"},
}


def test_every_error_kind_has_exactly_the_spec_hint() -> None:
    assert sorted(k for kinds in HINTS.values() for k in kinds) == sorted(k.value for k in ErrorKind)
    for expected, kinds in HINTS.items():
        for kind in kinds:
            assert hint(ErrorKind(kind)) is expected
            assert hint(err(ErrorKind(kind))) is expected  # the error itself works too


@pytest.mark.parametrize("has_fallback", [True, False])
def test_authentication_retries_the_same_lane_on_its_own_schedule(has_fallback: bool) -> None:
    """000: "认证重试有独立 schedule" — a 401/403 waits the schedule's fixed delay (no jitter,
    no Retry-After, not the shared backoff) and retries the same lane, even with a fallback
    (003: a bad key fails on every lane); the bucket's limit (003: authentication 1) says how
    many times, then the turn ends (000: "不可恢复错误（如认证重试耗尽）")."""
    state = RetryState()
    d = state.observe(err(ErrorKind.AUTHENTICATION, retry_after=99), has_fallback=has_fallback, rng=rng())
    assert (d.decision, d.attempt, d.limit, d.delay_s) == (Decision.CONTINUE, 1, 1, 2.0)
    assert "auth schedule's 2s" in d.reason
    d = state.observe(err(ErrorKind.AUTHENTICATION), has_fallback=has_fallback, rng=rng())
    assert (d.decision, d.attempt) == (Decision.EXHAUSTED, 2)


def test_the_authentication_schedule_is_its_own_and_its_last_wait_repeats() -> None:
    limits = RetryLimits(auth_schedule_s=(0.5, 3.0), bucket_limits={Bucket.AUTHENTICATION: 3})
    state = RetryState(limits)
    # Other buckets' failures take nothing from it, and its waits are not the backoff's.
    for _ in range(5):
        state.observe(err(ErrorKind.RATE_LIMITED), has_fallback=False, rng=rng())
    waits = [state.observe(err(ErrorKind.AUTHENTICATION), has_fallback=False).delay_s for _ in range(3)]
    assert waits == [0.5, 3.0, 3.0]
    assert state.observe(err(ErrorKind.AUTHENTICATION), has_fallback=False).decision is Decision.EXHAUSTED
    assert state.count(Bucket.RATE_LIMITED) == 5  # and it took nothing from the others
    # An authenticated call ends the episode: the next rejection gets the schedule again.
    state.record_success(Bucket.AUTHENTICATION)
    assert state.observe(err(ErrorKind.AUTHENTICATION), has_fallback=False).delay_s == 0.5


@pytest.mark.parametrize("schedule", [(), (-1.0,), (1.0, -0.1)])
def test_a_bad_authentication_schedule_is_refused(schedule: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="auth_schedule_s"):
        RetryLimits(auth_schedule_s=schedule)


# --- buckets and limits -----------------------------------------------------------------------


def test_seventeen_buckets_with_spec_defaults() -> None:
    assert {b.value for b in Bucket} == set(LIMITS)
    assert len(Bucket) == 17
    assert {b.value for b in Bucket} - {k.value for k in ErrorKind} == {"shell_spiral", "degenerate_output"}
    limits = RetryLimits()
    assert {b.value: limits.limit(b) for b in Bucket} == LIMITS
    assert (limits.backoff_base_s, limits.backoff_max_s, limits.retry_after_cap_s) == (1.0, 60.0, 120.0)
    assert 0 < limits.jitter < 1


@pytest.mark.parametrize("kind", list(ErrorKind))
def test_each_error_bucket_exhausts_exactly_after_its_limit(kind: ErrorKind) -> None:
    state = RetryState()
    limit = LIMITS[kind.value]
    for n in range(1, limit + 1):
        d = state.observe(err(kind), has_fallback=True, rng=rng())
        assert d.decision is not Decision.EXHAUSTED, (kind, n)
        assert (d.bucket, d.attempt, d.limit) == (Bucket(kind.value), n, limit)
    d = state.observe(err(kind), has_fallback=True, rng=rng())
    assert d.decision is Decision.EXHAUSTED
    assert (d.attempt, d.limit, d.delay_s) == (limit + 1, limit, 0.0)
    assert not d.retries
    # Only its own bucket moved.
    assert {b for b, n in state.counts.items() if n} == {Bucket(kind.value)}


def test_degenerate_output_goes_back_to_the_retry_ladder_bounded_by_its_bucket() -> None:
    """003: "检测命中后的动作都已类型化：响应层回到调用重试梯" — a repetitive response is
    retried like a retriable one (after a backoff), three times, then the bucket is exhausted."""
    state = RetryState(RetryLimits(jitter=0.0))
    decisions = [state.observe_degenerate_output(rng()) for _ in range(4)]
    assert [(d.decision, d.bucket, d.attempt, d.limit) for d in decisions] == [
        (Decision.CONTINUE, Bucket.DEGENERATE_OUTPUT, 1, 3),
        (Decision.CONTINUE, Bucket.DEGENERATE_OUTPUT, 2, 3),
        (Decision.CONTINUE, Bucket.DEGENERATE_OUTPUT, 3, 3),
        (Decision.EXHAUSTED, Bucket.DEGENERATE_OUTPUT, 4, 3),
    ]
    assert [d.delay_s for d in decisions] == [1.0, 2.0, 4.0, 0.0]
    assert [d.retries for d in decisions] == [True, True, True, False]
    assert {b for b, n in state.counts.items() if n} == {Bucket.DEGENERATE_OUTPUT}
    # A clean response resets the streak (react calls record_success for this bucket only).
    state.record_success(Bucket.DEGENERATE_OUTPUT)
    assert state.observe_degenerate_output(rng()).attempt == 1


def test_degenerate_output_backoff_is_jittered_within_bounds() -> None:
    limits = RetryLimits(backoff_base_s=2.0, jitter=0.25)
    delay = RetryState(limits).observe_degenerate_output(rng()).delay_s
    assert 1.5 <= delay <= 2.5


def test_shell_spiral_bucket() -> None:
    state = RetryState()
    first = state.observe_shell_spiral()
    assert (first.decision, first.bucket, first.attempt, first.limit) == (
        Decision.ESCALATE,
        Bucket.SHELL_SPIRAL,
        1,
        1,
    )
    assert state.observe_shell_spiral().decision is Decision.EXHAUSTED


def test_fifth_rate_limit_continues_sixth_is_exhausted() -> None:
    state = RetryState()
    decisions = [state.observe(err(ErrorKind.RATE_LIMITED), has_fallback=False, rng=rng()) for _ in range(6)]
    assert [d.decision for d in decisions[:5]] == [Decision.CONTINUE] * 5
    assert decisions[4].attempt == 5
    assert decisions[5].decision is Decision.EXHAUSTED
    assert decisions[5].attempt == 6


def test_partial_limit_override_keeps_other_defaults() -> None:
    limits = RetryLimits(bucket_limits={Bucket.NETWORK: 1})
    assert limits.limit(Bucket.NETWORK) == 1
    assert limits.limit(Bucket.RATE_LIMITED) == 5
    state = RetryState(limits)
    state.observe(err(ErrorKind.NETWORK), has_fallback=False, rng=rng())
    assert state.observe(err(ErrorKind.NETWORK), has_fallback=False).decision is Decision.EXHAUSTED
    with pytest.raises(ValueError):
        RetryLimits(bucket_limits={Bucket.NETWORK: -1})


# --- decisions per hint -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind", [ErrorKind.RATE_LIMITED, ErrorKind.NETWORK, ErrorKind.TIMEOUT, ErrorKind.MCP_TIMEOUT]
)
def test_backoff_kinds_continue_with_a_delay(kind: ErrorKind) -> None:
    d = RetryState().observe(err(kind), has_fallback=True, rng=rng())
    assert d.decision is Decision.CONTINUE and d.retries
    assert d.delay_s > 0


def test_provider_unavailable_rotates_with_fallback_else_backs_off() -> None:
    rotated = RetryState().observe(err(ErrorKind.PROVIDER_UNAVAILABLE), has_fallback=True, rng=rng())
    assert rotated.decision is Decision.ROTATE_AND_RETRY
    assert rotated.delay_s == 0  # another lane need not wait
    waited = RetryState().observe(err(ErrorKind.PROVIDER_UNAVAILABLE), has_fallback=False, rng=rng())
    assert waited.decision is Decision.CONTINUE
    assert waited.delay_s > 0
    honoured = RetryState().observe(err(ErrorKind.PROVIDER_UNAVAILABLE, retry_after=7), has_fallback=False)
    assert honoured.delay_s == 7


def test_quota_rotates_with_fallback_else_escalates() -> None:
    assert RetryState().observe(err(ErrorKind.QUOTA), has_fallback=True).decision is Decision.ROTATE_AND_RETRY
    assert RetryState().observe(err(ErrorKind.QUOTA), has_fallback=False).decision is Decision.ESCALATE


def test_context_overflow_compacts() -> None:
    state = RetryState()
    for _ in range(2):
        d = state.observe(err(ErrorKind.CONTEXT_OVERFLOW), has_fallback=True)
        assert d.decision is Decision.COMPACT_AND_RETRY and d.delay_s == 0
    assert state.observe(err(ErrorKind.CONTEXT_OVERFLOW), has_fallback=True).decision is Decision.EXHAUSTED


@pytest.mark.parametrize(
    "kind",
    [
        ErrorKind.INVALID_REQUEST,
        ErrorKind.CONTENT_FILTERED,
        ErrorKind.DELEGATE_DEPTH_EXCEEDED,
        ErrorKind.INTERNAL,
    ],
)
@pytest.mark.parametrize("has_fallback", [True, False])
def test_fail_fast_and_bug_escalate_on_first_sight(kind: ErrorKind, has_fallback: bool) -> None:
    d = RetryState().observe(err(kind), has_fallback=has_fallback)
    assert d.decision is Decision.ESCALATE
    assert d.attempt == 1 and not d.retries and d.delay_s == 0


@pytest.mark.parametrize("kind", [ErrorKind.TOOL_EXECUTION, ErrorKind.MCP_SPAWN, ErrorKind.MCP_PROTOCOL])
def test_tool_scoped_errors_continue_without_retrying_the_call(kind: ErrorKind) -> None:
    d = RetryState().observe(err(kind), has_fallback=False)
    assert d.decision is Decision.CONTINUE
    assert d.delay_s == 0
    assert "not retried" in d.reason


# --- delays -----------------------------------------------------------------------------------


def test_exponential_backoff_values_without_jitter() -> None:
    state = RetryState(RetryLimits(jitter=0.0, bucket_limits={Bucket.RATE_LIMITED: 10}))
    delays = [state.observe(err(ErrorKind.RATE_LIMITED), has_fallback=False).delay_s for _ in range(8)]
    assert delays == [1, 2, 4, 8, 16, 32, 60, 60]
    assert [RetryLimits().backoff_s(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]


def test_jitter_is_bounded_and_seeded() -> None:
    limits = RetryLimits(bucket_limits={Bucket.NETWORK: 1000})
    seen: set[float] = set()
    for seed in range(200):
        state = RetryState(limits)
        for n in range(1, 9):
            d = state.observe(err(ErrorKind.NETWORK), has_fallback=False, rng=random.Random(seed * 100 + n))
            base = limits.backoff_s(n)
            assert base * (1 - limits.jitter) <= d.delay_s <= base * (1 + limits.jitter)
            seen.add(round(d.delay_s / base, 6))
    assert len(seen) > 100  # it really jitters
    # Same seed, same delay.
    a = RetryState().observe(err(ErrorKind.NETWORK), has_fallback=False, rng=random.Random(7))
    b = RetryState().observe(err(ErrorKind.NETWORK), has_fallback=False, rng=random.Random(7))
    assert a.delay_s == b.delay_s


def test_retry_after_is_honoured_and_capped() -> None:
    state = RetryState()
    d = state.observe(err(ErrorKind.RATE_LIMITED, retry_after=12.5), has_fallback=False, rng=rng())
    assert d.decision is Decision.CONTINUE
    assert d.delay_s == 12.5  # exact: no jitter, never early
    assert "retry-after" in d.reason
    # Honoured even when it is shorter than our own backoff would be.
    for _ in range(3):
        state.observe(err(ErrorKind.RATE_LIMITED), has_fallback=False, rng=rng())
    assert state.observe(err(ErrorKind.RATE_LIMITED, retry_after=0.5), has_fallback=False).delay_s == 0.5
    capped = RetryState().observe(err(ErrorKind.RATE_LIMITED, retry_after=3600), has_fallback=False)
    assert capped.delay_s == 120 and "capped" in capped.reason
    custom = RetryState(RetryLimits(retry_after_cap_s=30)).observe(
        err(ErrorKind.TIMEOUT, retry_after=45), has_fallback=False
    )
    assert custom.delay_s == 30


# --- success and persistence ------------------------------------------------------------------


def test_success_resets_only_that_bucket() -> None:
    state = RetryState()
    for _ in range(3):
        state.observe(err(ErrorKind.RATE_LIMITED), has_fallback=False, rng=rng())
    for _ in range(2):
        state.observe(err(ErrorKind.NETWORK), has_fallback=False, rng=rng())
    state.record_success(Bucket.RATE_LIMITED)
    assert state.count(Bucket.RATE_LIMITED) == 0
    assert state.count(Bucket.NETWORK) == 2
    state.record_success(ErrorKind.NETWORK)  # an ErrorKind names its bucket too
    assert state.count(Bucket.NETWORK) == 0
    # After a reset the bucket has its full allowance again.
    for _ in range(5):
        assert state.observe(err(ErrorKind.RATE_LIMITED), has_fallback=False, rng=rng()).retries


def test_json_round_trip_preserves_counters_and_keeps_counting() -> None:
    clock = FakeClock()
    state = RetryState(clock=clock)
    for _ in range(4):
        state.observe(err(ErrorKind.RATE_LIMITED), has_fallback=False, rng=rng())
        clock.advance(1)
    state.observe(err(ErrorKind.TIMEOUT), has_fallback=False, rng=rng())
    state.observe_shell_spiral()

    text = state.to_json()
    data = json.loads(text)
    t0 = START
    assert data == {
        "version": 2,
        "failures": {
            "rate_limited": [t0, t0 + 1, t0 + 2, t0 + 3],
            "timeout": [t0 + 4],
            "shell_spiral": [t0 + 4],
        },
    }

    restored = RetryState.from_json(text, clock=clock)
    assert dict(restored.counts) == dict(state.counts)
    # A restart does not buy a fresh allowance: the 5th continues, the 6th is exhausted.
    fifth = restored.observe(err(ErrorKind.RATE_LIMITED), has_fallback=False, rng=rng())
    assert (fifth.decision, fifth.attempt) == (Decision.CONTINUE, 5)
    sixth = restored.observe(err(ErrorKind.RATE_LIMITED), has_fallback=False, rng=rng())
    assert (sixth.decision, sixth.attempt) == (Decision.EXHAUSTED, 6)
    assert RetryState.from_json(restored.to_json(), clock=clock).count(Bucket.RATE_LIMITED) == 6


def test_from_json_tolerates_unknown_and_missing_buckets_rejects_garbage() -> None:
    restored = RetryState.from_json('{"version": 1, "counts": {"network": 2, "from_the_future": 9}}')
    assert restored.count(Bucket.NETWORK) == 2
    assert sum(restored.counts.values()) == 2
    assert sum(RetryState.from_json("{}").counts.values()) == 0
    for bad in ('{"counts": {"network": -1}}', '{"counts": {"network": "2"}}', '{"counts": []}'):
        with pytest.raises(ValueError):
            RetryState.from_json(bad)


def test_decision_to_event_is_camel_case() -> None:
    d = RetryState().observe(err(ErrorKind.RATE_LIMITED, retry_after=3), has_fallback=False)
    event = d.to_event()
    assert event == {
        "decision": "continue",
        "bucket": "rate_limited",
        "attempt": 1,
        "limit": 5,
        "delaySeconds": 3,
        "reason": d.reason,
    }
    json.dumps(event)
    assert isinstance(d, LoopDecision)
