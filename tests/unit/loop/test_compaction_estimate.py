"""The context estimate counts what a provider will really send back."""

from __future__ import annotations

from agentd.core.conversation import Image, Message, ReasoningBlock, ToolCall
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


def test_images_count_at_their_token_ceiling_in_tool_results_and_prompts():
    call = ToolCall(id="c1", name="mcp__browser__screenshot")
    text_only = Message.tool_result(call, "[image 1: image/png]")
    png = Image(mime_type="image/png", data="AAAA")
    shot = Message.tool_result(call, "[image 1: image/png]", images=[png])
    prompt = Message.user("what is this?", [png, png])
    assert estimate_tokens([shot]) == estimate_tokens([text_only]) + 1600  # 6,400 chars / 4
    assert estimate_tokens([prompt]) == estimate_tokens([Message.user("what is this?")]) + 3200
