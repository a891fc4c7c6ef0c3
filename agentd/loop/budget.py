"""Budget gates (R-B1) and grace (R-B2).

Everything here answers questions; nothing here acts. The L3 loop asks `check_budget` at the
top of every iteration, asks `grace_decision` when a stop comes back, and on a hard
max-iterations stop hands the workspace to `checkpoint_budget_exhaustion` (R-B3, in
`checkpoint.py`: it runs git, so it does not live here). The gate order,
the token arithmetic and the user-facing wording each exist in exactly one place, so two
loops can never drift into different stopping behaviour.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from agentd.core import BudgetStopKind, Usage

Clock = Callable[[], float]


@dataclass(frozen=True)
class BudgetLimits:
    """The five gates' limits. `None` switches a gate off.

    Interactive sessions have no iteration cap (the user is watching and can cancel);
    headless tasks and sub-agents get `headless()`, whose cap is the only thing between a
    confused model and an unbounded bill.
    """

    HEADLESS_MAX_ITERATIONS: ClassVar[int] = 50

    max_iterations: int | None = None
    idle_progress_s: float | None = 300.0  # no progress event for this long → stop
    activity_timeout_s: float | None = 1800.0  # run this old AND nothing at all happened within it → stop
    token_budget: int | None = None  # input + output + cache read + cache write

    @classmethod
    def headless(cls, **overrides: Any) -> BudgetLimits:
        """Limits for headless tasks and sub-agents: the interactive ones plus a 50-iteration cap."""
        overrides.setdefault("max_iterations", cls.HEADLESS_MAX_ITERATIONS)
        return cls(**overrides)


@dataclass
class BudgetState:
    """What one turn has spent so far. Times come from `clock` (monotonic seconds), so tests
    drive a fake clock instead of sleeping."""

    clock: Clock = time.monotonic
    iteration: int = 0  # iterations started so far; the gate runs before the next one starts
    started_at: float | None = None  # None → clock() at construction
    last_progress_at: float | None = None
    last_activity_at: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    shutdown: bool = False
    grace_used: bool = False
    productive_tool_calls: int = 0

    def __post_init__(self) -> None:
        now = self.clock()
        if self.started_at is None:
            self.started_at = now
        # A fresh turn counts as progress and activity: the clocks start when the turn does.
        if self.last_progress_at is None:
            self.last_progress_at = self.started_at
        if self.last_activity_at is None:
            self.last_activity_at = self.last_progress_at

    def now(self) -> float:
        return self.clock()

    @property
    def tokens_used(self) -> int:
        """The one place the token arithmetic lives. Cache reads and writes count: with prompt
        caching most of the prompt moves out of `input_tokens`, and leaving them out would let a
        cache-served loop run many times past its budget."""
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens

    def begin_iteration(self) -> None:
        self.iteration += 1

    def record_usage(self, usage: Usage) -> None:
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_read_tokens += usage.cache_read_tokens
        self.cache_write_tokens += usage.cache_write_tokens

    def mark_progress(self, now: float | None = None) -> None:
        """A step forward (a sample committed, a tool finished). Progress is also activity."""
        t = self.clock() if now is None else now
        self.last_progress_at = t
        self.last_activity_at = t

    def mark_activity(self, now: float | None = None) -> None:
        """Any sign of life that is not progress (a streamed delta, a tool output chunk)."""
        self.last_activity_at = self.clock() if now is None else now

    def record_productive_tool_call(self) -> None:
        """A tool call that succeeded: what makes a stopped loop worth a grace iteration."""
        self.productive_tool_calls += 1

    def request_shutdown(self) -> None:
        self.shutdown = True

    def grant_grace(self) -> None:
        """The loop calls this when it acts on a positive `grace_decision`."""
        self.grace_used = True


@dataclass(frozen=True)
class BudgetStop:
    """Why a turn must stop, with its numbers: iterations, seconds or tokens (None for shutdown)."""

    kind: BudgetStopKind
    limit: int | float | None = None
    used: int | float | None = None

    def message(self) -> str:
        return render_budget_stop(self)

    def to_event(self) -> dict[str, Any]:
        event: dict[str, Any] = {"kind": self.kind.value, "message": self.message()}
        # A shutdown has no numbers; absent beats null on the wire (null is not a value).
        if self.limit is not None:
            event["limit"] = self.limit
        if self.used is not None:
            event["used"] = self.used
        return event


def check_budget(state: BudgetState, limits: BudgetLimits, now: float | None = None) -> BudgetStop | None:
    """Run the five gates in their fixed order; the first hit wins (R-B1).

    Shutdown first: it is the operator pulling the plug and must beat everything. Iterations
    next: the most common stop and a plain integer compare. The two timeouts then, and the
    token budget last: many deployments leave it off.
    """
    t = state.clock() if now is None else now
    assert state.started_at is not None and state.last_progress_at is not None
    assert state.last_activity_at is not None

    if state.shutdown:
        return BudgetStop(BudgetStopKind.SHUTDOWN)
    if limits.max_iterations is not None and state.iteration >= limits.max_iterations:
        return BudgetStop(BudgetStopKind.MAX_ITERATIONS, limits.max_iterations, state.iteration)
    if limits.idle_progress_s is not None:
        idle = t - state.last_progress_at
        if idle >= limits.idle_progress_s:
            return BudgetStop(BudgetStopKind.IDLE_PROGRESS_TIMEOUT, limits.idle_progress_s, idle)
    if limits.activity_timeout_s is not None:
        # A long run is fine while things keep happening: only a run that is old AND silent for
        # the whole window stops.
        quiet = t - max(state.last_activity_at, state.last_progress_at)
        if t - state.started_at >= limits.activity_timeout_s and quiet >= limits.activity_timeout_s:
            return BudgetStop(BudgetStopKind.ACTIVITY_TIMEOUT, limits.activity_timeout_s, quiet)
    if limits.token_budget is not None and state.tokens_used >= limits.token_budget:
        return BudgetStop(BudgetStopKind.TOKEN_BUDGET, limits.token_budget, state.tokens_used)
    return None


def _seconds(value: int | float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.0f}s" if value >= 10 or float(value).is_integer() else f"{value:.1f}s"


def render_budget_stop(stop: BudgetStop) -> str:
    """The single rendering point: every client shows the same words for the same stop."""
    match stop.kind:
        case BudgetStopKind.SHUTDOWN:
            return "Stopped: the server is shutting down."
        case BudgetStopKind.MAX_ITERATIONS:
            return (
                f"Stopped: the agent did not finish within {stop.limit} iterations "
                f"({stop.used} used). The task may be too broad for one turn — split it into "
                "smaller steps, or send a follow-up prompt to continue from here."
            )
        case BudgetStopKind.IDLE_PROGRESS_TIMEOUT:
            return (
                f"Stopped: no progress for {_seconds(stop.used)} "
                f"(idle-progress limit {_seconds(stop.limit)})."
            )
        case BudgetStopKind.ACTIVITY_TIMEOUT:
            return (
                f"Stopped: nothing happened for {_seconds(stop.used)} "
                f"(activity timeout {_seconds(stop.limit)})."
            )
        case BudgetStopKind.TOKEN_BUDGET:
            return (
                f"Stopped: token budget exceeded ({stop.used} of {stop.limit} tokens, "
                "counting input, output and cache reads and writes)."
            )


_GRACEABLE = frozenset({BudgetStopKind.MAX_ITERATIONS, BudgetStopKind.TOKEN_BUDGET})


def grace_decision(stop: BudgetStop, state: BudgetState) -> bool:
    """May the loop run one more iteration to wrap up instead of stopping now? (R-B2)

    Only the two "ran out" stops qualify, only once per turn, and only for a loop that was
    actually getting work done — a loop that never completed a tool call gets no extra rope.
    Shutdown and the timeouts always stop hard: the operator or a stuck loop won't be helped
    by one more round.
    """
    return stop.kind in _GRACEABLE and not state.grace_used and state.productive_tool_calls >= 1
