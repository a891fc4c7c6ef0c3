"""Typed updates: one value type for every kind of session event (`agentd/core/kinds.py`).

The loop and the session build these and emit them (`Journal.emit(update)`); the one codec
(`agentd/core/codec.py`) turns them into the bytes stored and sent, once, and reads stored
payloads back. Each value's `payload()` is its stored shape: the ACP `session/update` for
what clients are shown as such, the `_agentd/event` payload for the rest — with the exact
keys, order and values of the events already in the store, so existing databases replay
byte for byte.
"""

from __future__ import annotations

from agentd.core.task_notice import TaskCompletion, TaskStart
from agentd.core.updates.messages import (
    ROUTED_FROM,
    AgentText,
    AgentTextChunk,
    CompactionCompleted,
    CompactionProgress,
    CompactionStatus,
    Notice,
    NoticeSeverity,
    PlanUpdated,
    UserMessage,
)
from agentd.core.updates.session import (
    ConfigOptionsChanged,
    FileReverted,
    ModeChanged,
    PermissionRequested,
    PermissionResolved,
    PlanModeChanged,
    QueueChanged,
    Rewound,
    SessionInfoChanged,
)
from agentd.core.updates.tool_calls import (
    SubagentUpdate,
    ToolCallAnnounced,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
    ToolCallStatus,
    text_content,
)
from agentd.core.updates.turn import (
    REQUEST_DIGEST,
    CompletionRecovery,
    GoalChanged,
    PromptHooksRan,
    RetryDecided,
    StopHooksRan,
    TurnEnded,
    TurnStarted,
    UsageReported,
)
from agentd.core.updates.wire import BadPayload, Unparsed

# Every value a journal takes: mypy --strict keeps plain dicts out of the event path.
Update = (
    UserMessage
    | AgentText
    | AgentTextChunk
    | ToolCallAnnounced
    | ToolCallStarted
    | ToolCallProgress
    | ToolCallFinished
    | SubagentUpdate
    | PlanUpdated
    | CompactionProgress
    | CompactionCompleted
    | Notice
    | RetryDecided
    | UsageReported
    | CompletionRecovery
    | GoalChanged
    | StopHooksRan
    | PromptHooksRan
    | QueueChanged
    | ModeChanged
    | PlanModeChanged
    | ConfigOptionsChanged
    | SessionInfoChanged
    | TurnStarted
    | TurnEnded
    | PermissionRequested
    | PermissionResolved
    | TaskCompletion
    | TaskStart
    | Rewound
    | FileReverted
    | Unparsed
)

__all__ = [
    "REQUEST_DIGEST",
    "ROUTED_FROM",
    "AgentText",
    "AgentTextChunk",
    "BadPayload",
    "CompactionCompleted",
    "CompactionProgress",
    "CompactionStatus",
    "CompletionRecovery",
    "ConfigOptionsChanged",
    "FileReverted",
    "GoalChanged",
    "ModeChanged",
    "Notice",
    "NoticeSeverity",
    "PermissionRequested",
    "PermissionResolved",
    "PlanModeChanged",
    "PlanUpdated",
    "PromptHooksRan",
    "QueueChanged",
    "RetryDecided",
    "Rewound",
    "SessionInfoChanged",
    "StopHooksRan",
    "SubagentUpdate",
    "TaskCompletion",
    "TaskStart",
    "ToolCallAnnounced",
    "ToolCallFinished",
    "ToolCallProgress",
    "ToolCallStarted",
    "ToolCallStatus",
    "TurnEnded",
    "TurnStarted",
    "Unparsed",
    "Update",
    "UsageReported",
    "UserMessage",
    "text_content",
]
