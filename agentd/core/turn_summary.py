"""A turn's summary (what it went through: repairs, nudges, retries, budget stop, goal rounds…)
and the records on it, typed, with their one encoding: the camelCase `turn` data on the
`turn_ended` event and the prompt's answer. The loop fills them in; only `wire()` spells keys."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def compaction_record(reason: str, replaced: int) -> dict[str, Any]:
    """A compaction the turn went through, as the summary lists it."""
    return {"reason": reason, "replacedMessages": replaced}


@dataclass
class GoalRound:
    """One goal evaluation of a turn: the evaluator's attempts, the action taken, its verdict,
    the verification run, and whether the token budget stopped the continuation."""

    attempts: list[dict[str, Any]]  # each evaluator call: its lane and how it went
    action: str
    verdict: dict[str, Any] | None = None
    verification: dict[str, Any] | None = None
    budget_spent: bool = False

    def wire(self) -> dict[str, Any]:
        data: dict[str, Any] = {"attempts": self.attempts, "action": self.action}
        if self.verdict is not None:
            data["verdict"] = self.verdict
        if self.verification is not None:
            data["verification"] = self.verification
        if self.budget_spent:
            data["budgetSpent"] = True
        return data


@dataclass
class TurnSummary:
    iterations: int
    usage: dict[str, Any]
    repairs: list[str] = field(default_factory=list)
    nudges: list[dict[str, Any]] = field(default_factory=list)
    interjections: int = 0
    todo_nudges: int = 0
    structured_attempts: int = 0
    max_token_continuations: int = 0
    empty_retries: int = 0
    compactions: list[dict[str, Any]] = field(default_factory=list)
    retries: list[dict[str, Any]] = field(default_factory=list)
    budget_stop: dict[str, Any] | None = None
    grace: bool = False
    completion_recoveries: int = 0
    auto_recovery_exhausted: bool = False
    stop_reentries: int = 0
    goal_verdicts: list[dict[str, Any]] = field(default_factory=list)
    todos_remaining: int = 0
    reminders: list[dict[str, Any]] = field(default_factory=list)
    usage_incomplete: bool = False  # a background child still runs: its spend is booked later
    reported_as: dict[str, str] | None = None  # how telemetry counts the outcome, when not by its kind

    def wire(self) -> dict[str, Any]:
        """The summary as stored and sent; empty and false fields are left out, key order is
        the stored bytes' order."""
        data: dict[str, Any] = {"iterations": self.iterations}
        for key, value in (
            ("repairs", self.repairs),
            ("nudges", self.nudges),
            ("interjections", self.interjections),
            ("todoNudges", self.todo_nudges),
            ("structuredAttempts", self.structured_attempts),
            ("maxTokenContinuations", self.max_token_continuations),
            ("emptyRetries", self.empty_retries),
            ("compactions", self.compactions),
            ("retries", self.retries),
            ("budgetStop", self.budget_stop),
            ("grace", self.grace),
        ):
            if value:
                data[key] = list(value) if isinstance(value, list) else value
        data["usage"] = {**self.usage, "incomplete": True} if self.usage_incomplete else self.usage
        for key, value in (
            ("completionRecoveries", self.completion_recoveries),
            ("autoRecoveryExhausted", self.auto_recovery_exhausted),
            ("stopReentries", self.stop_reentries),
            ("goalVerdicts", self.goal_verdicts),
            ("todosRemaining", self.todos_remaining),
            ("reminders", self.reminders),
        ):
            if value:
                data[key] = list(value) if isinstance(value, list) else value
        if self.reported_as is not None:
            data["reportedAs"] = self.reported_as
        return data
