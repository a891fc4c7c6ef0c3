"""TodoGate (R-L3f): a model that stops with todo items still open is nudged to go on,
at most `max_nudges` times per prompt; then it may stop and the turn records that todos
remain. Never for refusals or structured-output turns."""

from __future__ import annotations

from dataclasses import dataclass

from server.loop.turn_state import TurnState
from server.tools.todo import TodoList


@dataclass(frozen=True)
class TodoGateLimits:
    max_nudges: int = 2


DEFAULT_LIMITS = TodoGateLimits()


def todo_nudge_text(open_items: list[dict[str, str]]) -> str:
    items = "\n".join(f"- [{i['status']}] {i['content']}" for i in open_items)
    return (
        "Your todo list still has unfinished items:\n"
        f"{items}\n"
        "Continue working on them, or update the list with todo_write if they are done or no longer needed."
    )


def todo_gate(
    todos: TodoList,
    state: TurnState,
    *,
    refusal: bool,
    structured: bool,
    limits: TodoGateLimits = DEFAULT_LIMITS,
) -> str | None:
    """The nudge to inject, or None to let the model stop."""
    if refusal or structured:
        return None
    open_items = todos.unfinished()
    if not open_items:
        return None
    if state.todo_nudges >= limits.max_nudges:
        state.todos_remaining = len(open_items)
        return None
    state.todo_nudges += 1
    return todo_nudge_text(open_items)
