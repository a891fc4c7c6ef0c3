"""A session's goal: what it is, how far it got, and its persisted form. The loop's
goal decisions (agentd/loop/goals/) act on it; the session holds, persists and shows it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class GoalStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    COMPLETE = "complete"
    BUDGET_LIMITED = "budget_limited"


@dataclass
class GoalState:
    objective: str
    token_budget: int | None = None
    verify: str | None = None
    status: GoalStatus = GoalStatus.ACTIVE
    tokens_used: int = 0
    rounds: int = 0
    blocked_key: str | None = None
    blocked_count: int = 0
    gaps: list[str] = field(default_factory=list)
    last_verdict: dict[str, Any] | None = None
    pause_reason: str | None = None
    user_action: str | None = None
    verify_failures: int = 0  # failed (or timed-out) verifications in a row

    @property
    def active(self) -> bool:
        return self.status is GoalStatus.ACTIVE

    def copy(self) -> GoalState:
        """An independent copy (a decider changes the copy, never the goal it was given)."""
        return dataclasses.replace(
            self,
            gaps=list(self.gaps),
            last_verdict=dict(self.last_verdict) if self.last_verdict is not None else None,
        )

    def assign(self, other: GoalState) -> None:
        """Take every field of `other`: apply a decision to the live goal, which the session
        and the running turn share (so it keeps its identity)."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(other, f.name))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "objective": self.objective,
            "status": self.status.value,
            "tokensUsed": self.tokens_used,
            "rounds": self.rounds,
            "blockedCount": self.blocked_count,
            "gaps": list(self.gaps),
            "verifyFailures": self.verify_failures,
        }
        for key, value in (
            ("tokenBudget", self.token_budget),
            ("verify", self.verify),
            ("blockedKey", self.blocked_key),
            ("lastVerdict", self.last_verdict),
            ("pauseReason", self.pause_reason),
            ("userAction", self.user_action),
        ):
            if value is not None:
                data[key] = value
        return data

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GoalState:
        return cls(
            objective=d["objective"],
            token_budget=d.get("tokenBudget"),
            verify=d.get("verify"),
            status=GoalStatus(d.get("status", "active")),
            tokens_used=int(d.get("tokensUsed", 0)),
            rounds=int(d.get("rounds", 0)),
            blocked_key=d.get("blockedKey"),
            blocked_count=int(d.get("blockedCount", 0)),
            gaps=list(d.get("gaps", [])),
            last_verdict=d.get("lastVerdict"),
            pause_reason=d.get("pauseReason"),
            user_action=d.get("userAction"),
            verify_failures=int(d.get("verifyFailures", 0)),
        )


def verdict_wire(decision: str, evidence: str, next_step: str, blocker_key: str | None) -> dict[str, Any]:
    """An evaluator's verdict as events and the persisted goal state hold it (camelCase)."""
    data: dict[str, Any] = {"decision": decision, "evidence": evidence, "nextStep": next_step}
    if blocker_key:
        data["blockerKey"] = blocker_key
    return data


def verdict_next_step(verdict: dict[str, Any]) -> str | None:
    """The next step a stored verdict names, if any."""
    step = verdict.get("nextStep")
    return step if isinstance(step, str) else None
