"""Typed per-turn state: what the turn has done, repaired and decided so far.

The loop owns one `TurnState` per L3 run; its lists of repairs and nudges end up as data
on the `turn_ended` event, so "what did this turn go through" is never a log search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentd.core import UsageLedger
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

    def summary(self) -> dict[str, Any]:
        data: dict[str, Any] = {"iterations": self.iteration}
        if self.repairs:
            data["repairs"] = [r.value for r in self.repairs]
        if self.nudges:
            data["nudges"] = list(self.nudges)
        if self.interjections:
            data["interjections"] = self.interjections
        if self.todo_nudges:
            data["todoNudges"] = self.todo_nudges
        if self.structured_attempts:
            data["structuredAttempts"] = self.structured_attempts
        if self.max_token_continuations:
            data["maxTokenContinuations"] = self.max_token_continuations
        if self.empty_retries:
            data["emptyRetries"] = self.empty_retries
        if self.compactions:
            data["compactions"] = list(self.compactions)
        if self.retries:
            data["retries"] = list(self.retries)
        if self.budget_stop:
            data["budgetStop"] = self.budget_stop
        if self.grace:
            data["grace"] = True
        data["usage"] = self.usage.to_dict()
        if self.completion_recoveries:
            data["completionRecoveries"] = self.completion_recoveries
        if self.auto_recovery_exhausted:
            data["autoRecoveryExhausted"] = True
        if self.stop_reentries:
            data["stopReentries"] = self.stop_reentries
        if self.goal_verdicts:
            data["goalVerdicts"] = list(self.goal_verdicts)
        if self.todos_remaining:
            data["todosRemaining"] = self.todos_remaining
        if self.reminders:
            data["reminders"] = list(self.reminders)
        return data
