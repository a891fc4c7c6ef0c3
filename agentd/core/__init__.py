"""The public names of `agentd.core`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.core import tracing as tracing
    from agentd.core.answers import enqueue_result as enqueue_result
    from agentd.core.answers import prompt_failure as prompt_failure
    from agentd.core.answers import prompt_result as prompt_result
    from agentd.core.codec import decode as decode
    from agentd.core.codec import encode as encode
    from agentd.core.completion import CompletionRequirement as CompletionRequirement
    from agentd.core.conversation import IMAGE_TYPES as IMAGE_TYPES
    from agentd.core.conversation import INTERRUPTED_RESULT as INTERRUPTED_RESULT
    from agentd.core.conversation import Conversation as Conversation
    from agentd.core.conversation import Image as Image
    from agentd.core.conversation import Interjection as Interjection
    from agentd.core.conversation import Message as Message
    from agentd.core.conversation import ReasoningBlock as ReasoningBlock
    from agentd.core.conversation import ToolCall as ToolCall
    from agentd.core.conversation import common_prefix as common_prefix
    from agentd.core.conversation import extends as extends
    from agentd.core.conversation import repair_dangling_tool_calls as repair_dangling_tool_calls
    from agentd.core.cork import defer_flush as defer_flush
    from agentd.core.cork import hold_writes as hold_writes
    from agentd.core.cork import release_writes as release_writes
    from agentd.core.errors import ErrorKind as ErrorKind
    from agentd.core.errors import HarnessError as HarnessError
    from agentd.core.errors import RecoveryHint as RecoveryHint
    from agentd.core.errors import hint as hint
    from agentd.core.events import Event as Event
    from agentd.core.frozen_init import quick_init as quick_init
    from agentd.core.goal import GoalState as GoalState
    from agentd.core.goal import GoalStatus as GoalStatus
    from agentd.core.goal import verdict_next_step as verdict_next_step
    from agentd.core.goal import verdict_wire as verdict_wire
    from agentd.core.hook_payloads import pre_tool_payload as pre_tool_payload
    from agentd.core.hook_payloads import prompt_hook_payload as prompt_hook_payload
    from agentd.core.hook_payloads import stop_hook_payload as stop_hook_payload
    from agentd.core.hook_payloads import subagent_stop_payload as subagent_stop_payload
    from agentd.core.ids import random_hex as random_hex
    from agentd.core.input_limits import limit_exceeded as limit_exceeded
    from agentd.core.input_limits import prompt_bytes as prompt_bytes
    from agentd.core.kinds import TRANSIENT_KINDS as TRANSIENT_KINDS
    from agentd.core.kinds import EventKind as EventKind
    from agentd.core.lane import Lane as Lane
    from agentd.core.log_context import LOG_CONTEXT_FIELDS as LOG_CONTEXT_FIELDS
    from agentd.core.log_context import LogContextFilter as LogContextFilter
    from agentd.core.log_context import bind_log_context as bind_log_context
    from agentd.core.log_context import turn_log_context as turn_log_context
    from agentd.core.loop_records import checkpoint_wire as checkpoint_wire
    from agentd.core.loop_records import cycle_wire as cycle_wire
    from agentd.core.loop_records import repetition_wire as repetition_wire
    from agentd.core.loop_records import retry_bucket_wire as retry_bucket_wire
    from agentd.core.loop_records import retry_decision_wire as retry_decision_wire
    from agentd.core.loop_records import retry_snapshot_wire as retry_snapshot_wire
    from agentd.core.loop_records import shell_exit_code as shell_exit_code
    from agentd.core.modes import PermissionMode as PermissionMode
    from agentd.core.modes import SessionModes as SessionModes
    from agentd.core.modes import SqliteSynchronous as SqliteSynchronous
    from agentd.core.outcome import LOCAL_COMMAND_PREFIX as LOCAL_COMMAND_PREFIX
    from agentd.core.outcome import BudgetStopKind as BudgetStopKind
    from agentd.core.outcome import DegenerationReason as DegenerationReason
    from agentd.core.outcome import EndReason as EndReason
    from agentd.core.outcome import LocalCommandReason as LocalCommandReason
    from agentd.core.outcome import LoopReason as LoopReason
    from agentd.core.outcome import OutcomeKind as OutcomeKind
    from agentd.core.outcome import Reason as Reason
    from agentd.core.outcome import StationarityReason as StationarityReason
    from agentd.core.outcome import TurnOutcome as TurnOutcome
    from agentd.core.outcome import parse_reason as parse_reason
    from agentd.core.outcome import reported_as as reported_as
    from agentd.core.outcome import stop_reason as stop_reason
    from agentd.core.permission import PermissionAnswer as PermissionAnswer
    from agentd.core.permission import PermissionOptionKind as PermissionOptionKind
    from agentd.core.permission import PermissionOutcome as PermissionOutcome
    from agentd.core.prompt import MAX_PROMPT_TEXT as MAX_PROMPT_TEXT
    from agentd.core.prompt import prompt_images as prompt_images
    from agentd.core.prompt import prompt_text as prompt_text
    from agentd.core.provider import Provider as Provider
    from agentd.core.provider import ProviderRequest as ProviderRequest
    from agentd.core.provider import ReasoningBlockComplete as ReasoningBlockComplete
    from agentd.core.provider import ReasoningDelta as ReasoningDelta
    from agentd.core.provider import Stop as Stop
    from agentd.core.provider import StopReason as StopReason
    from agentd.core.provider import StreamBatches as StreamBatches
    from agentd.core.provider import StreamEvent as StreamEvent
    from agentd.core.provider import TextDelta as TextDelta
    from agentd.core.provider import ToolCallComplete as ToolCallComplete
    from agentd.core.provider import ToolCallDelta as ToolCallDelta
    from agentd.core.provider import ToolSpec as ToolSpec
    from agentd.core.provider import Usage as Usage
    from agentd.core.provider import events_of as events_of
    from agentd.core.provider import one_per_batch as one_per_batch
    from agentd.core.task_history import EarlierTasks as EarlierTasks
    from agentd.core.task_history import replay as replay
    from agentd.core.task_notice import CompletionSource as CompletionSource
    from agentd.core.task_notice import TaskCompletion as TaskCompletion
    from agentd.core.task_notice import TaskEnd as TaskEnd
    from agentd.core.task_notice import TaskKind as TaskKind
    from agentd.core.task_notice import TaskStart as TaskStart
    from agentd.core.task_notice import agent_report_output as agent_report_output
    from agentd.core.task_notice import agent_result_output as agent_result_output
    from agentd.core.task_notice import agent_started_output as agent_started_output
    from agentd.core.task_notice import output_call as output_call
    from agentd.core.task_notice import render_reminder as render_reminder
    from agentd.core.task_notice import stop_runners as stop_runners
    from agentd.core.task_notice import wait_for_any as wait_for_any
    from agentd.core.tool_call_ids import ToolCallIds as ToolCallIds
    from agentd.core.turn_summary import GoalRound as GoalRound
    from agentd.core.turn_summary import TurnSummary as TurnSummary
    from agentd.core.turn_summary import compaction_record as compaction_record
    from agentd.core.updates import REQUEST_DIGEST as REQUEST_DIGEST
    from agentd.core.updates import ROUTED_FROM as ROUTED_FROM
    from agentd.core.updates import AgentText as AgentText
    from agentd.core.updates import AgentTextChunk as AgentTextChunk
    from agentd.core.updates import BadPayload as BadPayload
    from agentd.core.updates import CompactionCompleted as CompactionCompleted
    from agentd.core.updates import CompactionProgress as CompactionProgress
    from agentd.core.updates import CompactionStatus as CompactionStatus
    from agentd.core.updates import CompletionRecovery as CompletionRecovery
    from agentd.core.updates import ConfigOptionsChanged as ConfigOptionsChanged
    from agentd.core.updates import FileReverted as FileReverted
    from agentd.core.updates import GoalChanged as GoalChanged
    from agentd.core.updates import ModeChanged as ModeChanged
    from agentd.core.updates import Notice as Notice
    from agentd.core.updates import NoticeSeverity as NoticeSeverity
    from agentd.core.updates import PermissionRequested as PermissionRequested
    from agentd.core.updates import PermissionResolved as PermissionResolved
    from agentd.core.updates import PlanModeChanged as PlanModeChanged
    from agentd.core.updates import PlanUpdated as PlanUpdated
    from agentd.core.updates import PromptHooksRan as PromptHooksRan
    from agentd.core.updates import QueueChanged as QueueChanged
    from agentd.core.updates import RetryDecided as RetryDecided
    from agentd.core.updates import Rewound as Rewound
    from agentd.core.updates import SessionInfoChanged as SessionInfoChanged
    from agentd.core.updates import StopHooksRan as StopHooksRan
    from agentd.core.updates import SubagentUpdate as SubagentUpdate
    from agentd.core.updates import ToolCallAnnounced as ToolCallAnnounced
    from agentd.core.updates import ToolCallFinished as ToolCallFinished
    from agentd.core.updates import ToolCallProgress as ToolCallProgress
    from agentd.core.updates import ToolCallStarted as ToolCallStarted
    from agentd.core.updates import ToolCallStatus as ToolCallStatus
    from agentd.core.updates import TurnEnded as TurnEnded
    from agentd.core.updates import TurnStarted as TurnStarted
    from agentd.core.updates import Unparsed as Unparsed
    from agentd.core.updates import Update as Update
    from agentd.core.updates import UsageReported as UsageReported
    from agentd.core.updates import UserMessage as UserMessage
    from agentd.core.updates import text_content as text_content
    from agentd.core.usage import Price as Price
    from agentd.core.usage import UsageLedger as UsageLedger
    from agentd.core.usage import UsageTotals as UsageTotals

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "verdict_next_step": "agentd.core.goal",
    "verdict_wire": "agentd.core.goal",
    "OutcomeKind": "agentd.core.outcome",
    "EndReason": "agentd.core.outcome",
    "LocalCommandReason": "agentd.core.outcome",
    "TurnOutcome": "agentd.core.outcome",
    "quick_init": "agentd.core.frozen_init",
    "stop_reason": "agentd.core.outcome",
    "reported_as": "agentd.core.outcome",
    "parse_reason": "agentd.core.outcome",
    "Reason": "agentd.core.outcome",
    "LOCAL_COMMAND_PREFIX": "agentd.core.outcome",
    "BudgetStopKind": "agentd.core.outcome",
    "StationarityReason": "agentd.core.outcome",
    "DegenerationReason": "agentd.core.outcome",
    "LoopReason": "agentd.core.outcome",
    "Price": "agentd.core.usage",
    "UsageTotals": "agentd.core.usage",
    "UsageLedger": "agentd.core.usage",
    "GoalRound": "agentd.core.turn_summary",
    "checkpoint_wire": "agentd.core.loop_records",
    "cycle_wire": "agentd.core.loop_records",
    "repetition_wire": "agentd.core.loop_records",
    "retry_bucket_wire": "agentd.core.loop_records",
    "retry_decision_wire": "agentd.core.loop_records",
    "retry_snapshot_wire": "agentd.core.loop_records",
    "shell_exit_code": "agentd.core.loop_records",
    "agent_report_output": "agentd.core.task_notice",
    "agent_result_output": "agentd.core.task_notice",
    "agent_started_output": "agentd.core.task_notice",
    "pre_tool_payload": "agentd.core.hook_payloads",
    "prompt_hook_payload": "agentd.core.hook_payloads",
    "stop_hook_payload": "agentd.core.hook_payloads",
    "subagent_stop_payload": "agentd.core.hook_payloads",
    "TurnSummary": "agentd.core.turn_summary",
    "compaction_record": "agentd.core.turn_summary",
    "prompt_text": "agentd.core.prompt",
    "prompt_images": "agentd.core.prompt",
    "MAX_PROMPT_TEXT": "agentd.core.prompt",
    "INTERRUPTED_RESULT": "agentd.core.conversation",
    "repair_dangling_tool_calls": "agentd.core.conversation",
    "Conversation": "agentd.core.conversation",
    "Interjection": "agentd.core.conversation",
    "GoalState": "agentd.core.goal",
    "GoalStatus": "agentd.core.goal",
    "prompt_result": "agentd.core.answers",
    "prompt_failure": "agentd.core.answers",
    "enqueue_result": "agentd.core.answers",
    "BadPayload": "agentd.core.updates",
    "CompletionRecovery": "agentd.core.updates",
    "ConfigOptionsChanged": "agentd.core.updates",
    "FileReverted": "agentd.core.updates",
    "GoalChanged": "agentd.core.updates",
    "ModeChanged": "agentd.core.updates",
    "PermissionRequested": "agentd.core.updates",
    "PermissionResolved": "agentd.core.updates",
    "PlanModeChanged": "agentd.core.updates",
    "PromptHooksRan": "agentd.core.updates",
    "QueueChanged": "agentd.core.updates",
    "RetryDecided": "agentd.core.updates",
    "Rewound": "agentd.core.updates",
    "SessionInfoChanged": "agentd.core.updates",
    "StopHooksRan": "agentd.core.updates",
    "SubagentUpdate": "agentd.core.updates",
    "ToolCallStatus": "agentd.core.updates",
    "TurnEnded": "agentd.core.updates",
    "TurnStarted": "agentd.core.updates",
    "Unparsed": "agentd.core.updates",
    "Update": "agentd.core.updates",
    "UsageReported": "agentd.core.updates",
    "REQUEST_DIGEST": "agentd.core.updates",
    "ROUTED_FROM": "agentd.core.updates",
    "decode": "agentd.core.codec",
    "encode": "agentd.core.codec",
    "TRANSIENT_KINDS": "agentd.core.kinds",
    "AgentText": "agentd.core.updates",
    "AgentTextChunk": "agentd.core.updates",
    "bind_log_context": "agentd.core.log_context",
    "turn_log_context": "agentd.core.log_context",
    "common_prefix": "agentd.core.conversation",
    "CompactionCompleted": "agentd.core.updates",
    "CompactionProgress": "agentd.core.updates",
    "CompactionStatus": "agentd.core.updates",
    "CompletionRequirement": "agentd.core.completion",
    "CompletionSource": "agentd.core.task_notice",
    "EarlierTasks": "agentd.core.task_history",
    "ErrorKind": "agentd.core.errors",
    "Event": "agentd.core.events",
    "EventKind": "agentd.core.kinds",
    "extends": "agentd.core.conversation",
    "HarnessError": "agentd.core.errors",
    "hint": "agentd.core.errors",
    "Image": "agentd.core.conversation",
    "IMAGE_TYPES": "agentd.core.conversation",
    "Lane": "agentd.core.lane",
    "limit_exceeded": "agentd.core.input_limits",
    "LOG_CONTEXT_FIELDS": "agentd.core.log_context",
    "LogContextFilter": "agentd.core.log_context",
    "Message": "agentd.core.conversation",
    "Notice": "agentd.core.updates",
    "NoticeSeverity": "agentd.core.updates",
    "output_call": "agentd.core.task_notice",
    "PermissionAnswer": "agentd.core.permission",
    "PermissionMode": "agentd.core.modes",
    "PermissionOptionKind": "agentd.core.permission",
    "PermissionOutcome": "agentd.core.permission",
    "PlanUpdated": "agentd.core.updates",
    "prompt_bytes": "agentd.core.input_limits",
    "Provider": "agentd.core.provider",
    "ProviderRequest": "agentd.core.provider",
    "ReasoningBlock": "agentd.core.conversation",
    "ReasoningBlockComplete": "agentd.core.provider",
    "ReasoningDelta": "agentd.core.provider",
    "RecoveryHint": "agentd.core.errors",
    "render_reminder": "agentd.core.task_notice",
    "replay": "agentd.core.task_history",
    "SessionModes": "agentd.core.modes",
    "SqliteSynchronous": "agentd.core.modes",
    "Stop": "agentd.core.provider",
    "stop_runners": "agentd.core.task_notice",
    "StopReason": "agentd.core.provider",
    "StreamBatches": "agentd.core.provider",
    "events_of": "agentd.core.provider",
    "one_per_batch": "agentd.core.provider",
    "StreamEvent": "agentd.core.provider",
    "TaskCompletion": "agentd.core.task_notice",
    "TaskEnd": "agentd.core.task_notice",
    "TaskKind": "agentd.core.task_notice",
    "TaskStart": "agentd.core.task_notice",
    "text_content": "agentd.core.updates",
    "TextDelta": "agentd.core.provider",
    "ToolCall": "agentd.core.conversation",
    "ToolCallAnnounced": "agentd.core.updates",
    "ToolCallComplete": "agentd.core.provider",
    "ToolCallDelta": "agentd.core.provider",
    "ToolCallFinished": "agentd.core.updates",
    "ToolCallIds": "agentd.core.tool_call_ids",
    "defer_flush": "agentd.core.cork",
    "hold_writes": "agentd.core.cork",
    "release_writes": "agentd.core.cork",
    "random_hex": "agentd.core.ids",
    "ToolCallProgress": "agentd.core.updates",
    "ToolCallStarted": "agentd.core.updates",
    "ToolSpec": "agentd.core.provider",
    "Usage": "agentd.core.provider",
    "UserMessage": "agentd.core.updates",
    "wait_for_any": "agentd.core.task_notice",
}


__all__ = [
    "IMAGE_TYPES",
    "INTERRUPTED_RESULT",
    "LOCAL_COMMAND_PREFIX",
    "LOG_CONTEXT_FIELDS",
    "MAX_PROMPT_TEXT",
    "REQUEST_DIGEST",
    "ROUTED_FROM",
    "TRANSIENT_KINDS",
    "AgentText",
    "AgentTextChunk",
    "BadPayload",
    "BudgetStopKind",
    "CompactionCompleted",
    "CompactionProgress",
    "CompactionStatus",
    "CompletionRecovery",
    "CompletionRequirement",
    "CompletionSource",
    "ConfigOptionsChanged",
    "Conversation",
    "DegenerationReason",
    "EarlierTasks",
    "EndReason",
    "ErrorKind",
    "Event",
    "EventKind",
    "FileReverted",
    "GoalChanged",
    "GoalRound",
    "GoalState",
    "GoalStatus",
    "HarnessError",
    "Image",
    "Interjection",
    "Lane",
    "LocalCommandReason",
    "LogContextFilter",
    "LoopReason",
    "Message",
    "ModeChanged",
    "Notice",
    "NoticeSeverity",
    "OutcomeKind",
    "PermissionAnswer",
    "PermissionMode",
    "PermissionOptionKind",
    "PermissionOutcome",
    "PermissionRequested",
    "PermissionResolved",
    "PlanModeChanged",
    "PlanUpdated",
    "Price",
    "PromptHooksRan",
    "Provider",
    "ProviderRequest",
    "QueueChanged",
    "Reason",
    "ReasoningBlock",
    "ReasoningBlockComplete",
    "ReasoningDelta",
    "RecoveryHint",
    "RetryDecided",
    "Rewound",
    "SessionInfoChanged",
    "SessionModes",
    "SqliteSynchronous",
    "StationarityReason",
    "Stop",
    "StopHooksRan",
    "StopReason",
    "StreamBatches",
    "StreamEvent",
    "SubagentUpdate",
    "TaskCompletion",
    "TaskEnd",
    "TaskKind",
    "TaskStart",
    "TextDelta",
    "ToolCall",
    "ToolCallAnnounced",
    "ToolCallComplete",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallIds",
    "ToolCallProgress",
    "ToolCallStarted",
    "ToolCallStatus",
    "ToolSpec",
    "TurnEnded",
    "TurnOutcome",
    "TurnStarted",
    "TurnSummary",
    "Unparsed",
    "Update",
    "Usage",
    "UsageLedger",
    "UsageReported",
    "UsageTotals",
    "UserMessage",
    "agent_report_output",
    "agent_result_output",
    "agent_started_output",
    "bind_log_context",
    "checkpoint_wire",
    "common_prefix",
    "compaction_record",
    "cycle_wire",
    "decode",
    "defer_flush",
    "encode",
    "enqueue_result",
    "events_of",
    "extends",
    "hint",
    "hold_writes",
    "limit_exceeded",
    "one_per_batch",
    "output_call",
    "parse_reason",
    "pre_tool_payload",
    "prompt_bytes",
    "prompt_failure",
    "prompt_hook_payload",
    "prompt_images",
    "prompt_result",
    "prompt_text",
    "quick_init",
    "random_hex",
    "release_writes",
    "render_reminder",
    "repair_dangling_tool_calls",
    "repetition_wire",
    "replay",
    "reported_as",
    "retry_bucket_wire",
    "retry_decision_wire",
    "retry_snapshot_wire",
    "shell_exit_code",
    "stop_hook_payload",
    "stop_reason",
    "stop_runners",
    "subagent_stop_payload",
    "text_content",
    "tracing",
    "turn_log_context",
    "verdict_next_step",
    "verdict_wire",
    "wait_for_any",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
