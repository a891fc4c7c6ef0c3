"""Provider-neutral conversation messages.

The conversation is what the model sees; it is persisted message by message and rebuilt
on restart. Providers translate it into their own wire format.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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
    # (`new[:n]` of a shorter `new` is shorter than `old`, so unequal: no length test of
    # its own — one `len` call, not three; this runs a few times per request)
    n = len(old)
    return not n or new[:n] == old


def common_prefix(a: list[Message], b: list[Message]) -> int:
    """How many leading messages `a` and `b` share (after an edit: what a cache keeps)."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] is not b[i] and a[i] != b[i]:
            return i
    return n


# --------------------------------------------------------------------------- after a crash or kill

INTERRUPTED_RESULT = "Interrupted: the server stopped before this tool call finished."


def repair_dangling_tool_calls(messages: list[Message]) -> tuple[list[ToolCall], int | None]:
    """Tool calls without results (the server died mid-tool) get synthesised
    "interrupted" results, right after their own step, so the next request is
    well-formed. Mutates `messages`; returns the repaired calls and the first index that
    changed (None when nothing did).

    Not `_synthesize_missing`: a result stored anywhere counts as an answer here, so a
    misplaced one is left for the per-request repair (c) to move and report, rather than
    shadowed by a stored "interrupted" duplicate."""
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    out: list[Message] = []
    dangling: list[ToolCall] = []
    first_changed: int | None = None
    i = 0
    while i < len(messages):
        m = messages[i]
        out.append(m)
        i += 1
        if m.role != "assistant" or not m.tool_calls:
            continue
        while i < len(messages) and messages[i].role == "tool":  # this step's results
            out.append(messages[i])
            i += 1
        for call in m.tool_calls:
            if call.id not in answered:
                if first_changed is None:
                    first_changed = len(out)
                dangling.append(call)
                out.append(Message.tool_result(call, INTERRUPTED_RESULT, is_error=True))
    messages[:] = out
    return dangling, first_changed


@dataclass(frozen=True)
class Interjection:
    text: str
    origin: str | None = None  # the connection that sent it (not echoed back to it)


class Conversation:
    """The model-visible transcript; every change is handed to `persist` (one appended
    message) or `rewrite` (the whole transcript, after compaction) in order."""

    def __init__(
        self,
        messages: list[Message],
        persist: Callable[[int, Message], None],
        rewrite: Callable[[list[Message]], None] | None = None,
    ) -> None:
        self._messages = messages
        self._persist = persist
        self._rewrite = rewrite
        # What the last request's repair and estimate made of this transcript (per session,
        # so a turn's requests cost the new messages, not the whole history): the loop's
        # `RequestMemo`, made at the first request (agentd/loop/request_memo.py).
        self.memo: object | None = None

    def replace(self, messages: list[Message]) -> None:
        self._messages[:] = messages
        if self._rewrite is not None:
            self._rewrite(list(messages))
        else:
            for i, m in enumerate(messages):
                self._persist(i, m)

    @property
    def messages(self) -> list[Message]:
        return list(self._messages)

    def append(self, message: Message) -> None:
        self._messages.append(message)
        self._persist(len(self._messages) - 1, message)

    def __len__(self) -> int:
        return len(self._messages)
