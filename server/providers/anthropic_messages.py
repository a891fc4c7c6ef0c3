"""Conversation → Anthropic Messages API `messages`: strict user/assistant alternation,
tool results as `tool_result` blocks, images as base64 blocks."""

from __future__ import annotations

import json
from typing import Any

from server.core.conversation import Message

# An empty tool_result is rejected ("content cannot be empty if `is_error` is true").
EMPTY_TOOL_RESULT = "(no output)"


def translate_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Conversation → Anthropic `messages`: strict user/assistant alternation, where
    consecutive same-role messages (e.g. several tool results) become one message."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue  # folded into `system` by build_body
        role, blocks = content_blocks(message)
        if not blocks:
            continue  # "all messages must have non-empty content"
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    for entry in out:
        if entry["role"] == "user":
            # tool_result blocks must come first in their user message (stable order otherwise).
            entry["content"].sort(key=lambda block: block["type"] != "tool_result")
    return out


def content_blocks(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "tool":
        content = message.content if message.content.strip() else EMPTY_TOOL_RESULT
        block = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id or "",
            "content": content,
            "is_error": message.is_error,
        }
        return "user", [block]
    # Whitespace-only text blocks are rejected ("text content blocks must contain non-whitespace text").
    blocks: list[dict[str, Any]] = [
        {"type": "image", "source": {"type": "base64", "media_type": i.mime_type, "data": i.data}}
        for i in message.images
    ]
    if message.content.strip():
        blocks.append({"type": "text", "text": message.content})
    if message.role == "assistant":
        # `reasoning` is dropped: thinking blocks may only be sent back with their signature.
        blocks += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": _tool_input(c.arguments)}
            for c in message.tool_calls
        ]
        return "assistant", blocks
    return "user", blocks


def _tool_input(arguments: str) -> dict[str, Any]:
    """`input` must be a JSON object; keep unparseable model output visible rather than lose it."""
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except ValueError:
        return {"_raw": arguments}
    return value if isinstance(value, dict) else {"_raw": arguments}
