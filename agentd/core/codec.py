"""The one codec of session events: a typed update (`agentd/core/updates/`) to the bytes the
store holds and the wire embeds, and stored bytes back to a typed update.

`encode` runs once per event (`Event.data`); the writer stores those bytes and the live
paths and frames embed them as they are. `decode` is total over what databases hold: a
payload no typed update reads back byte for byte (an older server's shape) stays an
`Unparsed` value holding it, so `encode(decode(kind, data)) == data` for every stored row.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from agentd.core.kinds import EventKind
from agentd.core.updates import (
    AgentText,
    AgentTextChunk,
    CompactionCompleted,
    CompactionProgress,
    CompletionRecovery,
    ConfigOptionsChanged,
    FileReverted,
    GoalChanged,
    ModeChanged,
    Notice,
    PermissionRequested,
    PermissionResolved,
    PlanModeChanged,
    PlanUpdated,
    PromptHooksRan,
    QueueChanged,
    RetryDecided,
    Rewound,
    SessionInfoChanged,
    StopHooksRan,
    SubagentUpdate,
    TaskCompletion,
    TaskStart,
    ToolCallAnnounced,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
    TurnEnded,
    TurnStarted,
    Unparsed,
    Update,
    UsageReported,
    UserMessage,
)

Reader = Callable[[Mapping[str, Any]], Update]

# Each kind's readers, tried in order; the first that reads the payload back exactly wins.
_READERS: dict[EventKind, tuple[Reader, ...]] = {
    EventKind.USER_MESSAGE: (UserMessage.from_payload,),
    EventKind.AGENT_MESSAGE: (AgentText.from_payload,),
    EventKind.AGENT_THOUGHT: (functools.partial(AgentText.from_payload, thought=True),),
    EventKind.TOOL_CALL: (ToolCallAnnounced.from_payload,),
    EventKind.TOOL_CALL_UPDATE: (
        ToolCallStarted.from_payload,
        ToolCallFinished.from_payload,
        SubagentUpdate.from_payload,
    ),
    EventKind.PLAN: (PlanUpdated.from_payload,),
    EventKind.COMPACTION: (CompactionCompleted.from_payload,),
    EventKind.RETRY: (RetryDecided.from_payload,),
    EventKind.NOTICE: (Notice.from_payload,),
    EventKind.USAGE: (UsageReported.from_payload,),
    EventKind.COMPLETION_RECOVERY: (CompletionRecovery.from_payload,),
    EventKind.GOAL: (GoalChanged.from_payload,),
    EventKind.STOP_HOOKS: (StopHooksRan.from_payload,),
    EventKind.PROMPT_HOOKS: (PromptHooksRan.from_payload,),
    EventKind.QUEUE_UPDATE: (QueueChanged.from_payload,),
    EventKind.MODE_CHANGED: (ModeChanged.from_payload,),
    EventKind.PLAN_MODE: (PlanModeChanged.from_payload,),
    EventKind.CONFIG_OPTIONS: (ConfigOptionsChanged.from_payload,),
    EventKind.SESSION_INFO: (SessionInfoChanged.from_payload,),
    EventKind.TURN_STARTED: (TurnStarted.from_payload,),
    EventKind.TURN_ENDED: (TurnEnded.from_payload,),
    EventKind.PERMISSION_REQUESTED: (PermissionRequested.from_payload,),
    EventKind.PERMISSION_RESOLVED: (PermissionResolved.from_payload,),
    EventKind.BACKGROUND_TASK: (TaskCompletion.from_payload,),
    EventKind.BACKGROUND_TASK_STARTED: (TaskStart.from_payload,),
    EventKind.REWOUND: (Rewound.from_payload,),
    EventKind.FILE_REVERTED: (FileReverted.from_payload,),
    EventKind.AGENT_MESSAGE_CHUNK: (AgentTextChunk.from_payload,),
    EventKind.AGENT_THOUGHT_CHUNK: (functools.partial(AgentTextChunk.from_payload, thought=True),),
    EventKind.TOOL_CALL_PROGRESS: (
        ToolCallProgress.from_payload,
        functools.partial(SubagentUpdate.from_payload, transient=True),
    ),
    EventKind.COMPACTION_PROGRESS: (CompactionProgress.from_payload,),
}

# What a reader raises on a payload of another shape.
_MISREAD = (ValueError, KeyError, TypeError, IndexError, AttributeError)


def encode(update: Update, payload: Mapping[str, Any] | None = None) -> bytes:
    """The update's stored (and sent) bytes: its payload (`payload`, when the caller built
    it already), as orjson writes it."""
    return orjson.dumps(update.payload() if payload is None else payload)


def decode(kind: EventKind, data: bytes | str | Mapping[str, Any]) -> Update:
    """The typed update a stored payload (its bytes, or the JSON column's value) holds."""
    if isinstance(data, Mapping):
        payload, raw = data, orjson.dumps(data)
    else:
        loaded = orjson.loads(data)
        if not isinstance(loaded, dict):
            raise ValueError(f"a {kind.value} payload must be a JSON object, got {type(loaded).__name__}")
        payload, raw = loaded, data.encode() if isinstance(data, str) else data
    for read in _READERS[kind]:
        try:
            update = read(payload)
        except _MISREAD:
            continue
        if update.kind is kind and encode(update) == raw:
            return update
    return Unparsed(kind, payload)
