"""Goals (R-L2c): an objective the session keeps working on across L3 rounds.

After each normal L3 completion a *hidden* evaluator call — no tools, a forced JSON
verdict — judges the objective against the plan and a bounded, newest-first transcript
(which is untrusted input: a confident claim in it is not proof; see `goal_eval.py`). The
decisions here are pure functions over `GoalState` that return a `GoalDecision` (the action
and the goal after it); the turn loop only acts on them:

- both evaluator attempts fail → the goal is *paused* (`infra`), never treated as done;
- `candidate_complete` → the optional verification command decides: exit 0 → `complete`,
  otherwise the gap is recorded and work continues;
- `blocked` with the same blocker key 3 times in a row → `paused`, with the user action;
- token budget spent → `budget_limited`: one final wrap-up round, then stop;
- otherwise a continuation message (objective, progress, gaps, next step) becomes the
  next user turn, and older continuation messages are removed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, Protocol

from pydantic import BaseModel, field_validator, model_validator

from agentd.core import GoalState, GoalStatus, Message, verdict_next_step, verdict_wire

CONTINUATION_TAG = "goal_continuation"


@dataclass(frozen=True)
class GoalLimits:
    attempt_timeout_s: float = 30.0
    attempts: int = 2  # evaluator calls per judgement: small model first, then the session's
    item_max_bytes: int = 4 * 1024
    transcript_max_bytes: int = 32 * 1024
    blocked_repeats: int = 3
    verify_timeout_s: float = 600.0
    verify_output_chars: int = 4000
    # 001: "验证基础设施失败或次数达上限可将 goal pause" — failed or timed-out verifications in a
    # row before the goal pauses (AGENTD_LIMITS {"goal": {"verify_failures_cap": …}}).
    verify_failures_cap: int = 3


DEFAULT_LIMITS = GoalLimits()


class Verdict(BaseModel):
    """The evaluator's answer; anything that does not parse into this is a failed attempt."""

    decision: Literal["continue", "candidate_complete", "blocked"]
    evidence: str
    next_step: str
    blocker_key: str | None = None

    @field_validator("evidence", "next_step")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value.strip()

    def wire(self) -> dict[str, Any]:
        """camelCase, for events and persisted state."""
        return verdict_wire(self.decision, self.evidence, self.next_step, self.blocker_key)

    @model_validator(mode="after")
    def _blocker(self) -> Verdict:
        if self.decision == "blocked":
            if not self.blocker_key or not re.fullmatch(r"[a-z0-9_]+", self.blocker_key):
                raise ValueError("blocked needs blocker_key: a lowercase [a-z0-9_] key")
        elif self.blocker_key:
            raise ValueError("blocker_key is only for blocked")
        return self


# ----------------------------------------------------------------------------- decisions


class GoalAction(StrEnum):
    CONTINUE = "continue"  # inject the continuation and run another round
    VERIFY = "verify"  # run the verification command, then `decide_after_verification`
    PAUSE = "pause"
    COMPLETE = "complete"
    STOP = "stop"  # nothing more to do this turn


class PauseReason(StrEnum):
    """Fixed pause reasons (a blocked goal's reason names its blocker key instead)."""

    REFUSAL = "refusal"
    INFRA = "infra"


@dataclass(frozen=True)
class GoalDecision:
    """A decider's answer: what to do, and the goal as it is after the decision (a copy; the
    goal passed in is never changed — the turn applies it with `GoalState.assign`)."""

    action: GoalAction
    goal: GoalState


def decide_budget(goal: GoalState) -> GoalDecision | None:
    """The token budget, read after the evaluation (001: "评估 → 根据评估结果更新 goal → 读取
    goal 状态 → Token 预算（超出预算时，停止因 goal 再次进入 L3）"): a spent budget stops the
    goal's re-entry — no wrap-up round (000: "返回 None（目标已达成或 token 超限）即 EndTurn").
    None while the budget is not spent."""
    if goal.token_budget is None or goal.tokens_used < goal.token_budget:
        return None
    after = goal.copy()
    if after.status is not GoalStatus.BUDGET_LIMITED:
        after.status = GoalStatus.BUDGET_LIMITED
        after.pause_reason = f"token budget of {after.token_budget} spent ({after.tokens_used} used)"
    return GoalDecision(GoalAction.STOP, after)


def decide_after_evaluation(
    goal: GoalState, verdict: Verdict | None, limits: GoalLimits | None = None
) -> GoalDecision:
    """What the evaluator's verdict means; `None` is an evaluator that could not answer."""
    limits = limits or DEFAULT_LIMITS
    after = goal.copy()
    after.rounds += 1
    if verdict is None:
        after.status = GoalStatus.PAUSED
        after.pause_reason = PauseReason.INFRA.value
        after.user_action = (
            "The goal evaluator could not be reached; resume the goal when the provider works again."
        )
        return GoalDecision(GoalAction.PAUSE, after)
    after.last_verdict = verdict.wire()
    if verdict.decision == "blocked":
        if verdict.blocker_key == after.blocked_key:
            after.blocked_count += 1
        else:
            after.blocked_key, after.blocked_count = verdict.blocker_key, 1
        if after.blocked_count >= limits.blocked_repeats:
            after.status = GoalStatus.PAUSED
            after.pause_reason = f"blocked: {verdict.blocker_key}"
            after.user_action = verdict.next_step
            return GoalDecision(GoalAction.PAUSE, after)
        return GoalDecision(GoalAction.CONTINUE, after)
    after.blocked_key, after.blocked_count = None, 0
    if verdict.decision == "candidate_complete":
        if after.verify:
            return GoalDecision(GoalAction.VERIFY, after)
        after.status = GoalStatus.COMPLETE
        return GoalDecision(GoalAction.COMPLETE, after)
    return GoalDecision(GoalAction.CONTINUE, after)


def decide_after_verification(
    goal: GoalState, passed: bool, output: str, limits: GoalLimits | None = None
) -> GoalDecision:
    """A failed (or timed-out, or unrunnable) verification records the gap and counts; at
    `verify_failures_cap` in a row the goal pauses (001: "验证基础设施失败或次数达上限可将 goal
    pause")."""
    limits = limits or DEFAULT_LIMITS
    after = goal.copy()
    if passed:
        after.status = GoalStatus.COMPLETE
        after.verify_failures = 0
        return GoalDecision(GoalAction.COMPLETE, after)
    after.gaps.append(f"verification `{after.verify}` failed: {output.strip()[-500:] or '(no output)'}")
    after.verify_failures += 1
    if after.verify_failures >= limits.verify_failures_cap:
        after.status = GoalStatus.PAUSED
        after.pause_reason = f"verification failed {after.verify_failures} times in a row"
        after.user_action = "Fix what the verification reports (or its command), then resume the goal."
        return GoalDecision(GoalAction.PAUSE, after)
    return GoalDecision(GoalAction.CONTINUE, after)


def decide_refusal(goal: GoalState) -> GoalState:
    """A refusal pauses an active goal (the goal after it; unchanged when not active)."""
    after = goal.copy()
    if after.active:
        after.status, after.pause_reason = GoalStatus.PAUSED, PauseReason.REFUSAL.value
        after.user_action = "The model refused; rephrase the objective or clear the goal."
    return after


class _Judged(Protocol):
    @property
    def verdict(self) -> Verdict | None: ...


def budget_check(state: GoalState) -> GoalAction | None:
    """`decide_budget`, applied to `state` in place."""
    decision = decide_budget(state)
    if decision is None:
        return None
    state.assign(decision.goal)
    return decision.action


def after_evaluation(state: GoalState, evaluation: _Judged, limits: GoalLimits | None = None) -> GoalAction:
    """`decide_after_evaluation` of an `Evaluation`, applied to `state` in place."""
    decision = decide_after_evaluation(state, evaluation.verdict, limits)
    state.assign(decision.goal)
    return decision.action


def after_verification(
    state: GoalState, passed: bool, output: str, limits: GoalLimits | None = None
) -> GoalAction:
    """`decide_after_verification`, applied to `state` in place."""
    decision = decide_after_verification(state, passed, output, limits)
    state.assign(decision.goal)
    return decision.action


def continuation_text(state: GoalState, plan: Sequence[dict[str, str]] = ()) -> str:
    """001: "生成续跑说明（目标摘要、计划引用、验证差距、下一步等）" — objective, plan, gaps, next step."""
    verdict = state.last_verdict or {}
    gaps = "\n".join(f"- {g}" for g in state.gaps[-3:]) or "- none recorded"
    steps = "\n".join(f"- [{p.get('status', '?')}] {p.get('content', '')}" for p in plan)
    return (
        "[goal] Keep working towards the objective.\n"
        f"Objective: {state.objective}\n"
        f"Plan (todo list):\n{steps or '- no plan written'}\n"
        f"Progress so far: {verdict.get('evidence', '(not judged yet)')}\n"
        f"Known gaps:\n{gaps}\n"
        f"Next step: {verdict_next_step(verdict) or 'decide the next concrete step'}"
    )


def with_continuation(messages: list[Message], text: str) -> list[Message]:
    """Only the newest continuation stays in the conversation."""
    kept = [m for m in messages if m.tag != CONTINUATION_TAG]
    return [*kept, Message(role="user", content=text, tag=CONTINUATION_TAG)]
