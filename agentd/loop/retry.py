"""Typed retry buckets (R-R2): one counter and one limit per class of failure.

A shared "retried N times" counter lets a 429 storm eat the budget a real 401 needed, and
lets a bad key spin until the iteration cap. Here every class has its own bucket, every
bucket its own limit, and `RetryState.observe` turns an error into a named `LoopDecision`
the loop acts on.

Counts survive success, turns and restarts (`to_dict`/`from_dict` with the session). Seed
003: "PersistentRetryStateGuard…让桶计数跨 turn 存活，同一 session 里昨天烧掉的三次 network
重试今天仍然计入桶" — a storm spread over many turns must still exhaust its bucket, so a
successful call does not reset the provider buckets. What keeps a long-lived session from
being poisoned for ever is a sliding window: a bucket counts the failures of the last
`window_s` (48 h by default: yesterday's failures still count today, last week's no longer
do). Each bucket keeps the times of its newest `limit + 1` failures — all a decision needs.

Authentication is the exception on both counts (000: "认证重试有独立 schedule"): a rejected
credential is retried on the same lane after the fixed waits of `auth_schedule_s` (not the
shared backoff), and an authenticated call ends the episode — its bucket starts over.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from agentd.core import (
    ErrorKind,
    HarnessError,
    RecoveryHint,
    hint,
    retry_bucket_wire,
    retry_decision_wire,
    retry_snapshot_wire,
)


class Bucket(StrEnum):
    """The 15 error kinds plus two detected degenerations: `shell_spiral` (shell retries) and
    `degenerate_output` (a response cut as repetitive text, sent back to the retry ladder)."""

    RATE_LIMITED = "rate_limited"
    CONTEXT_OVERFLOW = "context_overflow"
    AUTHENTICATION = "authentication"
    QUOTA = "quota"
    INVALID_REQUEST = "invalid_request"
    CONTENT_FILTERED = "content_filtered"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    NETWORK = "network"
    TIMEOUT = "timeout"
    TOOL_EXECUTION = "tool_execution"
    MCP_SPAWN = "mcp_spawn"
    MCP_TIMEOUT = "mcp_timeout"
    MCP_PROTOCOL = "mcp_protocol"
    DELEGATE_DEPTH_EXCEEDED = "delegate_depth_exceeded"
    INTERNAL = "internal"
    SHELL_SPIRAL = "shell_spiral"
    DEGENERATE_OUTPUT = "degenerate_output"

    @classmethod
    def of(cls, kind: ErrorKind | HarnessError | Bucket) -> Bucket:
        """Every ErrorKind has a same-named bucket."""
        if isinstance(kind, HarnessError):
            kind = kind.kind
        return cls(kind.value)


def _default_bucket_limits() -> Mapping[Bucket, int]:
    # Deliberately low: structural failures get (almost) no retries, transient ones a few.
    return MappingProxyType(
        {
            Bucket.RATE_LIMITED: 5,
            Bucket.CONTEXT_OVERFLOW: 2,
            Bucket.AUTHENTICATION: 1,
            Bucket.QUOTA: 1,
            Bucket.INVALID_REQUEST: 2,
            Bucket.CONTENT_FILTERED: 1,
            Bucket.PROVIDER_UNAVAILABLE: 4,
            Bucket.NETWORK: 4,
            Bucket.TIMEOUT: 3,
            Bucket.TOOL_EXECUTION: 5,
            Bucket.MCP_SPAWN: 2,
            Bucket.MCP_TIMEOUT: 3,
            Bucket.MCP_PROTOCOL: 2,
            Bucket.DELEGATE_DEPTH_EXCEEDED: 1,
            Bucket.INTERNAL: 1,
            Bucket.SHELL_SPIRAL: 1,
            # The seeds' call-level retry of a retriable response (octos LLM_RETRY_MAX = 3).
            Bucket.DEGENERATE_OUTPUT: 3,
        }
    )


@dataclass(frozen=True)
class RetryLimits:
    """Bucket limits and backoff shape. A partial `bucket_limits` overrides only the buckets it names."""

    bucket_limits: Mapping[Bucket, int] = field(default_factory=_default_bucket_limits)
    backoff_base_s: float = 1.0  # first retry waits ~1 s, then 2, 4, 8 …
    backoff_max_s: float = 60.0
    retry_after_cap_s: float = 120.0  # a provider asking for an hour gets two minutes, then a new try
    jitter: float = 0.2  # ± fraction of the backoff, so many sessions don't retry in lockstep
    # 003: "LLM call max 1200s" — one model call (first byte to last) never runs longer.
    call_max_s: float = 1200.0
    # 000: "认证重试有独立 schedule". The wait before each authentication retry: the nth retry
    # waits the nth entry (the last one repeats). How many retries is the bucket's limit (003:
    # "authentication 1"). Fixed waits — no jitter, no Retry-After: a rejected key is not load.
    auth_schedule_s: tuple[float, ...] = (2.0,)
    # A failure counts in its bucket this long (sliding window): across turns and restarts, but
    # a session that hit its limits days ago gets its allowance back.
    window_s: float = 48 * 3600.0

    def __post_init__(self) -> None:
        merged = {**_default_bucket_limits(), **{Bucket(b): int(n) for b, n in self.bucket_limits.items()}}
        if any(n < 0 for n in merged.values()):
            raise ValueError("bucket limits must be >= 0")
        if not 0 <= self.jitter < 1:
            raise ValueError("jitter must be in [0, 1)")
        if self.window_s <= 0:
            raise ValueError("window_s must be > 0")
        schedule = tuple(float(s) for s in self.auth_schedule_s)
        if not schedule or any(s < 0 for s in schedule):
            raise ValueError("auth_schedule_s must be a non-empty list of waits >= 0")
        object.__setattr__(self, "auth_schedule_s", schedule)
        object.__setattr__(self, "bucket_limits", MappingProxyType(merged))

    def limit(self, bucket: Bucket) -> int:
        return self.bucket_limits[bucket]

    def backoff_s(self, attempt: int) -> float:
        """Un-jittered exponential backoff for the nth attempt (1-based): min(base·2^(n-1), max)."""
        return min(self.backoff_base_s * (1 << max(attempt - 1, 0)), self.backoff_max_s)

    def auth_delay_s(self, attempt: int) -> float:
        """The authentication schedule's wait before the nth retry (1-based; the last repeats)."""
        return self.auth_schedule_s[min(max(attempt, 1), len(self.auth_schedule_s)) - 1]


class Decision(StrEnum):
    CONTINUE = "continue"  # retry as is (after `delay_s`), or for tool errors: carry on, the model saw it
    ROTATE_AND_RETRY = "rotate_and_retry"  # advance the provider chain, retry on the next lane
    COMPACT_AND_RETRY = "compact_and_retry"  # compact the conversation, then retry
    ESCALATE = "escalate"  # surface to the user; retrying cannot help
    EXHAUSTED = "exhausted"  # this bucket's count exceeded its limit


@dataclass(frozen=True)
class LoopDecision:
    decision: Decision
    bucket: Bucket
    attempt: int  # this bucket's count including this observation
    limit: int
    delay_s: float  # how long to wait before acting; 0 when there is nothing to wait for
    reason: str

    @property
    def retries(self) -> bool:
        """True when the loop should go round again rather than end the turn."""
        return self.decision in (Decision.CONTINUE, Decision.ROTATE_AND_RETRY, Decision.COMPACT_AND_RETRY)

    def to_event(self) -> dict[str, Any]:
        return retry_decision_wire(
            self.decision.value, self.bucket.value, self.attempt, self.limit, self.delay_s, self.reason
        )


# Tool-scoped errors go back to the model as a tool result (R-R1): the turn carries on, only the
# failed call is not retried. Their buckets still count, so a tool failing every time ends the turn.
_TOOL_SCOPED = frozenset({ErrorKind.TOOL_EXECUTION, ErrorKind.MCP_SPAWN, ErrorKind.MCP_PROTOCOL})

_SYSTEM_RNG = random.Random()

_JSON_VERSION = 2  # 1: bare counts (no times); read as failures at load time

Clock = Callable[[], float]  # wall-clock seconds (epoch): the window spans restarts


class RetryState:
    """Per-session buckets of failure times; `observe` is the one place a failure becomes a
    decision. `clock` is injectable so tests move time instead of sleeping."""

    def __init__(
        self,
        limits: RetryLimits | None = None,
        counts: Mapping[Bucket, int] | None = None,
        *,
        failures: Mapping[Bucket, list[float]] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.limits = limits or RetryLimits()
        self._clock: Clock = clock or time.time
        now = self._clock()
        self._failures: dict[Bucket, list[float]] = {b: [] for b in Bucket}
        for bucket, times in (failures or {}).items():
            self._failures[Bucket(bucket)] = sorted(float(t) for t in times)
        for bucket, n in (counts or {}).items():  # counts without times: failures of "now"
            self._failures[Bucket(bucket)] = [now] * int(n)
        for bucket in Bucket:
            self._prune(bucket, now)

    def _prune(self, bucket: Bucket, now: float) -> None:
        keep = self.limits.limit(bucket) + 1
        horizon = now - self.limits.window_s
        self._failures[bucket] = [t for t in self._failures[bucket] if t > horizon][-keep:]

    @property
    def counts(self) -> Mapping[Bucket, int]:
        now = self._clock()
        for bucket in Bucket:
            self._prune(bucket, now)
        return MappingProxyType({b: len(t) for b, t in self._failures.items()})

    def count(self, bucket: Bucket | ErrorKind) -> int:
        if not isinstance(bucket, Bucket):
            bucket = Bucket.of(bucket)
        if not self._failures[bucket]:
            return 0  # asked every round, most often of a bucket that never failed: no pruning
        self._prune(bucket, self._clock())
        return len(self._failures[bucket])

    def failing(self, buckets: tuple[Bucket, ...]) -> list[Bucket]:
        """Those of `buckets` with failures in the window (`count` of each, in one call)."""
        out = []
        for bucket in buckets:
            if self._failures[bucket] and self.count(bucket):
                out.append(bucket)
        return out

    def _bump(self, bucket: Bucket) -> tuple[int, int]:
        now = self._clock()
        self._failures[bucket].append(now)
        self._prune(bucket, now)
        return len(self._failures[bucket]), self.limits.limit(bucket)

    def _delay(self, err: HarnessError, attempt: int, rng: random.Random) -> tuple[float, str]:
        if err.retry_after is not None:
            # The provider said how long; its word beats our guess (capped, and without jitter so we
            # never come back early).
            wait = min(max(err.retry_after, 0.0), self.limits.retry_after_cap_s)
            capped = " (capped)" if wait < err.retry_after else ""
            return wait, f"retry-after {wait:g}s{capped}"
        base = self.limits.backoff_s(attempt)
        j = self.limits.jitter
        wait = max(0.0, base * (1 + rng.uniform(-j, j)))
        return wait, f"backoff {base:g}s ±{j:.0%}"

    def observe(
        self, err: HarnessError, *, has_fallback: bool, rng: random.Random | None = None
    ) -> LoopDecision:
        """Count `err` in its bucket and decide what the loop does next.

        Over the limit → exhausted, whatever the kind. Otherwise by recovery hint:
        backoff_retry → continue after an (honoured Retry-After or jittered exponential) delay;
        switch_provider → rotate_and_retry when a fallback lane exists, else provider_unavailable
        waits and retries the same lane while quota escalates (an empty wallet won't refill in
        seconds); compact_context → compact_and_retry; auth_schedule → continue on the same lane
        after the authentication schedule's wait, never rotated (a bad key fails on every lane);
        fail_fast → escalate at once (a bad request fails everywhere) — except tool-scoped errors,
        which continue: the model already sees the failure as the tool's result; bug → escalate.
        """
        bucket = Bucket.of(err)
        attempt, limit = self._bump(bucket)
        kind = err.kind

        def decide(decision: Decision, reason: str, delay: float = 0.0) -> LoopDecision:
            return LoopDecision(decision, bucket, attempt, limit, delay, f"{bucket.value}: {reason}")

        if attempt > limit:
            window = f"{self.limits.window_s / 3600:g} h"  # why a new prompt may fail at once
            return decide(Decision.EXHAUSTED, f"{attempt} failures exceed the limit of {limit} in {window}")

        match hint(kind):
            case RecoveryHint.BACKOFF_RETRY:
                delay, why = self._delay(err, attempt, rng or _SYSTEM_RNG)
                return decide(Decision.CONTINUE, f"transient, retrying after {why}", delay)
            case RecoveryHint.SWITCH_PROVIDER:
                if has_fallback:
                    return decide(Decision.ROTATE_AND_RETRY, "switching to the next provider")
                if kind is ErrorKind.PROVIDER_UNAVAILABLE:
                    delay, why = self._delay(err, attempt, rng or _SYSTEM_RNG)
                    return decide(Decision.CONTINUE, f"no fallback provider, retrying after {why}", delay)
                return decide(Decision.ESCALATE, "no fallback provider")
            case RecoveryHint.COMPACT_CONTEXT:
                return decide(Decision.COMPACT_AND_RETRY, "compacting the context")
            case RecoveryHint.AUTH_SCHEDULE:
                delay = self.limits.auth_delay_s(attempt)
                why = f"credential rejected, retrying this provider after the auth schedule's {delay:g}s"
                return decide(Decision.CONTINUE, why, delay)
            case RecoveryHint.FAIL_FAST if kind in _TOOL_SCOPED:
                return decide(Decision.CONTINUE, "reported to the model; the call is not retried")
            case RecoveryHint.FAIL_FAST:
                return decide(Decision.ESCALATE, "not retryable")
            case RecoveryHint.BUG:
                return decide(Decision.ESCALATE, "internal error")

    def observe_shell_spiral(self) -> LoopDecision:
        """A detected shell-retry spiral: escalate (stop retrying, surface the last output) the
        first time; the count lives here so the session ledger shows the same number."""
        attempt, limit = self._bump(Bucket.SHELL_SPIRAL)
        decision = Decision.EXHAUSTED if attempt > limit else Decision.ESCALATE
        reason = "shell_spiral: the shell retries are spiralling"
        return LoopDecision(decision, Bucket.SHELL_SPIRAL, attempt, limit, 0.0, reason)

    def observe_degenerate_output(self, rng: random.Random | None = None) -> LoopDecision:
        """A response cut as repetitive text (003: `is_repetitive_output` → back to the call
        retry ladder): sample again after a jittered backoff, until the bucket is exhausted."""
        attempt, limit = self._bump(Bucket.DEGENERATE_OUTPUT)
        bucket = Bucket.DEGENERATE_OUTPUT
        if attempt > limit:
            reason = f"{bucket.value}: {attempt} failures exceed the limit of {limit}"
            return LoopDecision(Decision.EXHAUSTED, bucket, attempt, limit, 0.0, reason)
        base, j = self.limits.backoff_s(attempt), self.limits.jitter
        delay = max(0.0, base * (1 + (rng or _SYSTEM_RNG).uniform(-j, j)))
        reason = f"{bucket.value}: repetitive output discarded, retrying after backoff {base:g}s ±{j:.0%}"
        return LoopDecision(Decision.CONTINUE, bucket, attempt, limit, delay, reason)

    def record_success(self, bucket: Bucket | ErrorKind) -> None:
        """A call of this kind succeeded: its bucket starts over. Used for the tool bucket (a
        productive tool call) and authentication (an authenticated call ends the episode, so the
        next rejection gets the whole schedule again); the other provider buckets are not reset
        by success (seed 003)."""
        self._failures[Bucket.of(bucket)] = []

    def snapshot(self) -> dict[str, Any]:
        """What `_agentd/usage/get` shows: each non-empty bucket's count in the window, its
        limit, its last failure and when its oldest counted failure leaves the window."""
        now = self._clock()
        buckets: dict[str, Any] = {}
        for bucket in Bucket:
            self._prune(bucket, now)
            times = self._failures[bucket]
            if times:
                limit = self.limits.limit(bucket)
                buckets[bucket.value] = retry_bucket_wire(
                    len(times),
                    limit,
                    len(times) > limit,
                    _iso(times[-1]),
                    _iso(times[0] + self.limits.window_s),
                )
        return retry_snapshot_wire(self.limits.window_s, buckets)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": _JSON_VERSION,
            "failures": {b.value: list(t) for b, t in self._failures.items() if t},
        }

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], limits: RetryLimits | None = None, *, clock: Clock | None = None
    ) -> RetryState:
        """Restore persisted buckets. Unknown buckets (from a newer build) are dropped; missing
        ones start empty. Limits are configuration, not state, so they are not persisted."""
        known = {b.value for b in Bucket}
        raw_times = data.get("failures", {})
        raw_counts = data.get("counts", {})
        if not isinstance(raw_times, Mapping) or not isinstance(raw_counts, Mapping):
            raise ValueError("retry state: 'failures' and 'counts' must be objects")
        failures: dict[Bucket, list[float]] = {}
        for name, times in raw_times.items():
            if name not in known:
                continue
            if not isinstance(times, list) or not all(_is_time(t) for t in times):
                raise ValueError(f"retry state: bad failure times for {name!r}: {times!r}")
            failures[Bucket(name)] = [float(t) for t in times]
        counts: dict[Bucket, int] = {}
        for name, n in raw_counts.items():  # version 1
            if name not in known:
                continue
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise ValueError(f"retry state: bad count for {name!r}: {n!r}")
            counts[Bucket(name)] = n
        return cls(limits, counts, failures=failures, clock=clock)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(
        cls, text: str, limits: RetryLimits | None = None, *, clock: Clock | None = None
    ) -> RetryState:
        return cls.from_dict(json.loads(text), limits, clock=clock)

    def __repr__(self) -> str:
        nonzero = {b.value: n for b, n in self.counts.items() if n}
        return f"RetryState({nonzero})"


def _is_time(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat()
