"""Sub-agent limits (R-T11): the pure decisions of `agentd/loop/subagents/limits.py`.

Seed 000: "主会话默认没有轮数上限……只在子代理场景由定义或父代理填充" and "子代理没有这只手，
所以子代理才有 max_turns" — a child always runs bounded: the turn cap its parent asks for,
never above its definition's, inside the headless budget; depth and concurrency per session.
"""

from __future__ import annotations

import pytest

from agentd.loop.budget import BudgetLimits
from agentd.loop.subagents.limits import (
    DEFAULT_CHILD_MAX_TURNS,
    SubagentLimits,
    can_spawn,
    child_budget,
    child_max_turns,
    spawn_refusal,
)


@pytest.mark.parametrize(
    ("max_depth", "depth", "allowed"),
    [(0, 0, False), (1, 0, True), (1, 1, False), (2, 1, True), (2, 2, False)],
)
def test_depth_limit(max_depth: int, depth: int, allowed: bool) -> None:
    assert can_spawn(depth, SubagentLimits(max_depth=max_depth)) is allowed


def test_spawn_refusal_names_the_limit_that_refuses() -> None:
    limits = SubagentLimits(max_depth=1, max_concurrent=2)
    assert spawn_refusal(0, 1, limits) is None
    too_deep = spawn_refusal(1, 0, limits)
    assert too_deep is not None and "at most 1 level" in too_deep and "depth 1" in too_deep
    too_many = spawn_refusal(0, 2, limits)
    assert too_many is not None and "2 sub-agents are already running (the limit is 2)" in too_many
    # depth is judged first: a child past the depth limit hears about depth, not concurrency
    deep_and_busy = spawn_refusal(1, 2, limits)
    assert deep_and_busy is not None and "deep" in deep_and_busy


@pytest.mark.parametrize(
    ("requested", "cap", "expected"),
    [(None, None, DEFAULT_CHILD_MAX_TURNS), (5, None, 5), (None, 3, 3), (5, 3, 3), (2, 3, 2)],
)
def test_child_turn_cap_is_the_definitions_else_the_parents_never_none(
    requested: int | None, cap: int | None, expected: int
) -> None:
    """000: "max_turns 是 Option<usize>，默认 None…只在子代理场景由定义或父代理填充"."""
    assert child_max_turns(requested, cap) == expected
    assert child_max_turns(None, None, default=7) == 7


def test_child_budget_is_headless_unless_the_parent_is_tighter() -> None:
    interactive = BudgetLimits(idle_progress_s=10.0, token_budget=1000)
    child = child_budget(interactive)
    assert (
        child.max_iterations == BudgetLimits.HEADLESS_MAX_ITERATIONS == BudgetLimits.headless().max_iterations
    )
    assert (child.idle_progress_s, child.token_budget) == (10.0, 1000)  # the other gates are kept
    assert child_budget(BudgetLimits(max_iterations=7)).max_iterations == 7
    assert (
        child_budget(BudgetLimits(max_iterations=500)).max_iterations == BudgetLimits.HEADLESS_MAX_ITERATIONS
    )
