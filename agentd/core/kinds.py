"""The kinds of session events (`agentd/core/events.py`) and which of them are transient.

Apart from the events themselves so the typed update values (`agentd/core/updates/`) can
name their kind without importing the `Event` that carries them.
"""

from __future__ import annotations

from enum import StrEnum


class EventKind(StrEnum):
    # durable
    USER_MESSAGE = "user_message"  # {messageId, content: [ContentBlock]}
    AGENT_MESSAGE = "agent_message"  # final text of one assistant message {messageId, text}
    AGENT_THOUGHT = "agent_thought"  # final reasoning {messageId, text}
    TOOL_CALL = "tool_call"  # ACP `tool_call` update dict
    TOOL_CALL_UPDATE = "tool_call_update"  # ACP `tool_call_update` dict
    PLAN = "plan"  # ACP `plan` update dict (always the complete plan)
    COMPACTION = "compaction"  # {update: ACP compaction_update, replaced: [messages]}
    RETRY = "retry"  # a retry-bucket decision {decision, bucket, attempt, limit, delaySeconds, reason, error}
    NOTICE = "notice"  # ACP notice {severity, title} (budget stops, recovery exhausted, ...)
    USAGE = "usage"  # {used, size, cost?, prompt: ledger}
    COMPLETION_RECOVERY = "completion_recovery"  # {tool, attempt, maxRetries, delaySeconds}
    GOAL = "goal"  # the goal's state after a change or a verdict
    STOP_HOOKS = "stop_hooks"  # {reentries, verdicts}
    PROMPT_HOOKS = "prompt_hooks"  # {verdicts}: the user_prompt_submit hooks asked at a turn's start
    QUEUE_UPDATE = "queue_update"  # {queue: [entries]} — the whole visible queue after a change
    MODE_CHANGED = "mode_changed"  # {modeId, permissionMode, plan}
    PLAN_MODE = "plan_mode"  # {plan}: the plan gate turned on or off
    CONFIG_OPTIONS = "config_options"  # {configOptions}: the full set after mode/model/agent changed
    SESSION_INFO = "session_info"  # {title, updatedAt}
    TURN_STARTED = "turn_started"  # {turnId, promptId, kind, source, requestId?, messageIndex?}
    TURN_ENDED = "turn_ended"  # {turnId, promptId, outcome, stopReason, reason?, error?}
    PERMISSION_REQUESTED = "permission_requested"  # {requestId, toolCall, options}
    PERMISSION_RESOLVED = "permission_resolved"  # {requestId, outcome, optionId?}
    BACKGROUND_TASK = "background_task"  # a background task finished (agentd/core/task_notice.py)
    BACKGROUND_TASK_STARTED = "background_task_started"  # {taskId, taskKind, summary, startedAt, turnId}
    REWOUND = "rewound"  # {turnId, files, restored, removed, notRestored, messages, turnsUndone}
    FILE_REVERTED = "file_reverted"  # {path, reverted, turnId}: `_agentd/session/revert_file`
    # transient
    AGENT_MESSAGE_CHUNK = "agent_message_chunk"  # {messageId, text}
    AGENT_THOUGHT_CHUNK = "agent_thought_chunk"  # {messageId, text}
    TOOL_CALL_PROGRESS = "tool_call_progress"  # ACP `tool_call_update` with streamed output
    COMPACTION_PROGRESS = "compaction_progress"  # ACP `compaction_update` (in_progress / failed)


TRANSIENT_KINDS = frozenset(
    {
        EventKind.AGENT_MESSAGE_CHUNK,
        EventKind.AGENT_THOUGHT_CHUNK,
        EventKind.TOOL_CALL_PROGRESS,
        EventKind.COMPACTION_PROGRESS,
    }
)
