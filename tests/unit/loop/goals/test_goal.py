"""The goal deciders (R-L2c) return a `GoalDecision` (action + the goal after it) and never
change the goal they are given; table-driven, no server."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agentd.core import GoalState, GoalStatus
from agentd.loop.goals.decide import (
    GoalAction,
    GoalLimits,
    Verdict,
    after_evaluation,
    budget_check,
    continuation_text,
    decide_after_evaluation,
    decide_after_verification,
    decide_budget,
    decide_refusal,
)
from agentd.loop.goals.evaluator import evaluator_lanes, goal_lanes


def verdict(decision: str, blocker_key: str | None = None) -> Verdict:
    return Verdict(decision=decision, evidence="seen", next_step="do x", blocker_key=blocker_key)  # type: ignore[arg-type]


def goal(**fields: Any) -> GoalState:
    return GoalState("ship it", **fields)


@pytest.mark.parametrize(
    ("before", "action", "changes"),
    [
        (goal(), None, None),
        (goal(token_budget=100, tokens_used=99), None, None),
        (
            goal(token_budget=100, tokens_used=100),
            GoalAction.STOP,
            {
                "status": GoalStatus.BUDGET_LIMITED,
                "pause_reason": "token budget of 100 spent (100 used)",
            },
        ),
        (
            goal(token_budget=100, tokens_used=150, status=GoalStatus.BUDGET_LIMITED, pause_reason="x"),
            GoalAction.STOP,
            {},
        ),
    ],
    ids=["no budget", "under budget", "spent: stop, no wrap-up round", "spent: still stop"],
)
def test_decide_budget(before: GoalState, action: GoalAction | None, changes: dict[str, Any] | None) -> None:
    snapshot = before.copy()
    decision = decide_budget(before)
    assert before == snapshot  # the input is never changed
    if action is None:
        assert decision is None
        return
    assert decision is not None and decision.action is action
    assert decision.goal == dataclasses.replace(snapshot, **(changes or {}))


LIMITS = GoalLimits(blocked_repeats=3)


@pytest.mark.parametrize(
    ("before", "judged", "action", "changes"),
    [
        (
            goal(),
            None,
            GoalAction.PAUSE,
            {"rounds": 1, "status": GoalStatus.PAUSED, "pause_reason": "infra", "user_action": "*"},
        ),
        (goal(), verdict("continue"), GoalAction.CONTINUE, {"rounds": 1, "last_verdict": "*"}),
        (
            goal(blocked_key="k", blocked_count=2),
            verdict("continue"),
            GoalAction.CONTINUE,
            {"rounds": 1, "last_verdict": "*", "blocked_key": None, "blocked_count": 0},
        ),
        (
            goal(),
            verdict("blocked", "no_access"),
            GoalAction.CONTINUE,
            {"rounds": 1, "last_verdict": "*", "blocked_key": "no_access", "blocked_count": 1},
        ),
        (
            goal(blocked_key="other", blocked_count=2),
            verdict("blocked", "no_access"),
            GoalAction.CONTINUE,
            {"rounds": 1, "last_verdict": "*", "blocked_key": "no_access", "blocked_count": 1},
        ),
        (
            goal(blocked_key="no_access", blocked_count=2),
            verdict("blocked", "no_access"),
            GoalAction.PAUSE,
            {
                "rounds": 1,
                "last_verdict": "*",
                "blocked_count": 3,
                "status": GoalStatus.PAUSED,
                "pause_reason": "blocked: no_access",
                "user_action": "do x",
            },
        ),
        (
            goal(),
            verdict("candidate_complete"),
            GoalAction.COMPLETE,
            {"rounds": 1, "last_verdict": "*", "status": GoalStatus.COMPLETE},
        ),
        (
            goal(verify="make test"),
            verdict("candidate_complete"),
            GoalAction.VERIFY,
            {"rounds": 1, "last_verdict": "*"},
        ),
    ],
    ids=[
        "infra",
        "continue",
        "continue clears blocker",
        "blocked once",
        "new blocker",
        "blocked thrice",
        "complete",
        "verify",
    ],
)
def test_decide_after_evaluation(
    before: GoalState, judged: Verdict | None, action: GoalAction, changes: dict[str, Any]
) -> None:
    snapshot = before.copy()
    decision = decide_after_evaluation(before, judged, LIMITS)
    assert before == snapshot
    assert decision.action is action
    for name, value in changes.items():
        got = getattr(decision.goal, name)
        if value == "*":
            assert got, name  # set to something (wording is the message's business)
        else:
            assert got == value, name
    untouched = {f.name for f in dataclasses.fields(GoalState)} - set(changes)
    for name in untouched:
        assert getattr(decision.goal, name) == getattr(snapshot, name), name
    if judged is not None:
        assert decision.goal.last_verdict == judged.wire()


@pytest.mark.parametrize(
    ("passed", "output", "action", "status", "gaps"),
    [
        (True, "ok", GoalAction.COMPLETE, GoalStatus.COMPLETE, []),
        (
            False,
            "  2 failed \n",
            GoalAction.CONTINUE,
            GoalStatus.ACTIVE,
            ["verification `make test` failed: 2 failed"],
        ),
        (False, "", GoalAction.CONTINUE, GoalStatus.ACTIVE, ["verification `make test` failed: (no output)"]),
    ],
)
def test_decide_after_verification(
    passed: bool, output: str, action: GoalAction, status: GoalStatus, gaps: list[str]
) -> None:
    before = goal(verify="make test")
    decision = decide_after_verification(before, passed, output)
    assert before.gaps == []
    assert (decision.action, decision.goal.status, decision.goal.gaps) == (action, status, gaps)


def test_failed_verifications_count_and_pause_the_goal_at_the_cap() -> None:
    """001: "验证基础设施失败或次数达上限可将 goal pause"."""
    limits = GoalLimits(verify_failures_cap=2)
    first = decide_after_verification(goal(verify="make test"), False, "verification timed out", limits)
    assert (first.action, first.goal.verify_failures) == (GoalAction.CONTINUE, 1)
    second = decide_after_verification(first.goal, False, "boom", limits)
    assert (second.action, second.goal.status) == (GoalAction.PAUSE, GoalStatus.PAUSED)
    assert second.goal.pause_reason == "verification failed 2 times in a row"
    passed = decide_after_verification(first.goal, True, "ok", limits)
    assert passed.goal.verify_failures == 0
    assert GoalLimits().verify_failures_cap == 3


def test_the_continuation_carries_objective_plan_gaps_and_next_step() -> None:
    """001: "生成续跑说明（目标摘要、计划引用、验证差距、下一步等）"."""
    state = goal(gaps=["tests fail"], last_verdict={"evidence": "half", "nextStep": "fix tests"})
    text = continuation_text(state, [{"content": "write parser", "status": "in_progress"}])
    for part in ("ship it", "- [in_progress] write parser", "tests fail", "fix tests"):
        assert part in text
    assert "no plan written" in continuation_text(state)


@pytest.mark.parametrize(
    ("status", "paused"),
    [(GoalStatus.ACTIVE, True), (GoalStatus.BUDGET_LIMITED, False), (GoalStatus.COMPLETE, False)],
)
def test_decide_refusal(status: GoalStatus, paused: bool) -> None:
    before = goal(status=status)
    after = decide_refusal(before)
    assert before.status is status
    assert (after.status is GoalStatus.PAUSED) is paused
    assert (after.pause_reason == "refusal") is paused


def test_wrappers_apply_the_decision_in_place() -> None:
    live = goal(token_budget=10, tokens_used=10)
    assert budget_check(live) is GoalAction.STOP
    assert live.status is GoalStatus.BUDGET_LIMITED

    class Judged:
        verdict = None

    same = goal()
    assert after_evaluation(same, Judged()) is GoalAction.PAUSE
    assert same.status is GoalStatus.PAUSED and same.rounds == 1


@pytest.mark.parametrize(
    ("small", "attempts", "expected"),
    [
        (None, 2, ["session", "session"]),  # no small model: the session's model twice
        ("small", 2, ["small", "session"]),  # small model first, then fall back
        ("small", 1, ["small"]),
        (None, 3, ["session", "session", "session"]),
        ("small", 0, []),
    ],
)
def test_evaluator_lanes(small: str | None, attempts: int, expected: list[str]) -> None:
    """Seed 001: "超时 30s；最多试 2 次（先小模型，失败再退到当前会话模型）"."""
    assert evaluator_lanes("session", small, attempts) == expected


def test_two_evaluator_attempts_by_default() -> None:
    assert GoalLimits().attempts == 2
    assert evaluator_lanes("session", None) == ["session", "session"]


@pytest.mark.parametrize(
    ("model", "evaluator", "expected"),
    [
        ("big", None, ["big", "big"]),  # no small model: the session's model, twice
        ("big", "small", ["small", "big"]),
        ("big", "big", ["big", "big"]),  # the same model: asked twice as well
    ],
)
def test_goal_lanes(model: str, evaluator: str | None, expected: list[str]) -> None:
    provider = object()
    lanes = goal_lanes(provider, model, evaluator)  # type: ignore[arg-type]
    assert [m for _, m in lanes] == expected
    assert all(p is provider for p, _ in lanes)
