"""`stream_sample` over a provider's batches (`stream_batches`, issue 32) and over its
events one by one (`stream`: a provider without batches, or `BATCHED` off) — the same
sample, the same chunks emitted, the same error after the same chunks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import pytest

from agentd.core import AgentTextChunk, HarnessError, ToolCallIds
from agentd.core.conversation import Message
from agentd.core.provider import ProviderRequest, StreamEvent
from agentd.loop.context import TurnContext
from agentd.loop.limits import LoopLimits
from agentd.loop.react import sampling
from agentd.loop.react.sampling import Sample, stream_sample
from agentd.providers.scripted import Script, ScriptedProvider

REQUEST = ProviderRequest(model="m", system="", messages=[Message.user("hi")])


class StreamOnly:
    """A provider with `stream` alone (as a test's wrapper is)."""

    name = "stream-only"
    supports_native_schema = False

    def __init__(self, inner: ScriptedProvider) -> None:
        self.inner = inner

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        return self.inner.stream(request)


class Counting(ScriptedProvider):
    """The scripted provider, recording which of its two ways the loop took."""

    ways: list[str]

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        self.ways.append("stream")
        return super().stream(request)

    def stream_batches(self, request: ProviderRequest) -> AsyncIterator[list[StreamEvent]]:
        self.ways.append("batches")
        return super().stream_batches(request)


class Events:
    def __init__(self) -> None:
        self.chunks: list[AgentTextChunk] = []

    def emit_transient(self, event: AgentTextChunk) -> None:
        self.chunks.append(event)


def script(**step: Any) -> Script:
    return Script.model_validate({"steps": [step]})


def context(provider: Any) -> tuple[TurnContext, Events]:
    events = Events()
    ctx = SimpleNamespace(
        session_id="s",
        turn_id="t",
        limits=LoopLimits(),
        provider=provider,
        events=events,
        used_tool_call_ids=ToolCallIds(),
    )
    return cast(TurnContext, ctx), events


STEP = {
    "reasoning": "think",
    "text": "hello world",
    "chunk_size": 3,
    "tool_calls": [{"id": "c1", "name": "ls", "arguments": {"path": "."}}],
    "usage": {"input_tokens": 4, "output_tokens": 5},
}


async def run(provider: Any) -> tuple[Sample, list[AgentTextChunk], HarnessError | None]:
    ctx, events = context(provider)
    sample = Sample(message_id="msg", thought_id="thought")
    try:
        await stream_sample(ctx, REQUEST, sample)
    except HarnessError as err:
        return sample, events.chunks, err
    return sample, events.chunks, None


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize(
    "step", [STEP, {**STEP, "error": {"kind": "network", "message": "x", "after_chunks": 3}}]
)
async def test_batches_and_events_one_by_one_sample_alike(
    monkeypatch: pytest.MonkeyPatch, batched: bool, step: dict[str, Any]
) -> None:
    reference = await run(StreamOnly(ScriptedProvider(script(**step))))
    monkeypatch.setattr(sampling, "BATCHED", batched)
    provider = Counting(script(**step))
    provider.ways = []
    got = await run(provider)
    # (the scripted `stream` is its batches one by one: the first call is the loop's)
    assert provider.ways[0] == ("batches" if batched else "stream")
    sample, chunks, err = got
    ref_sample, ref_chunks, ref_err = reference
    assert chunks == ref_chunks
    assert (sample.text, sample.reasoning, sample.tool_calls, sample.usage, sample.stop) == (
        ref_sample.text,
        ref_sample.reasoning,
        ref_sample.tool_calls,
        ref_sample.usage,
        ref_sample.stop,
    )
    assert (err and err.message) == (ref_err and ref_err.message)
    if "error" in step:
        assert err is not None and [c.text for c in chunks] == ["thi", "nk", "hel"]
    else:
        assert sample.text == "hello world" and sample.stop is not None and sample.tool_calls[0].id == "c1"
