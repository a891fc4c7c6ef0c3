"""Typed domain updates produce exactly the payloads the loop used to write by hand: same keys,
same order, same values, so stored events stay byte-identical (compared as serialised JSON)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from agentd.core.events import EventKind
from agentd.core.updates import (
    AgentText,
    AgentTextChunk,
    CompactionCompleted,
    CompactionProgress,
    CompactionStatus,
    Notice,
    NoticeSeverity,
    PlanUpdated,
    ToolCallAnnounced,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
    Update,
    UserMessage,
)

LOC = [{"path": "/w/a.py"}]
TEXT = {"type": "content", "content": {"type": "text", "text": "out"}}


@pytest.mark.parametrize(
    ("update", "kind", "expected"),
    [
        (
            ToolCallAnnounced("c1", "Read a.py", "read", {"path": "a.py"}, LOC),
            EventKind.TOOL_CALL,
            '{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Read a.py","kind":"read",'
            '"status":"pending","rawInput":{"path":"a.py"},"locations":[{"path":"/w/a.py"}]}',
        ),
        (
            ToolCallAnnounced("c2", "nope", "other", {"arguments": "{"}),
            EventKind.TOOL_CALL,
            '{"sessionUpdate":"tool_call","toolCallId":"c2","title":"nope","kind":"other",'
            '"status":"pending","rawInput":{"arguments":"{"}}',
        ),
        (
            ToolCallStarted("c1"),
            EventKind.TOOL_CALL_UPDATE,
            '{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"in_progress"}',
        ),
        (
            ToolCallProgress.text("c1", "out"),
            EventKind.TOOL_CALL_PROGRESS,
            '{"sessionUpdate":"tool_call_update","toolCallId":"c1",'
            '"content":[{"type":"content","content":{"type":"text","text":"out"}}]}',
        ),
        (
            ToolCallFinished("c1", failed=False, content=[TEXT], raw_output={"output": "out"}, locations=LOC),
            EventKind.TOOL_CALL_UPDATE,
            '{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed",'
            '"content":[{"type":"content","content":{"type":"text","text":"out"}}],'
            '"rawOutput":{"output":"out"},"locations":[{"path":"/w/a.py"}]}',
        ),
        (
            ToolCallFinished("c1", failed=True, content=[TEXT], raw_output={"output": "out"}),
            EventKind.TOOL_CALL_UPDATE,
            '{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"failed",'
            '"content":[{"type":"content","content":{"type":"text","text":"out"}}],"rawOutput":{"output":"out"}}',
        ),
        (
            PlanUpdated([{"content": "a", "priority": "medium", "status": "pending"}]),
            EventKind.PLAN,
            '{"sessionUpdate":"plan","entries":[{"content":"a","priority":"medium","status":"pending"}]}',
        ),
        (
            CompactionProgress("k1", CompactionStatus.IN_PROGRESS),
            EventKind.COMPACTION_PROGRESS,
            '{"sessionUpdate":"compaction_update","compactionId":"k1","status":"in_progress"}',
        ),
        (
            CompactionProgress("k1", CompactionStatus.FAILED, "boom"),
            EventKind.COMPACTION_PROGRESS,
            '{"sessionUpdate":"compaction_update","compactionId":"k1","status":"failed","error":"boom"}',
        ),
        (
            CompactionCompleted("k1", "sum", "threshold", [{"role": "user", "content": "hi"}], 2),
            EventKind.COMPACTION,
            '{"update":{"sessionUpdate":"compaction_update","compactionId":"k1","status":"completed",'
            '"summary":[{"type":"text","text":"sum"}],'
            '"_meta":{"agentd":{"reason":"threshold","replacedMessages":1,"keptMessages":2}}},'
            '"replaced":[{"role":"user","content":"hi"}]}',
        ),
        (
            AgentTextChunk("msg_1", "he", 0),
            EventKind.AGENT_MESSAGE_CHUNK,
            '{"messageId":"msg_1","text":"he","offset":0}',
        ),
        (
            AgentTextChunk("thought_1", "hm", 4, thought=True),
            EventKind.AGENT_THOUGHT_CHUNK,
            '{"messageId":"thought_1","text":"hm","offset":4}',
        ),
        (AgentText("msg_1", "hello"), EventKind.AGENT_MESSAGE, '{"messageId":"msg_1","text":"hello"}'),
        (
            AgentText("thought_1", "hm", thought=True, discarded=True, interrupted=True),
            EventKind.AGENT_THOUGHT,
            '{"messageId":"thought_1","text":"hm","discarded":true,"interrupted":true}',
        ),
        (Notice("Stopped."), EventKind.NOTICE, '{"severity":"warning","title":"Stopped."}'),
        (Notice("fyi", NoticeSeverity.INFO), EventKind.NOTICE, '{"severity":"info","title":"fyi"}'),
        (
            UserMessage.text("interjection_t1_4", "also this", interjection=True),
            EventKind.USER_MESSAGE,
            '{"messageId":"interjection_t1_4","content":[{"type":"text","text":"also this"}],'
            '"interjection":true}',
        ),
        (
            UserMessage("user_1", [{"type": "text", "text": "hi"}], prompt_id="p1"),
            EventKind.USER_MESSAGE,
            '{"messageId":"user_1","promptId":"p1","content":[{"type":"text","text":"hi"}]}',
        ),
    ],
)
def test_payload_bytes(update: Update, kind: EventKind, expected: str) -> None:
    assert update.kind is kind
    assert orjson.dumps(update.payload()).decode() == expected


def test_permission_request_is_the_announcement_without_session_update() -> None:
    announced = ToolCallAnnounced("c1", "Run ls", "execute", {"command": "ls"})
    request: dict[str, Any] = announced.permission_request()
    assert list(request) == ["toolCallId", "title", "kind", "status", "rawInput"]
    assert request == {k: v for k, v in announced.payload().items() if k != "sessionUpdate"}


def test_a_chunks_kind_is_set_once_and_follows_thought() -> None:
    """`AgentTextChunk.kind` is an attribute set by its `__init__` (issue 32: read on every hop
    of every chunk), not part of what it equals or shows; a replaced copy gets its own."""
    from dataclasses import replace

    answer = AgentTextChunk("m", "t", 0)
    thought = AgentTextChunk("m", "t", 0, thought=True)
    assert answer.kind is EventKind.AGENT_MESSAGE_CHUNK and thought.kind is EventKind.AGENT_THOUGHT_CHUNK
    assert answer == AgentTextChunk("m", "t", 0) and answer != thought
    assert repr(answer) == "AgentTextChunk(message_id='m', text='t', offset=0, thought=False)"
    assert replace(answer, thought=True).kind is EventKind.AGENT_THOUGHT_CHUNK
    assert replace(thought, text="u").kind is EventKind.AGENT_THOUGHT_CHUNK
