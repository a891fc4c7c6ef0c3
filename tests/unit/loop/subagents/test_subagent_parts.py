"""The pure parts of sub-agents (R-T11): how a child's events nest under its parent's tool
call, how its usage is attributed to its own lanes, what answer the parent gets, and how the
`[[subagent_stop]]` hooks section loads.

R-T11: "the child's events appear under the parent's tool call (ACP tool-call content /
`_meta`), its usage is attributed to its own lane and rolled up to the parent".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentd.core import (
    AgentText,
    AgentTextChunk,
    OutcomeKind,
    ToolCallStarted,
    TurnOutcome,
    Update,
    UsageLedger,
)
from agentd.core.conversation import Message
from agentd.core.events import EventKind
from agentd.core.provider import Usage
from agentd.loop.subagents.events import NestedEvents
from agentd.loop.subagents.registry import attributed, final_answer, lane_of
from agentd.tools.hooks import HookConfigError, load_hooks


class Recorder:
    def __init__(self) -> None:
        self.durable: list[tuple[EventKind, dict[str, Any]]] = []
        self.transient: list[tuple[EventKind, dict[str, Any]]] = []

    def emit(self, update: Update, *, origin: str | None = None) -> None:
        self.durable.append((update.kind, update.payload()))

    def emit_transient(self, update: Update) -> None:
        self.transient.append((update.kind, update.payload()))

    async def flushed(self) -> None:
        return None


def test_child_events_become_updates_of_the_parents_call() -> None:
    parent = Recorder()
    sink = NestedEvents(parent, "call_7", "agent-1", "explorer", 1)
    sink.emit(ToolCallStarted("c1"))
    sink.emit_transient(AgentTextChunk("m", "hi", 0))
    sink.emit(AgentText("m", "hi there"))
    sink.lifecycle("completed", answer="hi there")

    kinds = [k for k, _ in parent.durable]
    assert kinds == [EventKind.TOOL_CALL_UPDATE] * 3
    ((tk, chunk),) = parent.transient
    assert tk is EventKind.TOOL_CALL_PROGRESS  # a streamed chunk stays transient
    for _, update in [*parent.durable, (tk, chunk)]:
        assert update["sessionUpdate"] == "tool_call_update" and update["toolCallId"] == "call_7"
        sub = update["_meta"]["agentd"]["subagent"]
        assert (sub["taskId"], sub["agent"], sub["depth"]) == ("agent-1", "explorer", 1)
    call, message, end = (p for _, p in parent.durable)
    assert call["_meta"]["agentd"]["subagent"]["event"] == {
        "kind": "tool_call_update",
        "payload": ToolCallStarted("c1").payload(),
    }
    assert "content" not in call
    assert message["content"][0]["content"]["text"] == "[explorer] hi there"  # for clients ignoring _meta
    assert end["_meta"]["agentd"]["subagent"]["status"] == "completed"
    assert "event" not in end["_meta"]["agentd"]["subagent"]


def test_a_grandchilds_events_are_wrapped_twice() -> None:
    root = Recorder()
    child = NestedEvents(root, "call_1", "agent-1", "nester", 1)
    grandchild = NestedEvents(child, "call_2", "agent-2", "explorer", 2)
    grandchild.emit(ToolCallStarted("c9"))
    ((_, outer),) = root.durable
    inner = outer["_meta"]["agentd"]["subagent"]["event"]["payload"]
    assert outer["toolCallId"] == "call_1" and inner["toolCallId"] == "call_2"
    assert inner["_meta"]["agentd"]["subagent"]["event"]["payload"] == ToolCallStarted("c9").payload()


def test_child_usage_is_attributed_to_its_own_lanes() -> None:
    ledger = UsageLedger()
    ledger.record("primary", Usage(input_tokens=10, output_tokens=2))
    ledger.record("fallback-1", None)  # unreadable: dirty stays dirty
    renamed = attributed("explorer", ledger)
    assert set(renamed.by_lane) == {"subagent:explorer/primary", "subagent:explorer/fallback-1"}
    assert renamed.total.input_tokens == 10 and renamed.total.dirty
    assert lane_of("explorer", "primary") == "subagent:explorer/primary"
    parent = UsageLedger()
    parent.record("primary", Usage(input_tokens=5))
    parent.merge(renamed)
    assert parent.total.input_tokens == 15 and parent.by_lane["primary"].input_tokens == 5


def test_the_parent_gets_the_structured_answer_or_the_last_text() -> None:
    messages = [
        Message.user("task"),
        Message(role="assistant", content="first"),
        Message(role="assistant", content="final words"),
    ]
    assert final_answer(TurnOutcome(OutcomeKind.COMPLETED), messages) == "final words"
    structured = TurnOutcome(OutcomeKind.COMPLETED, structured_output={"value": {"n": 7}})
    assert final_answer(structured, messages) == '{"n": 7}'
    assert final_answer(TurnOutcome(OutcomeKind.CANCELLED), [Message.user("task")]) == ""


def test_subagent_stop_hooks_load_from_their_own_section(tmp_path: Path) -> None:
    path = tmp_path / "hooks.toml"
    path.write_text('[[stop]]\ncommand = "a"\n\n[[subagent_stop]]\ncommand = "b"\ntimeout = 3\n')
    hooks = load_hooks(path)
    assert [h.command for h in hooks.stop] == ["a"]
    assert [(h.command, h.timeout) for h in hooks.subagent_stop] == [("b", 3.0)]
    path.write_text('[[subagentstop]]\ncommand = "b"\n')
    with pytest.raises(HookConfigError, match="use pre_tool, stop, subagent_stop, user_prompt_submit"):
        load_hooks(path)
