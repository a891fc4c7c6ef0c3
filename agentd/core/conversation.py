"""Provider-neutral conversation messages.

The conversation is what the model sees; it is persisted message by message and rebuilt
on restart. Providers translate it into their own wire format.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class ToolCall(BaseModel):
    id: str
    name: str
    # Raw JSON text exactly as the model produced it; parsed by the tool dispatcher so a
    # malformed argument string becomes a readable tool error, not a crash.
    arguments: str = "{}"


# The image types providers accept natively (OpenAI and Anthropic alike); others stay a note.
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


class Image(BaseModel):
    """An image for the model: one the user attached (ACP `image` block) or an MCP tool
    returned; base64 data and its MIME type."""

    mime_type: str
    data: str


class ReasoningBlock(BaseModel):
    """A provider's own record of the model's reasoning, kept verbatim so it can be sent
    back on the next call as that API requires (Anthropic's signed `thinking` /
    `redacted_thinking` blocks, a Responses API `reasoning` item with its
    `encrypted_content`). `provider` names the wire format it belongs to; another provider
    skips it (a signature is only valid where it was made)."""

    provider: str  # e.g. "anthropic", "openai-responses"
    data: dict[str, Any]


class Message(BaseModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    reasoning: str = ""
    # role == "assistant": opaque reasoning records in the order the provider sent them.
    reasoning_blocks: list[ReasoningBlock] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    # role == "user" or "tool": sent in the provider's format (a tool result's where its API takes them)
    images: list[Image] = Field(default_factory=list)
    tool_call_id: str | None = None  # role == "tool"
    name: str | None = None  # tool name, role == "tool"
    is_error: bool = False  # role == "tool"
    # agentd's own marker for messages it wrote (e.g. "compaction_summary",
    # "goal_continuation"); never sent to providers.
    tag: str | None = None

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", content=text)

    @classmethod
    def user(cls, text: str, images: list[Image] | None = None) -> Message:
        return cls(role="user", content=text, images=images or [])

    @classmethod
    def tool_result(
        cls, call: ToolCall, output: str, *, is_error: bool = False, images: list[Image] | None = None
    ) -> Message:
        return cls(
            role="tool",
            content=output,
            tool_call_id=call.id,
            name=call.name,
            is_error=is_error,
            images=images or [],
        )


def extends(new: list[Message], old: list[Message]) -> bool:
    """Whether `new` starts with `old` — the test the per-conversation caches (repair, the
    estimate, the providers' encoded messages) use to reuse their work. One C-level list
    comparison: identical messages are equal without a look inside (messages are treated
    as immutable once in a conversation), and an equal copy gives the same result anyway."""
    return len(new) >= len(old) and (not old or new[: len(old)] == old)


def common_prefix(a: list[Message], b: list[Message]) -> int:
    """How many leading messages `a` and `b` share (after an edit: what a cache keeps)."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] is not b[i] and a[i] != b[i]:
            return i
    return n
