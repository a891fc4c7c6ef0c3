"""The provider interface (R-M1): a request in, a stream of typed events out.

A provider yields `StreamEvent`s as they arrive and raises `HarnessError` (R-R1) for
every failure, already classified. It never retries by itself: retry policy belongs to
the loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from agentd.core.conversation import Message, ReasoningBlock


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema (type: object)


@dataclass
class ProviderRequest:
    model: str
    system: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    # JSON Schema the final answer must satisfy, for providers with native support.
    output_schema: dict[str, Any] | None = None
    max_output_tokens: int | None = None
    # False for agentd's own auxiliary calls (the compaction summary, the goal evaluator):
    # providers leave extended thinking off — it would spend the small output cap, and a
    # small evaluator model may not support it at all.
    extended_reasoning: bool = True
    # The session the call is for (None: not for one, e.g. a test's direct call). Real
    # providers ignore it; the scripted one keeps a script position per session.
    session_id: str | None = None


class StopReason(StrEnum):
    END_TURN = "end_turn"
    TOOL_USE = "tool_use"
    MAX_TOKENS = "max_tokens"
    REFUSAL = "refusal"  # includes provider content filters


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True)
class ReasoningBlockComplete:
    """A finished reasoning record to keep in the conversation and send back verbatim
    (its readable text, if any, already streamed as `ReasoningDelta`s)."""

    block: ReasoningBlock


@dataclass(frozen=True)
class ToolCallDelta:
    """A fragment of a tool call as it streams (for live UI); `index` orders parallel calls."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments_delta: str = ""


@dataclass(frozen=True)
class ToolCallComplete:
    index: int
    id: str
    name: str
    arguments: str  # the complete raw JSON argument text


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    # The model that answered, as the provider names it ("": not reported); for traces, not
    # part of what a usage equals (the token counts).
    model: str = field(default="", compare=False)


@dataclass(frozen=True)
class Stop:
    reason: StopReason


StreamEvent = (
    TextDelta | ReasoningDelta | ReasoningBlockComplete | ToolCallDelta | ToolCallComplete | Usage | Stop
)


class Provider(Protocol):
    """Every provider: `name` for logs/usage attribution, `stream()` for one sampling call,
    `aclose()` to release its connections (the server calls it once, at shutdown).

    Contract: the stream yields zero or more deltas, every tool call exactly once as
    `ToolCallComplete` (in index order, before `Stop`), at most one `Usage`, and ends
    with exactly one `Stop`. Failures raise `HarnessError`.
    """

    name: str
    supports_native_schema: bool

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]: ...

    async def aclose(self) -> None: ...
