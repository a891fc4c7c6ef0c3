"""Typed per-turn state: what the turn has done, repaired and decided so far.

The loop owns one `TurnState` per L3 run; its lists of repairs and nudges end up as data
on the `turn_ended` event, so "what did this turn go through" is never a log search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentd.core import TurnSummary, UsageLedger
from agentd.loop.detection import LoopDetector, NoProgress, Stationarity
from agentd.loop.react.step import NextStepStop
from agentd.loop.repair import RepairReason


@dataclass
class TurnState:
    iteration: int = 0  # sampling rounds started
    tools_called: int = 0  # calls that actually ran
    repairs: list[RepairReason] = field(default_factory=list)
    nudges: list[dict[str, Any]] = field(default_factory=list)
    stationarity: Stationarity = field(default_factory=Stationarity)
    no_progress: NoProgress = field(default_factory=NoProgress)
    loops: LoopDetector = field(default_factory=LoopDetector)  # cycles, churn, spirals, malformed
    interjections: int = 0  # user inputs written into this turn
    todo_nudges: int = 0
    tool_rounds: int = 0  # steps whose tool calls were executed (max_turns counts these)
    structured_attempts: int = 0  # failed structured-output attempts
    max_token_continuations: int = 0
    empty_retries: int = 0
    context_tokens: int = 0  # the provider's last report of the request size
    overflow_compacted: bool = False  # a context-overflow error compacts and retries once
    compactions: list[dict[str, Any]] = field(default_factory=list)
    usage: UsageLedger = field(default_factory=UsageLedger)  # this prompt's provider calls
    retries: list[dict[str, Any]] = field(default_factory=list)  # retry-bucket decisions
    budget_stop: dict[str, Any] | None = None
    grace: bool = False  # the one wrap-up iteration after a budget stop was granted
    completion_recoveries: int = 0  # R-L2b reminders given
    auto_recovery_exhausted: bool = False
    stop_reentries: int = 0  # R-L2d
    goal_verdicts: list[dict[str, Any]] = field(default_factory=list)
    todos_remaining: int = 0  # set when the TodoGate let the model stop anyway
    head_stop: NextStepStop | None = None  # a stationarity stop the next pass's head takes
    reminders: list[dict[str, Any]] = field(default_factory=list)  # opening and tool-set reminders

    @classmethod
    def for_limits(cls, limits: Any) -> TurnState:
        """A fresh state whose detectors use the limits in force (a `LoopLimits`)."""
        return cls(
            stationarity=Stationarity(limits=limits.stationarity),
            no_progress=NoProgress(limits=limits.stationarity),
            loops=LoopDetector(limits.loop_detector),
        )

    def record_repairs(self, reasons: list[RepairReason]) -> None:
        for reason in reasons:
            if reason not in self.repairs:
                self.repairs.append(reason)

    def summary(
        self, *, reported_as: dict[str, str] | None = None, usage_incomplete: bool = False
    ) -> TurnSummary:
        return TurnSummary(
            iterations=self.iteration,
            usage=self.usage.to_dict(),
            repairs=[r.value for r in self.repairs],
            nudges=list(self.nudges),
            interjections=self.interjections,
            todo_nudges=self.todo_nudges,
            structured_attempts=self.structured_attempts,
            max_token_continuations=self.max_token_continuations,
            empty_retries=self.empty_retries,
            compactions=list(self.compactions),
            retries=list(self.retries),
            budget_stop=self.budget_stop,
            grace=self.grace,
            completion_recoveries=self.completion_recoveries,
            auto_recovery_exhausted=self.auto_recovery_exhausted,
            stop_reentries=self.stop_reentries,
            goal_verdicts=list(self.goal_verdicts),
            todos_remaining=self.todos_remaining,
            reminders=list(self.reminders),
            usage_incomplete=usage_incomplete,
            reported_as=reported_as,
        )
