"""Sub-agent limits (R-T11): the pure decisions — may this agent spawn a child, how many
tool rounds the child gets, and its budget.

Seed 000: "主会话默认没有轮数上限……只在子代理场景由定义或父代理填充" (the main session has no
turn cap by default; only a sub-agent gets one, filled in by its definition or its parent),
and "子代理没有这只手，所以子代理才有 max_turns" (a sub-agent has no human hand on Esc, so it
gets max_turns). So a child always runs with the headless budget (`BudgetLimits.headless`:
the 50-iteration cap) and with the turn cap its parent asked for, never above the one its
definition sets. Depth and concurrency are bounded per session: a child at the depth limit
gets no `task` tool, and a spawn beyond the concurrency limit is refused readably.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from agentd.loop.budget import BudgetLimits


@dataclass(frozen=True)
class SubagentLimits:
    # How deep children may nest: 1 → only the session's agent spawns children (they get no
    # `task` tool); 2 → children may spawn grandchildren; 0 → no sub-agents at all.
    max_depth: int = 1
    # Children (foreground and background) running at once in one session.
    max_concurrent: int = 4


def can_spawn(depth: int, limits: SubagentLimits) -> bool:
    """An agent at `depth` (the session's agent is 0) may have children."""
    return depth < limits.max_depth


def spawn_refusal(depth: int, running: int, limits: SubagentLimits) -> str | None:
    """Why an agent at `depth` may not start another child now (`running` children already
    run in the session), or None when it may."""
    if not can_spawn(depth, limits):
        return (
            f"sub-agents may nest at most {limits.max_depth} level(s) deep; "
            f"an agent at depth {depth} cannot start another"
        )
    if running >= limits.max_concurrent:
        return (
            f"{running} sub-agents are already running (the limit is {limits.max_concurrent}); "
            "wait for one to finish (task_output with wait=true) before starting another"
        )
    return None


# A child's turn cap when neither its definition nor its parent sets one. 000 leaves the
# number open ("只在子代理场景由定义或父代理填充"); 004's "max_turns = 10" is the seeds' only
# figure for it, and the `task` tool states it to the model.
DEFAULT_CHILD_MAX_TURNS = 10


def child_max_turns(
    requested: int | None, definition_cap: int | None, default: int = DEFAULT_CHILD_MAX_TURNS
) -> int:
    """The tool rounds a child may run — never unbounded. 000: "max_turns 是 Option<usize>，
    默认 None…只在子代理场景由定义或父代理填充": the definition's cap, else the parent's; a
    parent may lower the definition's cap, never raise it; neither set → `default`."""
    if requested is None:
        return definition_cap if definition_cap is not None else default
    if definition_cap is None:
        return requested
    return min(requested, definition_cap)


def child_budget(parent: BudgetLimits) -> BudgetLimits:
    """The parent's gates, plus the headless iteration cap unless a tighter one is set."""
    cap = BudgetLimits.HEADLESS_MAX_ITERATIONS
    if parent.max_iterations is not None:
        cap = min(cap, parent.max_iterations)
    return dataclasses.replace(parent, max_iterations=cap)
