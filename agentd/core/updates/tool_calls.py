"""Tool calls as typed updates: announced, started, streaming, finished, and a sub-agent's
events nested under its parent's call.

Each payload is the ACP `session/update` shape clients receive and the store holds, with the
exact keys, order and values of the events already stored; `from_payload` reads one back
(raising `BadPayload` on another shape).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from agentd.core.kinds import EventKind
from agentd.core.updates.wire import BadPayload, Json, expect, only_keys

_TOOL_CALL = "tool_call"
_TOOL_CALL_UPDATE = "tool_call_update"


class ToolCallStatus(StrEnum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"


def text_content(text: str) -> dict[str, Any]:
    """A tool-call content item holding plain text."""
    return {"type": "content", "content": {"type": "text", "text": text}}


def _update_of(payload: Mapping[str, Any], session_update: str, keys: set[str], what: str) -> str:
    """The payload's toolCallId, once it is an ACP update of this type with only `keys`."""
    only_keys(payload, keys | {"sessionUpdate", "toolCallId"}, what)
    if payload.get("sessionUpdate") != session_update:
        raise BadPayload(f"{what}: sessionUpdate is not {session_update}")
    return str(expect(payload.get("toolCallId"), str, "toolCallId"))


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
            "sessionUpdate": _TOOL_CALL,
            "toolCallId": self.tool_call_id,
            "title": self.title,
            "kind": self.tool_kind,
            "status": self.status.value,
            "rawInput": self.raw_input,
        }
        if self.locations:
            data["locations"] = list(self.locations)
        return data

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> ToolCallAnnounced:
        call_id = _update_of(p, _TOOL_CALL, {"title", "kind", "status", "rawInput", "locations"}, "tool_call")
        return cls(
            call_id,
            expect(p["title"], str, "title"),
            expect(p["kind"], str, "kind"),
            p["rawInput"],
            expect(p.get("locations", []), list, "locations"),
            ToolCallStatus(p["status"]),
        )

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
            "sessionUpdate": _TOOL_CALL_UPDATE,
            "toolCallId": self.tool_call_id,
            "status": ToolCallStatus.IN_PROGRESS.value,
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> ToolCallStarted:
        call_id = _update_of(p, _TOOL_CALL_UPDATE, {"status"}, "tool_call_update")
        if p.get("status") != ToolCallStatus.IN_PROGRESS.value:
            raise BadPayload("tool_call_update: not in_progress")
        return cls(call_id)


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
            "sessionUpdate": _TOOL_CALL_UPDATE,
            "toolCallId": self.tool_call_id,
            "content": list(self.content),
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> ToolCallProgress:
        call_id = _update_of(p, _TOOL_CALL_UPDATE, {"content"}, "tool_call_progress")
        return cls(call_id, expect(p["content"], list, "content"))


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
            "sessionUpdate": _TOOL_CALL_UPDATE,
            "toolCallId": self.tool_call_id,
            "status": (ToolCallStatus.FAILED if self.failed else ToolCallStatus.COMPLETED).value,
            "content": list(self.content),
            "rawOutput": self.raw_output,
        }
        if self.locations:
            data["locations"] = list(self.locations)
        return data

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> ToolCallFinished:
        keys = {"status", "content", "rawOutput", "locations"}
        call_id = _update_of(p, _TOOL_CALL_UPDATE, keys, "tool_call_update")
        status = ToolCallStatus(p["status"])
        if status not in (ToolCallStatus.COMPLETED, ToolCallStatus.FAILED):
            raise BadPayload("tool_call_update: not a final status")
        return cls(
            call_id,
            status is ToolCallStatus.FAILED,
            expect(p["content"], list, "content"),
            p["rawOutput"],
            expect(p.get("locations", []), list, "locations"),
        )


@dataclass(frozen=True)
class SubagentUpdate:
    """A sub-agent's event (or its lifecycle: running, then how it ended) nested under its
    parent's `task` call as an ACP `tool_call_update` whose `_meta.agentd.subagent` holds it
    (R-T11, docs/protocol.md). `body` is the nested part after taskId, agent and depth:
    `{"event": {"kind", "payload"}}` or `{"status", …}`; `content` the text a plain ACP client
    is shown. A transient child event rides as `TOOL_CALL_PROGRESS`."""

    tool_call_id: str
    task_id: str
    agent: str
    depth: int
    body: Mapping[str, Json]
    content: Sequence[dict[str, Any]] | None = None
    transient: bool = False

    @property
    def kind(self) -> EventKind:
        return EventKind.TOOL_CALL_PROGRESS if self.transient else EventKind.TOOL_CALL_UPDATE

    def payload(self) -> dict[str, Any]:
        sub = {"taskId": self.task_id, "agent": self.agent, "depth": self.depth, **self.body}
        data: dict[str, Any] = {
            "sessionUpdate": _TOOL_CALL_UPDATE,
            "toolCallId": self.tool_call_id,
            "_meta": {"agentd": {"subagent": sub}},
        }
        if self.content is not None:
            data["content"] = list(self.content)
        return data

    @classmethod
    def from_payload(cls, p: Mapping[str, Any], *, transient: bool = False) -> SubagentUpdate:
        call_id = _update_of(p, _TOOL_CALL_UPDATE, {"_meta", "content"}, "subagent update")
        meta = expect(p["_meta"], dict, "_meta")
        only_keys(meta, {"agentd"}, "_meta")
        agentd = expect(meta["agentd"], dict, "_meta.agentd")
        only_keys(agentd, {"subagent"}, "_meta.agentd")
        sub = dict(expect(agentd["subagent"], dict, "subagent"))
        task_id = expect(sub.pop("taskId"), str, "taskId")
        agent = expect(sub.pop("agent"), str, "agent")
        depth = expect(sub.pop("depth"), int, "depth")
        content = p.get("content")
        return cls(
            call_id,
            task_id,
            agent,
            depth,
            sub,
            None if content is None else expect(content, list, "content"),
            transient,
        )
