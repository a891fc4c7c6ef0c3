"""The public names of `agentd.loop.goals`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.loop.goals.decide import GoalAction as GoalAction
    from agentd.loop.goals.decide import GoalLimits as GoalLimits
    from agentd.loop.goals.decide import continuation_text as continuation_text
    from agentd.loop.goals.decide import decide_after_evaluation as decide_after_evaluation
    from agentd.loop.goals.decide import decide_after_verification as decide_after_verification
    from agentd.loop.goals.decide import decide_budget as decide_budget
    from agentd.loop.goals.decide import decide_refusal as decide_refusal
    from agentd.loop.goals.decide import with_continuation as with_continuation
    from agentd.loop.goals.evaluator import evaluate as evaluate
    from agentd.loop.goals.evaluator import evaluator_lanes as evaluator_lanes
    from agentd.loop.goals.evaluator import goal_lanes as goal_lanes
    from agentd.loop.goals.evaluator import run_verification as run_verification

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "continuation_text": "agentd.loop.goals.decide",
    "decide_after_evaluation": "agentd.loop.goals.decide",
    "decide_after_verification": "agentd.loop.goals.decide",
    "decide_budget": "agentd.loop.goals.decide",
    "decide_refusal": "agentd.loop.goals.decide",
    "evaluate": "agentd.loop.goals.evaluator",
    "evaluator_lanes": "agentd.loop.goals.evaluator",
    "goal_lanes": "agentd.loop.goals.evaluator",
    "GoalAction": "agentd.loop.goals.decide",
    "GoalLimits": "agentd.loop.goals.decide",
    "run_verification": "agentd.loop.goals.evaluator",
    "with_continuation": "agentd.loop.goals.decide",
}


__all__ = [
    "GoalAction",
    "GoalLimits",
    "continuation_text",
    "decide_after_evaluation",
    "decide_after_verification",
    "decide_budget",
    "decide_refusal",
    "evaluate",
    "evaluator_lanes",
    "goal_lanes",
    "run_verification",
    "with_continuation",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
