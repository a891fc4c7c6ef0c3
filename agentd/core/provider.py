"""The provider interface (R-M1): a request in, a stream of typed events out.

A provider yields `StreamEvent`s as they arrive and raises `HarnessError` (R-R1) for
every failure, already classified. It never retries by itself: retry policy belongs to
the loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from agentd.core.conversation import Message, ReasoningBlock
from agentd.core.frozen_init import quick_init


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


@quick_init
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


@quick_init
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


@quick_init
@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    # The model that answered, as the provider names it ("": not reported); for traces, not
    # part of what a usage equals (the token counts).
    model: str = field(default="", compare=False)


@quick_init
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


class StreamBatches(Protocol):
    """A provider that can also hand its events over a network read at a time (issue 32:
    one generator resume per read, not per event). `stream_batches` yields non-empty lists
    whose concatenation is exactly what `stream` yields, errors included: a read's events
    that came before a failure are yielded first, then the failure raised. The loop's
    sampling uses it when the provider has it (`agentd.loop.react.sampling.BATCHED`)."""

    def stream_batches(self, request: ProviderRequest) -> AsyncIterator[list[StreamEvent]]: ...


async def events_of(batches: AsyncIterator[list[StreamEvent]]) -> AsyncIterator[StreamEvent]:
    """`stream` as a batching provider spells it: its batches' events one by one. Closing
    this closes the batches (their `finally` releases the connection now, not when the
    garbage collector finalises them)."""
    try:
        async for batch in batches:
            for event in batch:
                yield event
    finally:
        await batches.aclose()  # type: ignore[attr-defined]


async def one_per_batch(
    stream: Callable[[ProviderRequest], AsyncIterator[StreamEvent]], request: ProviderRequest
) -> AsyncIterator[list[StreamEvent]]:
    """`stream_batches` for a provider that has only `stream` (a test's wrapper): each event
    its own batch; closing this closes the stream."""
    events = stream(request)
    try:
        async for event in events:
            yield [event]
    finally:
        await events.aclose()  # type: ignore[attr-defined]
