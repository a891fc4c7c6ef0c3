"""A sub-agent's events, nested under its parent's `task` tool call (R-T11).

The child runs the ordinary loop, which emits ordinary events (messages, tool calls, usage,
stop hooks, notices). A client must not mistake them for the parent's own, so the child's
`EventSink` wraps every one into an ACP `tool_call_update` on the parent's tool call id —
durable events stay durable (replayed with the session), streamed chunks stay transient —
and the event itself rides in `_meta.agentd.subagent`:

    {"sessionUpdate": "tool_call_update", "toolCallId": "<the parent's task call>",
     "_meta": {"agentd": {"subagent": {"taskId": "agent-1", "agent": "explorer", "depth": 1,
                                       "event": {"kind": "tool_call", "payload": {...}}}}}}

Lifecycle updates carry `status` (`running`, then `completed` / `failed` / `cancelled` /
…) instead of `event`. A grandchild's events are wrapped twice (child's call inside the
parent's). A child's finished message also shows as the call's text content, so a plain
ACP client that ignores `_meta` still sees what the child is doing. docs/protocol.md
documents the shape.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from agentd.core import AgentText, SubagentUpdate, Update, text_content
from agentd.loop.context import EventSink


@dataclass
class NestedEvents:
    """The child's `EventSink`: everything goes to `parent`, wrapped (see the module doc)."""

    parent: EventSink
    tool_call_id: str  # the parent's `task` call
    task_id: str
    agent: str
    depth: int

    def _update(
        self, body: dict[str, Any], content: list[dict[str, Any]] | None = None, *, transient: bool = False
    ) -> SubagentUpdate:
        return SubagentUpdate(
            self.tool_call_id, self.task_id, self.agent, self.depth, body, content, transient=transient
        )

    def emit(self, update: Update, *, origin: str | None = None) -> None:
        shown = None
        if isinstance(update, AgentText) and not update.thought and update.text:
            shown = [text_content(f"[{self.agent}] {update.text}")]
        nested = {"event": {"kind": update.kind.value, "payload": update.payload()}}
        self.parent.emit(self._update(nested, shown), origin=origin)

    def emit_transient(self, update: Update) -> None:
        nested = {"event": {"kind": update.kind.value, "payload": update.payload()}}
        self.parent.emit_transient(self._update(nested, transient=True))

    def flushed(self) -> Awaitable[None]:
        return self.parent.flushed()

    def lifecycle(self, status: str, **fields: Any) -> None:
        """The child started (`running`) or ended (its outcome), durably."""
        self.parent.emit(self._update({"status": status, **fields}))
