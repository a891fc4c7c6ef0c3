"""The one codec of session events (issue 27 item 4): every kind has a typed update whose
encoding is the stored payload's bytes, and `decode` is total over what databases hold —
a payload no typed update reads back exactly stays as it is (`Unparsed`)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from agentd.core import (
    AgentText,
    AgentTextChunk,
    CompactionCompleted,
    CompactionProgress,
    CompactionStatus,
    CompletionRecovery,
    ConfigOptionsChanged,
    Event,
    EventKind,
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
    TaskEnd,
    TaskKind,
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
    decode,
    encode,
    text_content,
)

# One value (or more) of every kind, as the loop and the session build them.
SAMPLES: list[Update] = [
    UserMessage("user_1", [{"type": "text", "text": "hi"}], prompt_id="p1"),
    UserMessage.text("user_2", "and also", interjection=True),
    UserMessage("user_3", [{"type": "text", "text": "x"}], prompt_id="p3", routed_from="p9"),
    AgentText("msg_1", "hello"),
    AgentText("thought_1", "hmm", thought=True, interrupted=True),
    AgentText("msg_2", "local answer", local=True),
    AgentText("msg_3", "", discarded=True),
    AgentTextChunk("msg_1", "hel", 0),
    AgentTextChunk("thought_1", "hm", 2, thought=True),
    ToolCallAnnounced("c1", "Read a.txt", "read", {"path": "a.txt"}, locations=[{"path": "/w/a.txt"}]),
    ToolCallStarted("c1"),
    ToolCallProgress.text("c1", "partial"),
    ToolCallFinished("c1", failed=False, content=[text_content("ok")], raw_output={"output": "ok"}),
    ToolCallFinished("c2", failed=True, content=[], raw_output=None, locations=[{"path": "/w"}]),
    SubagentUpdate("c3", "agent-1", "explorer", 1, {"status": "running", "description": "look"}),
    SubagentUpdate(
        "c3",
        "agent-1",
        "explorer",
        1,
        {"event": {"kind": "agent_message", "payload": {"messageId": "m", "text": "t"}}},
        [text_content("[explorer] t")],
    ),
    SubagentUpdate("c3", "agent-1", "explorer", 1, {"event": {"kind": "x", "payload": {}}}, transient=True),
    PlanUpdated([{"content": "a", "priority": "medium", "status": "pending"}]),
    CompactionProgress("cmp_1", CompactionStatus.IN_PROGRESS),
    CompactionProgress("cmp_1", CompactionStatus.FAILED, error="boom"),
    CompactionCompleted("cmp_1", "summary", "requested", [{"role": "user", "content": "x"}], 4),
    Notice("stopped"),
    RetryDecided(
        {"decision": "continue", "attempt": 1}, error={"kind": "network", "message": "m"}, lane="primary"
    ),
    RetryDecided({"decision": "stop"}, degenerate={"reason": "empty"}, lane="primary"),
    RetryDecided({"decision": "stop"}, loop={"reason": "shell_spiral"}),
    UsageReported(10, 100, {"inputTokens": 1}),
    UsageReported(10, 100, {"inputTokens": 1}, {"amount": 0.5, "currency": "USD"}),
    CompletionRecovery("submit", 1, 3, 0.5),
    GoalChanged({"objective": "o", "status": "active"}),
    GoalChanged({"objective": "o", "status": "done"}, {"action": "stop"}),
    GoalChanged(None),
    StopHooksRan(1, [{"decision": "allow"}]),
    PromptHooksRan([]),
    QueueChanged([{"change": "removed", "id": "p1", "reason": "started"}], 0),
    ModeChanged("plan", "default", True),
    PlanModeChanged(False),
    ConfigOptionsChanged([{"id": "mode", "currentValue": "plan"}]),
    SessionInfoChanged("A title", "2026-01-01T00:00:00+00:00"),
    TurnStarted("turn_1", "p1", "prompt", "user", message_index=0, request_id="r1", request_digest="d"),
    TurnStarted("turn_2", "p2", "compact", "user"),
    TurnEnded("turn_1", "p1", "completed", "end_turn", 2, session_usage={"calls": 1}),
    TurnEnded(
        "turn_2",
        None,
        "failed",
        "refusal",
        0,
        request_id="r1",
        reason="x",
        error={"kind": "internal", "message": "m"},
        structured_output={"a": 1},
        turn={"iterations": 1},
        session_usage={},
        request_digest="d",
    ),
    PermissionRequested("perm_1", {"toolCallId": "c1"}, [{"optionId": "allow_once", "kind": "allow_once"}]),
    PermissionResolved("perm_1", "selected", "allow_once"),
    PermissionResolved("perm_1", "cancelled"),
    TaskCompletion("bg-1", TaskKind.BASH, "sleep 1", TaskEnd.COMPLETED, "done", 0, "read_output(bg-1)"),
    TaskStart("bg-1", TaskKind.BASH, "sleep 1", "2026-01-01T00:00:00+00:00", "turn_1"),
    Rewound("turn_1", False, [], [], [], 3, ["turn_1"]),
    FileReverted("a.txt", "restored", "turn_1"),
]


def test_every_kind_has_a_typed_update() -> None:
    assert {u.kind for u in SAMPLES} == set(EventKind)


@pytest.mark.parametrize("update", SAMPLES, ids=lambda u: type(u).__name__)
def test_an_update_decodes_from_its_own_bytes(update: Update) -> None:
    data = encode(update)
    assert data == orjson.dumps(update.payload())
    back = decode(update.kind, data)
    assert not isinstance(back, Unparsed), back
    assert encode(back) == data
    assert decode(update.kind, orjson.loads(data)) == back  # the JSON column's value reads the same


def test_an_unfamiliar_stored_payload_round_trips_as_it_is() -> None:
    """An older server's shapes (an extra key, another order, a missing one) stay as stored."""
    cases: list[tuple[EventKind, dict[str, Any]]] = [
        (EventKind.AGENT_MESSAGE, {"messageId": "m", "text": "t", "legacy": 1}),
        (EventKind.NOTICE, {"title": "t", "severity": "info"}),  # the other key order
        (EventKind.TURN_STARTED, {"turnId": "t", "promptId": "p"}),
        (
            EventKind.TOOL_CALL_UPDATE,
            {"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "weird"},
        ),
    ]
    for kind, payload in cases:
        data = orjson.dumps(payload)
        update = decode(kind, data)
        assert isinstance(update, Unparsed) and update.kind is kind
        assert encode(update) == data
        assert update.payload() == payload


def test_a_payload_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ValueError, match="JSON object"):
        decode(EventKind.NOTICE, b"[1, 2]")


def test_an_event_encodes_once_and_keeps_the_stored_bytes() -> None:
    event = Event("s1", Notice("hi"), seq=1)
    assert event.data is event.data  # computed once
    assert event.payload == {"severity": "warning", "title": "hi"}
    stored = b'{"severity":"warning","title":"hi"}'
    back = Event.stored("s1", "notice", stored, 1)
    assert back.update == Notice("hi") and back.data is stored and back.kind is EventKind.NOTICE
