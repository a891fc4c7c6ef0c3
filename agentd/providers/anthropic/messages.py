"""Conversation → Anthropic Messages API `messages`: strict user/assistant alternation,
tool results as `tool_result` blocks, images as base64 blocks, signed thinking blocks first
in their assistant message."""

from __future__ import annotations

import json
from typing import Any

from agentd.core import Message, ReasoningBlock

# The `ReasoningBlock.provider` of blocks this API made (and only it can verify).
PROVIDER = "anthropic"
# Content block types that hold the model's reasoning; they go back verbatim, unmarked.
REASONING_TYPES = frozenset({"thinking", "redacted_thinking"})

# An empty tool_result is rejected ("content cannot be empty if `is_error` is true").
EMPTY_TOOL_RESULT = "(no output)"


def translate_messages(messages: list[Message], *, with_reasoning: bool = False) -> list[dict[str, Any]]:
    """Conversation → Anthropic `messages`: strict user/assistant alternation, where
    consecutive same-role messages (e.g. several tool results) become one message.
    `with_reasoning` sends back the assistant messages' signed thinking blocks."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue  # folded into `system` by build_body
        role, blocks = content_blocks(message, with_reasoning=with_reasoning)
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


def content_blocks(message: Message, *, with_reasoning: bool = False) -> tuple[str, list[dict[str, Any]]]:
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
        # The plain `reasoning` text is never sent: thinking goes back only as the signed
        # blocks, first in the message as the API requires.
        if with_reasoning:
            blocks[:0] = [dict(b.data) for b in message.reasoning_blocks if is_ours(b)]
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


def is_ours(block: ReasoningBlock) -> bool:
    """An Anthropic thinking / redacted_thinking block (another provider's records are skipped:
    their signatures mean nothing here)."""
    return block.provider == PROVIDER and block.data.get("type") in REASONING_TYPES
