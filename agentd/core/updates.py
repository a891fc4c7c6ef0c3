"""Typed domain events for what a turn shows the client: tool calls, plans, compaction,
notices and the user input a turn writes.

The loop builds one of these and emits `update.kind` with `update.payload()`; it never writes
a wire dict itself. The payloads are the ACP `session/update` shapes clients receive, and they
are stored as they are: each `payload()` keeps the exact keys, order and values of the events
already in the store, so existing databases replay byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from agentd.core.events import EventKind


class ToolCallStatus(StrEnum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"


class CompactionStatus(StrEnum):
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


def text_content(text: str) -> dict[str, Any]:
    """A tool-call content item holding plain text."""
    return {"type": "content", "content": {"type": "text", "text": text}}


@dataclass(frozen=True)
class ToolCallAnnounced:
    """A tool call the model asked for (ACP `tool_call`), before it is approved or run."""

    kind: ClassVar[EventKind] = EventKind.TOOL_CALL

    tool_call_id: str
    title: str
    tool_kind: str  # the tool's ACP kind ("read", "edit", "execute", …, or "other")
    raw_input: Any
    locations: Sequence[dict[str, Any]] = ()
    status: ToolCallStatus = ToolCallStatus.PENDING

    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "sessionUpdate": "tool_call",
            "toolCallId": self.tool_call_id,
            "title": self.title,
            "kind": self.tool_kind,
            "status": self.status.value,
            "rawInput": self.raw_input,
        }
        if self.locations:
            data["locations"] = list(self.locations)
        return data

    def permission_request(self) -> dict[str, Any]:
        """The `toolCall` of a permission request: the announcement without `sessionUpdate`."""
        return {k: v for k, v in self.payload().items() if k != "sessionUpdate"}


@dataclass(frozen=True)
class ToolCallStarted:
    """The approved call started running (ACP `tool_call_update`, in_progress)."""

    kind: ClassVar[EventKind] = EventKind.TOOL_CALL_UPDATE

    tool_call_id: str

    def payload(self) -> dict[str, Any]:
        return {
            "sessionUpdate": "tool_call_update",
            "toolCallId": self.tool_call_id,
            "status": ToolCallStatus.IN_PROGRESS.value,
        }


@dataclass(frozen=True)
class ToolCallProgress:
    """Output so far of a running call (transient; an ACP update replaces the shown content)."""

    kind: ClassVar[EventKind] = EventKind.TOOL_CALL_PROGRESS

    tool_call_id: str
    content: Sequence[dict[str, Any]]

    @classmethod
    def text(cls, tool_call_id: str, text: str) -> ToolCallProgress:
        return cls(tool_call_id, [text_content(text)])

    def payload(self) -> dict[str, Any]:
        return {
            "sessionUpdate": "tool_call_update",
            "toolCallId": self.tool_call_id,
            "content": list(self.content),
        }


@dataclass(frozen=True)
class ToolCallFinished:
    """The call's final result (ACP `tool_call_update`, completed or failed)."""

    kind: ClassVar[EventKind] = EventKind.TOOL_CALL_UPDATE

    tool_call_id: str
    failed: bool
    content: Sequence[dict[str, Any]]  # the tool's own content blocks, then its text output
    raw_output: Any
    locations: Sequence[dict[str, Any]] = ()

    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": self.tool_call_id,
            "status": (ToolCallStatus.FAILED if self.failed else ToolCallStatus.COMPLETED).value,
            "content": list(self.content),
            "rawOutput": self.raw_output,
        }
        if self.locations:
            data["locations"] = list(self.locations)
        return data


@dataclass(frozen=True)
class PlanUpdated:
    """The complete plan (ACP `plan`)."""

    kind: ClassVar[EventKind] = EventKind.PLAN

    entries: Sequence[dict[str, Any]]

    def payload(self) -> dict[str, Any]:
        return {"sessionUpdate": "plan", "entries": self.entries}


@dataclass(frozen=True)
class CompactionProgress:
    """A compaction started, failed or had nothing to do (transient ACP `compaction_update`)."""

    kind: ClassVar[EventKind] = EventKind.COMPACTION_PROGRESS

    compaction_id: str
    status: CompactionStatus
    error: str | None = None

    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "sessionUpdate": "compaction_update",
            "compactionId": self.compaction_id,
            "status": self.status.value,
        }
        if self.error is not None:
            data["error"] = self.error
        return data


@dataclass(frozen=True)
class CompactionCompleted:
    """The durable `compaction` event: the ACP update clients see, plus the replaced messages
    (already in their stored JSON form), so the pre-compaction transcript stays in the store."""

    kind: ClassVar[EventKind] = EventKind.COMPACTION

    compaction_id: str
    summary: str
    reason: str
    replaced: Sequence[dict[str, Any]]
    kept_messages: int

    def payload(self) -> dict[str, Any]:
        return {
            "update": {
                "sessionUpdate": "compaction_update",
                "compactionId": self.compaction_id,
                "status": CompactionStatus.COMPLETED.value,
                "summary": [{"type": "text", "text": self.summary}],
                "_meta": {
                    "agentd": {
                        "reason": self.reason,
                        "replacedMessages": len(self.replaced),
                        "keptMessages": self.kept_messages,
                    }
                },
            },
            "replaced": list(self.replaced),
        }


@dataclass(frozen=True)
class AgentTextChunk:
    """Streamed model output (transient). `offset` is where `text` starts in the message, so a
    client that attached mid-message knows it missed the start."""

    message_id: str
    text: str
    offset: int
    thought: bool = False  # reasoning rather than the answer

    @property
    def kind(self) -> EventKind:
        return EventKind.AGENT_THOUGHT_CHUNK if self.thought else EventKind.AGENT_MESSAGE_CHUNK

    def payload(self) -> dict[str, Any]:
        return {"messageId": self.message_id, "text": self.text, "offset": self.offset}


@dataclass(frozen=True)
class AgentText:
    """The final text of one assistant message or its reasoning (durable). An `interrupted`
    text stopped mid-stream; a `discarded` one came from a failed attempt that was retried."""

    message_id: str
    text: str
    thought: bool = False
    discarded: bool = False
    interrupted: bool = False

    @property
    def kind(self) -> EventKind:
        return EventKind.AGENT_THOUGHT if self.thought else EventKind.AGENT_MESSAGE

    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = {"messageId": self.message_id, "text": self.text}
        if self.discarded:
            data["discarded"] = True
        if self.interrupted:
            data["interrupted"] = True
        return data


class NoticeSeverity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True)
class Notice:
    """A message for the user about the turn itself (a budget stop, recovery given up)."""

    kind: ClassVar[EventKind] = EventKind.NOTICE

    title: str
    severity: NoticeSeverity = NoticeSeverity.WARNING

    def payload(self) -> dict[str, Any]:
        return {"severity": self.severity.value, "title": self.title}


@dataclass(frozen=True)
class UserMessage:
    """User input written into the conversation. `prompt_id` names the prompt it came with;
    `interjection` marks text that arrived while the turn was running."""

    kind: ClassVar[EventKind] = EventKind.USER_MESSAGE

    message_id: str
    content: Sequence[dict[str, Any]]
    prompt_id: str | None = None
    interjection: bool = False

    @classmethod
    def text(cls, message_id: str, text: str, *, interjection: bool = False) -> UserMessage:
        return cls(message_id, [{"type": "text", "text": text}], interjection=interjection)

    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = {"messageId": self.message_id}
        if self.prompt_id is not None:
            data["promptId"] = self.prompt_id
        data["content"] = list(self.content)
        if self.interjection:
            data["interjection"] = True
        return data


DomainUpdate = (
    ToolCallAnnounced
    | ToolCallStarted
    | ToolCallProgress
    | ToolCallFinished
    | PlanUpdated
    | CompactionProgress
    | CompactionCompleted
    | Notice
    | UserMessage
    | AgentTextChunk
    | AgentText
)
