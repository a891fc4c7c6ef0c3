"""TodoGate (R-L3f) as a pure verdict, table-driven."""

from __future__ import annotations

import pytest

from agentd.loop.todo_gate import TodoGateLimits, TodoGateVerdict, todo_gate, todo_nudge_text

OPEN = ({"content": "a", "status": "pending"}, {"content": "b", "status": "in_progress"})


@pytest.mark.parametrize(
    ("items", "given", "refusal", "structured", "expected"),
    [
        ((), 0, False, False, TodoGateVerdict()),
        (OPEN, 0, False, False, TodoGateVerdict(nudge=todo_nudge_text(OPEN))),
        (OPEN, 1, False, False, TodoGateVerdict(nudge=todo_nudge_text(OPEN))),
        (OPEN, 2, False, False, TodoGateVerdict(todos_remaining=2)),
        (OPEN, 0, True, False, TodoGateVerdict()),
        (OPEN, 0, False, True, TodoGateVerdict()),
    ],
    ids=["nothing open", "first nudge", "second nudge", "nudges used up", "refusal", "structured"],
)
def test_todo_gate(
    items: tuple[dict[str, str], ...], given: int, refusal: bool, structured: bool, expected: TodoGateVerdict
) -> None:
    assert (
        todo_gate(items, given, refusal=refusal, structured=structured, limits=TodoGateLimits(2)) == expected
    )


def test_nudge_lists_the_open_items() -> None:
    text = todo_nudge_text(OPEN)
    assert "- [pending] a" in text and "- [in_progress] b" in text
