"""The journal's stored payloads must stay exactly as they were: existing logs replay
identically."""

from __future__ import annotations

from typing import Any

import pytest

from server.core.errors import ErrorKind, HarnessError
from server.loop.outcome import OutcomeKind, TurnOutcome
from server.loop.repair import INTERRUPTED_RESULT
from server.session.journal import interrupted_tool_call_update, turn_ended_payload

USAGE = {"total": {"calls": 0}}


def test_an_interrupted_tool_call_ends_failed_with_the_interrupted_result() -> None:
    assert interrupted_tool_call_update("c1") == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": "failed",
        "content": [{"type": "content", "content": {"type": "text", "text": INTERRUPTED_RESULT}}],
        "rawOutput": {"output": INTERRUPTED_RESULT, "interrupted": True},
    }


@pytest.mark.parametrize(
    ("outcome", "request_id", "expected"),
    [
        (
            TurnOutcome.completed(tools_called=2),
            None,
            {"outcome": "completed", "stopReason": "end_turn", "toolsCalled": 2},
        ),
        (
            TurnOutcome.cancelled("user_cancelled"),
            "r1",
            {
                "outcome": "cancelled",
                "stopReason": "cancelled",
                "toolsCalled": 0,
                "requestId": "r1",
                "reason": "user_cancelled",
            },
        ),
        (
            TurnOutcome.failed(HarnessError(ErrorKind.INTERNAL, "boom")),
            None,
            {
                "outcome": "failed",
                "stopReason": "end_turn",
                "toolsCalled": 0,
                "reason": "internal",
                "error": {"kind": "internal", "message": "boom"},
            },
        ),
        (
            TurnOutcome(OutcomeKind.INTERRUPTED, reason="server_restarted", structured_output={"value": 1}),
            None,
            {
                "outcome": "interrupted",
                "stopReason": "cancelled",
                "toolsCalled": 0,
                "reason": "server_restarted",
                "structuredOutput": {"value": 1},
            },
        ),
    ],
)
def test_turn_ended_payload(outcome: TurnOutcome, request_id: str | None, expected: dict[str, Any]) -> None:
    payload = turn_ended_payload("t1", "p1", outcome, request_id, USAGE)
    # The key order is the stored one: ids, outcome, then the optional parts, usage last.
    assert payload == {"turnId": "t1", "promptId": "p1", **expected, "sessionUsage": USAGE}
    assert list(payload)[:2] == ["turnId", "promptId"] and list(payload)[-1] == "sessionUsage"
