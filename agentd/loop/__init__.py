"""The public names of `agentd.loop`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.loop.budget import BudgetLimits as BudgetLimits
    from agentd.loop.compaction import CompactionReason as CompactionReason
    from agentd.loop.context import Conversation as Conversation
    from agentd.loop.context import Interjection as Interjection
    from agentd.loop.context import TurnContext as TurnContext
    from agentd.loop.goals.decide import GoalLimits as GoalLimits
    from agentd.loop.goals.decide import GoalState as GoalState
    from agentd.loop.goals.decide import GoalStatus as GoalStatus
    from agentd.loop.goals.evaluator import evaluator_lanes as evaluator_lanes
    from agentd.loop.limits import LoopLimits as LoopLimits
    from agentd.loop.outcome import EndReason as EndReason
    from agentd.loop.outcome import LocalCommandReason as LocalCommandReason
    from agentd.loop.outcome import OutcomeKind as OutcomeKind
    from agentd.loop.outcome import TurnOutcome as TurnOutcome
    from agentd.loop.outcome import stop_reason as stop_reason
    from agentd.loop.prompt import prompt_images as prompt_images
    from agentd.loop.prompt import prompt_text as prompt_text
    from agentd.loop.react.base import run_compaction as run_compaction
    from agentd.loop.react.state import TurnState as TurnState
    from agentd.loop.react.toolrun import execute_tool_round as execute_tool_round
    from agentd.loop.repair import INTERRUPTED_RESULT as INTERRUPTED_RESULT
    from agentd.loop.repair import repair_dangling_tool_calls as repair_dangling_tool_calls
    from agentd.loop.retry import RetryState as RetryState
    from agentd.loop.structured import STRUCTURED_OUTPUT_TOOL as STRUCTURED_OUTPUT_TOOL
    from agentd.loop.structured import OutputSchema as OutputSchema
    from agentd.loop.subagents.limits import SubagentLimits as SubagentLimits
    from agentd.loop.subagents.registry import Subagents as Subagents
    from agentd.loop.subagents.task_tool import TASK_TOOL as TASK_TOOL
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
    from agentd.loop.usage import Price as Price
    from agentd.loop.usage import UsageLedger as UsageLedger

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "BudgetLimits": "agentd.loop.budget",
    "CompactionReason": "agentd.loop.compaction",
    "Conversation": "agentd.loop.context",
    "EndReason": "agentd.loop.outcome",
    "evaluator_lanes": "agentd.loop.goals.evaluator",
    "execute_tool_round": "agentd.loop.react.toolrun",
    "GoalLimits": "agentd.loop.goals.decide",
    "GoalState": "agentd.loop.goals.decide",
    "GoalStatus": "agentd.loop.goals.decide",
    "Interjection": "agentd.loop.context",
    "INTERRUPTED_RESULT": "agentd.loop.repair",
    "LiveTools": "agentd.loop.turn_reminders",
    "LocalCommandReason": "agentd.loop.outcome",
    "LoopLimits": "agentd.loop.limits",
    "McpServerState": "agentd.loop.turn_reminders",
    "opening_message": "agentd.loop.turn_reminders",
    "opening_reminders": "agentd.loop.turn_reminders",
    "OpeningState": "agentd.loop.turn_reminders",
    "OutcomeKind": "agentd.loop.outcome",
    "OutputSchema": "agentd.loop.structured",
    "previous_end_of": "agentd.loop.turn_reminders",
    "PreviousEnd": "agentd.loop.turn_reminders",
    "Price": "agentd.loop.usage",
    "prompt_images": "agentd.loop.prompt",
    "prompt_text": "agentd.loop.prompt",
    "reminder_message": "agentd.loop.turn_reminders",
    "ReminderMemory": "agentd.loop.turn_reminders",
    "repair_dangling_tool_calls": "agentd.loop.repair",
    "RetryState": "agentd.loop.retry",
    "run_compaction": "agentd.loop.react.base",
    "run_compaction_job": "agentd.loop.turn",
    "run_turn": "agentd.loop.turn",
    "stop_reason": "agentd.loop.outcome",
    "STRUCTURED_OUTPUT_TOOL": "agentd.loop.structured",
    "SubagentLimits": "agentd.loop.subagents.limits",
    "Subagents": "agentd.loop.subagents.registry",
    "TASK_TOOL": "agentd.loop.subagents.task_tool",
    "TurnContext": "agentd.loop.context",
    "TurnOpening": "agentd.loop.turn_reminders",
    "TurnOutcome": "agentd.loop.outcome",
    "TurnState": "agentd.loop.react.state",
    "UsageLedger": "agentd.loop.usage",
}


__all__ = [
    "INTERRUPTED_RESULT",
    "STRUCTURED_OUTPUT_TOOL",
    "TASK_TOOL",
    "BudgetLimits",
    "CompactionReason",
    "Conversation",
    "EndReason",
    "GoalLimits",
    "GoalState",
    "GoalStatus",
    "Interjection",
    "LiveTools",
    "LocalCommandReason",
    "LoopLimits",
    "McpServerState",
    "OpeningState",
    "OutcomeKind",
    "OutputSchema",
    "PreviousEnd",
    "Price",
    "ReminderMemory",
    "RetryState",
    "SubagentLimits",
    "Subagents",
    "TurnContext",
    "TurnOpening",
    "TurnOutcome",
    "TurnState",
    "UsageLedger",
    "evaluator_lanes",
    "execute_tool_round",
    "opening_message",
    "opening_reminders",
    "previous_end_of",
    "prompt_images",
    "prompt_text",
    "reminder_message",
    "repair_dangling_tool_calls",
    "run_compaction",
    "run_compaction_job",
    "run_turn",
    "stop_reason",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
