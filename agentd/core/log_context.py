"""Which session and turn a log record belongs to, as structured fields (issue 11).

`bind_log_context(session_id=..., turn_id=...)` sets them for the code inside it; they live in
contextvars, so an asyncio task started inside inherits them and concurrent sessions never see
each other's. `LogContextFilter`, installed on the log handler, copies them onto every record
as `record.session_id` / `record.turn_id` (None outside any context), where formatters (the JSON
one in `agentd/infra/logs.py`) and log pipelines read them instead of parsing the message.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import Context, ContextVar, Token, copy_context

LOG_CONTEXT_FIELDS = ("session_id", "turn_id")

_session_id: ContextVar[str | None] = ContextVar("agentd_log_session_id", default=None)
_turn_id: ContextVar[str | None] = ContextVar("agentd_log_turn_id", default=None)


@contextmanager
def bind_log_context(*, session_id: str | None = None, turn_id: str | None = None) -> Iterator[None]:
    """Records logged inside carry these fields; a field given as None keeps its outer value
    (a turn binds only `turn_id` inside its session's `session_id`). Enter and leave it in the
    same task (a `with` around awaited code), as with any contextvar."""
    tokens: list[tuple[ContextVar[str | None], Token[str | None]]] = []
    if session_id is not None:
        tokens.append((_session_id, _session_id.set(session_id)))
    if turn_id is not None:
        tokens.append((_turn_id, _turn_id.set(turn_id)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def turn_log_context(turn_id: str) -> Context:
    """A copy of the current context with `turn_id` bound: what a task started inside
    `bind_log_context(turn_id=...)` would copy, made without the context manager's calls
    (`asyncio.create_task(..., context=turn_log_context(turn_id))`, once per turn)."""
    context = copy_context()
    context.run(_turn_id.set, turn_id)
    return context


def current_log_context() -> dict[str, str]:
    """The bound fields (only those set)."""
    values = {"session_id": _session_id.get(), "turn_id": _turn_id.get()}
    return {k: v for k, v in values.items() if v is not None}


class LogContextFilter(logging.Filter):
    """Copies the bound fields onto each record; a value passed explicitly (`extra=`) wins."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = current_log_context()
        for name in LOG_CONTEXT_FIELDS:
            if getattr(record, name, None) is None:
                setattr(record, name, context.get(name))
        return True
