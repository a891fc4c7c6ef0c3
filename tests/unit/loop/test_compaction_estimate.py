"""The context estimate counts what a provider will really send back."""

from __future__ import annotations

from agentd.core.conversation import Message, ReasoningBlock
from agentd.loop.compaction import estimate_tokens


def test_opaque_reasoning_counts_but_readable_thinking_is_not_counted_twice():
    plain = Message(role="assistant", content="done", reasoning="thinking it over")
    signed = plain.model_copy(
        update={
            "reasoning_blocks": [
                ReasoningBlock(
                    provider="anthropic",
                    data={"type": "thinking", "thinking": "thinking it over", "signature": "sig"},
                )
            ]
        }
    )
    encrypted = plain.model_copy(
        update={
            "reasoning_blocks": [
                ReasoningBlock(
                    provider="openai-responses",
                    data={"type": "reasoning", "id": "rs_1", "encrypted_content": "x" * 4000},
                ),
                ReasoningBlock(provider="anthropic", data={"type": "redacted_thinking", "data": "y" * 400}),
            ]
        }
    )
    base = estimate_tokens([plain])
    assert estimate_tokens([signed]) == base  # its text is `reasoning`, already counted
    assert estimate_tokens([encrypted]) == base + 1100  # (4000 + 400) chars / 4
