"""A turn's context with nothing behind it, for the loop's unit tests that never sample,
emit or ask a permission: only the conversation and the fields a test gives are real."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.core import Conversation, Message
from agentd.loop.context import TurnContext


def bare_context(messages: list[Message], turn_id: str = "turn", **fields: Any) -> TurnContext:
    return TurnContext(
        session_id="sess",
        turn_id=turn_id,
        cwd=Path("."),
        provider=object(),  # type: ignore[arg-type]  # never sampled here
        model="model",
        system_prompt="",
        tools={"bash": object()},  # type: ignore[dict-item]
        conversation=Conversation(messages, lambda i, m: None),
        events=object(),  # type: ignore[arg-type]
        permissions=object(),  # type: ignore[arg-type]
        **fields,
    )
