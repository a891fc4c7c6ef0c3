"""The public names of `agentd.loop`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentd.loop.budget import BudgetLimits as BudgetLimits
    from agentd.loop.compaction import CompactionReason as CompactionReason
    from agentd.loop.context import TurnContext as TurnContext
    from agentd.loop.goals.decide import GoalLimits as GoalLimits
    from agentd.loop.goals.evaluator import evaluator_lanes as evaluator_lanes
    from agentd.loop.limits import LoopLimits as LoopLimits
    from agentd.loop.react.base import run_compaction as run_compaction
    from agentd.loop.react.state import TurnState as TurnState
    from agentd.loop.react.toolrun import execute_tool_round as execute_tool_round
    from agentd.loop.retry import RetryState as RetryState
    from agentd.loop.session_state import SessionLoopState as SessionLoopState
    from agentd.loop.structured import STRUCTURED_OUTPUT_TOOL as STRUCTURED_OUTPUT_TOOL
    from agentd.loop.structured import OutputSchema as OutputSchema
    from agentd.loop.subagents.limits import SubagentLimits as SubagentLimits
    from agentd.loop.subagents.registry import Subagents as Subagents
    from agentd.loop.subagents.task_tool import TASK_TOOL as TASK_TOOL
    from agentd.loop.turn import run_bang as run_bang
    from agentd.loop.turn import run_compaction_job as run_compaction_job
    from agentd.loop.turn import run_turn as run_turn
    from agentd.loop.turn_reminders import LiveTools as LiveTools
    from agentd.loop.turn_reminders import McpServerState as McpServerState
    from agentd.loop.turn_reminders import OpeningState as OpeningState
    from agentd.loop.turn_reminders import PreviousEnd as PreviousEnd
    from agentd.loop.turn_reminders import ReminderMemory as ReminderMemory
    from agentd.loop.turn_reminders import TurnOpening as TurnOpening
    from agentd.loop.turn_reminders import opening_message as opening_message
    from agentd.loop.turn_reminders import opening_reminders as opening_reminders
    from agentd.loop.turn_reminders import previous_end_of as previous_end_of
    from agentd.loop.turn_reminders import reminder_message as reminder_message

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "BudgetLimits": "agentd.loop.budget",
    "CompactionReason": "agentd.loop.compaction",
    "evaluator_lanes": "agentd.loop.goals.evaluator",
    "execute_tool_round": "agentd.loop.react.toolrun",
    "GoalLimits": "agentd.loop.goals.decide",
    "LiveTools": "agentd.loop.turn_reminders",
    "LoopLimits": "agentd.loop.limits",
    "McpServerState": "agentd.loop.turn_reminders",
    "opening_message": "agentd.loop.turn_reminders",
    "opening_reminders": "agentd.loop.turn_reminders",
    "OpeningState": "agentd.loop.turn_reminders",
    "OutputSchema": "agentd.loop.structured",
    "previous_end_of": "agentd.loop.turn_reminders",
    "PreviousEnd": "agentd.loop.turn_reminders",
    "reminder_message": "agentd.loop.turn_reminders",
    "ReminderMemory": "agentd.loop.turn_reminders",
    "RetryState": "agentd.loop.retry",
    "run_compaction": "agentd.loop.react.base",
    "run_bang": "agentd.loop.turn",
    "run_compaction_job": "agentd.loop.turn",
    "SessionLoopState": "agentd.loop.session_state",
    "run_turn": "agentd.loop.turn",
    "STRUCTURED_OUTPUT_TOOL": "agentd.loop.structured",
    "SubagentLimits": "agentd.loop.subagents.limits",
    "Subagents": "agentd.loop.subagents.registry",
    "TASK_TOOL": "agentd.loop.subagents.task_tool",
    "TurnContext": "agentd.loop.context",
    "TurnOpening": "agentd.loop.turn_reminders",
    "TurnState": "agentd.loop.react.state",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "STRUCTURED_OUTPUT_TOOL",
    "TASK_TOOL",
    "BudgetLimits",
    "CompactionReason",
    "GoalLimits",
    "LiveTools",
    "LoopLimits",
    "McpServerState",
    "OpeningState",
    "OutputSchema",
    "PreviousEnd",
    "ReminderMemory",
    "RetryState",
    "SessionLoopState",
    "SubagentLimits",
    "Subagents",
    "TurnContext",
    "TurnOpening",
    "TurnState",
    "evaluator_lanes",
    "execute_tool_round",
    "opening_message",
    "opening_reminders",
    "previous_end_of",
    "reminder_message",
    "run_bang",
    "run_compaction",
    "run_compaction_job",
    "run_turn",
]
