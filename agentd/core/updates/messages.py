"""What a turn says and shows as typed updates: the user's input, the model's text (streamed
and final), the plan, compaction, notices.

Each payload keeps the exact keys, order and values of the events already stored;
`from_payload` reads one back (raising `BadPayload` on another shape).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from agentd.core.frozen_init import quick_init
from agentd.core.kinds import EventKind
from agentd.core.updates.wire import BadPayload, expect, only_keys

# The key a routed prompt's user message names its own replica's prompt by (R-C1).
ROUTED_FROM = "routedFrom"


@dataclass(frozen=True)
class PlanUpdated:
    """The complete plan (ACP `plan`)."""

    kind: ClassVar[EventKind] = EventKind.PLAN

    entries: Sequence[dict[str, Any]]

    def payload(self) -> dict[str, Any]:
        return {"sessionUpdate": "plan", "entries": self.entries}

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> PlanUpdated:
        only_keys(p, {"sessionUpdate", "entries"}, "plan")
        if p.get("sessionUpdate") != "plan":
            raise BadPayload("plan: sessionUpdate is not plan")
        return cls(expect(p["entries"], list, "entries"))


class CompactionStatus(StrEnum):
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


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

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> CompactionProgress:
        only_keys(p, {"sessionUpdate", "compactionId", "status", "error"}, "compaction_update")
        return cls(
            expect(p["compactionId"], str, "compactionId"), CompactionStatus(p["status"]), p.get("error")
        )


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

    def update(self) -> dict[str, Any]:
        """The ACP `compaction_update` clients are shown."""
        return {
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
        }

    def payload(self) -> dict[str, Any]:
        return {"update": self.update(), "replaced": list(self.replaced)}

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> CompactionCompleted:
        only_keys(p, {"update", "replaced"}, "compaction")
        update = expect(p["update"], dict, "update")
        [summary] = expect(update["summary"], list, "summary")
        meta = update["_meta"]["agentd"]
        return cls(
            expect(update["compactionId"], str, "compactionId"),
            expect(summary["text"], str, "summary"),
            expect(meta["reason"], str, "reason"),
            expect(p["replaced"], list, "replaced"),
            expect(meta["keptMessages"], int, "keptMessages"),
        )


@dataclass(frozen=True, init=False)
class AgentTextChunk:
    """Streamed model output (transient). `offset` is where `text` starts in the message, so a
    client that attached mid-message knows it missed the start."""

    message_id: str
    text: str
    offset: int
    thought: bool = False  # reasoning rather than the answer
    # Read by every hop of every chunk (the event, the hub, the renderer): set once here, not
    # a property called per read. Not part of what a chunk equals or shows (it follows `thought`).
    kind: EventKind = field(init=False, compare=False, repr=False)

    def __init__(self, message_id: str, text: str, offset: int, thought: bool = False) -> None:
        put = self.__dict__  # (frozen: what the generated __init__ sets, written directly)
        put["message_id"] = message_id
        put["text"] = text
        put["offset"] = offset
        put["thought"] = thought
        put["kind"] = EventKind.AGENT_THOUGHT_CHUNK if thought else EventKind.AGENT_MESSAGE_CHUNK

    def payload(self) -> dict[str, Any]:
        return {"messageId": self.message_id, "text": self.text, "offset": self.offset}

    @classmethod
    def from_payload(cls, p: Mapping[str, Any], *, thought: bool = False) -> AgentTextChunk:
        only_keys(p, {"messageId", "text", "offset"}, "chunk")
        return cls(
            expect(p["messageId"], str, "messageId"),
            expect(p["text"], str, "text"),
            expect(p["offset"], int, "offset"),
            thought,
        )


@quick_init
@dataclass(frozen=True)
class AgentText:
    """The final text of one assistant message or its reasoning (durable). An `interrupted`
    text stopped mid-stream; a `discarded` one came from a failed attempt that was retried;
    a `local` one answered a builtin command without the model."""

    message_id: str
    text: str
    thought: bool = False
    discarded: bool = False
    interrupted: bool = False
    local: bool = False

    @property
    def kind(self) -> EventKind:
        return EventKind.AGENT_THOUGHT if self.thought else EventKind.AGENT_MESSAGE

    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = {"messageId": self.message_id, "text": self.text}
        if self.discarded:
            data["discarded"] = True
        if self.interrupted:
            data["interrupted"] = True
        if self.local:
            data["local"] = True
        return data

    @classmethod
    def from_payload(cls, p: Mapping[str, Any], *, thought: bool = False) -> AgentText:
        only_keys(p, {"messageId", "text", "discarded", "interrupted", "local"}, "agent text")
        flags = {k: p.get(k, False) is True for k in ("discarded", "interrupted", "local")}
        return cls(expect(p["messageId"], str, "messageId"), expect(p["text"], str, "text"), thought, **flags)


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

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> Notice:
        only_keys(p, {"severity", "title"}, "notice")
        return cls(expect(p["title"], str, "title"), NoticeSeverity(p["severity"]))


@quick_init
@dataclass(frozen=True)
class UserMessage:
    """User input written into the conversation. `prompt_id` names the prompt it came with;
    `interjection` marks text that arrived while the turn was running; `routed_from` the
    prompt's id on the replica it was sent to (R-C1)."""

    kind: ClassVar[EventKind] = EventKind.USER_MESSAGE

    message_id: str
    content: Sequence[dict[str, Any]]
    prompt_id: str | None = None
    interjection: bool = False
    routed_from: str | None = None

    @classmethod
    def text(cls, message_id: str, text: str, *, interjection: bool = False) -> UserMessage:
        return cls(message_id, [{"type": "text", "text": text}], interjection=interjection)

    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = {"messageId": self.message_id}
        if self.prompt_id is not None:
            data["promptId"] = self.prompt_id
        data["content"] = list(self.content)
        if self.routed_from is not None:
            data[ROUTED_FROM] = self.routed_from
        if self.interjection:
            data["interjection"] = True
        return data

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> UserMessage:
        only_keys(p, {"messageId", "promptId", "content", ROUTED_FROM, "interjection"}, "user_message")
        return cls(
            expect(p["messageId"], str, "messageId"),
            expect(p["content"], list, "content"),
            p.get("promptId"),
            p.get("interjection", False) is True,
            p.get(ROUTED_FROM),
        )
