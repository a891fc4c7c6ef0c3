"""TodoGate (R-L3f): a model that stops with todo items still open is nudged to go on,
at most `max_nudges` times per prompt; then it may stop and the turn records that todos
remain. Never for refusals or structured-output turns.

A pure decision: it returns a `TodoGateVerdict`; the loop counts the nudge and records the
remaining items."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentd.loop.reminders import system_reminder


@dataclass(frozen=True)
class TodoGateLimits:
    max_nudges: int = 2


DEFAULT_LIMITS = TodoGateLimits()


@dataclass(frozen=True)
class TodoGateVerdict:
    nudge: str | None = None  # the message to inject; None lets the model stop
    # Set when the gate let the model stop with items still open (nudges used up).
    todos_remaining: int | None = None


def todo_nudge_text(open_items: Sequence[dict[str, str]]) -> str:
    items = "\n".join(f"- [{i['status']}] {i['content']}" for i in open_items)
    return system_reminder(
        "Your todo list still has unfinished items:\n"
        f"{items}\n"
        "Continue working on them, or update the list with todo_write if they are done or no longer needed."
    )


def todo_gate(
    open_items: Sequence[dict[str, str]],
    nudges_given: int,
    *,
    refusal: bool,
    structured: bool,
    limits: TodoGateLimits = DEFAULT_LIMITS,
) -> TodoGateVerdict:
    """Nudge about `open_items` (the unfinished todos), or let the model stop."""
    if refusal or structured or not open_items:
        return TodoGateVerdict()
    if nudges_given >= limits.max_nudges:
        return TodoGateVerdict(todos_remaining=len(open_items))
    return TodoGateVerdict(nudge=todo_nudge_text(open_items))
