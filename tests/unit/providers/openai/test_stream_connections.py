"""Item 5 of issue 13: a session's consecutive model calls share one HTTP connection (the
stream body is read to its end, not closed at `[DONE]` / `message_stop` /
`response.completed`), and a stalled stream — before its first token or in the middle —
fails as a classified `timeout`, whatever the provider."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentd.core.conversation import Message
from agentd.core.errors import ErrorKind, HarnessError, RecoveryHint, hint
from agentd.core.provider import Provider, ProviderRequest, StreamEvent, TextDelta, ToolSpec
from agentd.loop.retry import Bucket, Decision, RetryState
from agentd.providers.anthropic.provider import AnthropicProvider
from agentd.providers.openai.chat import OpenAIProvider
from agentd.providers.openai.responses import OpenAIResponsesProvider
from tests.support.fakes import anthropic_server as anth
from tests.support.fakes import openai_responses_server as resp
from tests.support.fakes import openai_server as oai

TURNS = 20
TOOLS = [ToolSpec("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})]


def request(n: int) -> ProviderRequest:
    return ProviderRequest(model="m", system="be brief", messages=[Message.user(f"turn {n}")], tools=TOOLS)


async def drain(provider: Provider, req: ProviderRequest) -> list[StreamEvent]:
    return [event async for event in provider.stream(req)]


async def until_error(provider: Provider) -> tuple[list[StreamEvent], HarnessError]:
    events: list[StreamEvent] = []
    with pytest.raises(HarnessError) as info:
        async for event in provider.stream(request(0)):
            events.append(event)
    return events, info.value


# -- one connection for a session's calls ---------------------------------------------------


async def test_openai_calls_share_one_connection() -> None:
    # Text answers and tool-call answers alternate, each with usage and [DONE], as in a session.
    call = oai.ToolCallScript("call_1", "read_file", '{"path": "README.md"}')
    script = [
        oai.Completion(content=["ok"]) if n % 2 else oai.Completion(tool_calls=[call]) for n in range(TURNS)
    ]
    async with oai.FakeOpenAI(script) as fake:
        provider = OpenAIProvider(base_url=fake.base_url, api_key="sk-test", model="m")
        try:
            for n in range(TURNS):
                await drain(provider, request(n))
        finally:
            await provider.aclose()
        assert len(fake.requests) == TURNS and fake.pending == 0
        assert fake.connections == 1


async def test_anthropic_calls_share_one_connection() -> None:
    tool = anth.ToolUseBlock("toolu_1", "read_file", '{"path": "README.md"}')
    script = [
        anth.StreamedMessage.from_text("ok") if n % 2 else anth.StreamedMessage([tool]) for n in range(TURNS)
    ]
    async with anth.FakeAnthropic(script) as fake:
        provider = AnthropicProvider(base_url=fake.base_url, api_key="sk-ant-test", model="m")
        try:
            for n in range(TURNS):
                await drain(provider, request(n))
        finally:
            await provider.aclose()
        assert len(fake.requests) == TURNS and fake.pending == 0
        assert fake.connections == 1


async def test_responses_calls_share_one_connection() -> None:
    call = resp.FunctionCallItem("call_1", "read_file", '{"path": "README.md"}')
    script: list[resp.ScriptedResponse] = [
        resp.ResponseStream([resp.MessageItem.from_text("ok")]) if n % 2 else resp.ResponseStream([call])
        for n in range(TURNS)
    ]
    async with resp.FakeResponses(script) as fake:
        provider = OpenAIResponsesProvider(base_url=fake.base_url, api_key="sk-test", model="gpt-5")
        try:
            for n in range(TURNS):
                await drain(provider, request(n))
        finally:
            await provider.aclose()
        assert len(fake.requests) == TURNS and fake.pending == 0
        assert fake.connections == 1


async def test_an_abandoned_stream_costs_its_connection_but_not_the_next_call() -> None:
    # The consumer stops after the first delta (e.g. a degenerate stream) while the rest of
    # the body is still to come: the half-read body cannot go back to the pool, so the next
    # call opens a new connection — and works.
    script = [oai.Completion(content=["a", "b", "c"], stall_after=2), oai.Completion(content=["d"])]
    async with oai.FakeOpenAI(script) as fake:
        provider = OpenAIProvider(base_url=fake.base_url, api_key="sk-test", model="m")
        try:
            stream = provider.stream(request(0))
            assert await anext(stream) == TextDelta("a")
            await stream.aclose()  # type: ignore[attr-defined]
            assert TextDelta("d") in await drain(provider, request(1))
        finally:
            await provider.aclose()
        assert fake.connections == 2


# -- stalled streams are classified timeouts -----------------------------------------------


def assert_timeout_is_retried(error: HarnessError) -> None:
    assert error.kind is ErrorKind.TIMEOUT
    assert hint(error) is RecoveryHint.BACKOFF_RETRY
    decision = RetryState().observe(error, has_fallback=False)
    assert (decision.decision, decision.bucket) == (Decision.CONTINUE, Bucket.TIMEOUT)


STALLS: dict[str, Any] = {
    # provider factory, script stalling before the first token, script stalling after one
    "openai": (
        lambda url, **kw: OpenAIProvider(base_url=url, api_key="k", model="m", **kw),
        oai.FakeOpenAI,
        oai.Completion(content=["late"], first_chunk_delay=30),
        # blocks: role chunk, "a", then silence before "b"
        oai.Completion(content=["a", "b"], stall_after=2),
    ),
    "anthropic": (
        lambda url, **kw: AnthropicProvider(base_url=url, api_key="k", model="m", **kw),
        anth.FakeAnthropic,
        anth.StreamedMessage.from_text("late", first_event_delay=30),
        # message_start, ping, block start, "a", then (event_delay) silence before "b"
        anth.StreamedMessage.from_text("ab", chunk_size=1, event_delay=0.5),
    ),
    "openai-responses": (
        lambda url, **kw: OpenAIResponsesProvider(base_url=url, api_key="k", model="gpt-5", **kw),
        resp.FakeResponses,
        resp.ResponseStream([resp.MessageItem.from_text("late")], first_event_delay=30),
        # created, in_progress, item added, part added, "a", then silence before "b"
        resp.ResponseStream([resp.MessageItem(["a", "b"])], stall_after=5),
    ),
}


@pytest.mark.parametrize("name", list(STALLS))
async def test_stall_before_the_first_token_is_a_timeout(name: str) -> None:
    make, fake_cls, before, _ = STALLS[name]
    async with fake_cls([before]) as fake:
        provider = make(fake.base_url, first_token_timeout=0.3, stream_idle_timeout=0.1)
        try:
            events, error = await until_error(provider)
        finally:
            await provider.aclose()
    assert events == []
    assert "first token" in error.message
    assert_timeout_is_retried(error)


@pytest.mark.parametrize("name", list(STALLS))
async def test_stall_mid_stream_is_a_timeout(name: str) -> None:
    make, fake_cls, _, mid = STALLS[name]
    async with fake_cls([mid]) as fake:
        # The idle timeout is shorter than the stall but the first-token budget is generous:
        # only the silence after the first token can fail this call.
        provider = make(fake.base_url, first_token_timeout=60, stream_idle_timeout=0.2)
        try:
            events, error = await until_error(provider)
        finally:
            await provider.aclose()
    assert events == [TextDelta("a")]
    assert "stalled" in error.message
    assert_timeout_is_retried(error)


async def test_idle_timeout_does_not_apply_before_the_first_token() -> None:
    # A reasoning model may think in silence for long: only the first-token budget bounds that.
    async with oai.FakeOpenAI([oai.Completion(content=["x"], first_chunk_delay=0.5)]) as fake:
        provider = OpenAIProvider(
            base_url=fake.base_url, api_key="k", model="m", first_token_timeout=30, stream_idle_timeout=0.1
        )
        try:
            assert TextDelta("x") in await drain(provider, request(0))
        finally:
            await provider.aclose()


# -- the stream timeouts over many reads (one timer per connection, re-armed when it fires) --

TRICKLE = [f"t{i} " for i in range(30)]


async def test_a_stream_that_keeps_trickling_under_the_idle_timeout_never_fails() -> None:
    # 30 chunks 50 ms apart: the stream lasts longer than the idle timeout (the timer fires
    # mid-stream and must re-arm, not fail), but no gap comes near it.
    async with oai.FakeOpenAI([oai.Completion(content=TRICKLE, chunk_delay=0.05)]) as fake:
        provider = OpenAIProvider(
            base_url=fake.base_url, api_key="k", model="m", first_token_timeout=60, stream_idle_timeout=1.0
        )
        try:
            events = await drain(provider, request(0))
        finally:
            await provider.aclose()
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "".join(TRICKLE)


async def test_a_stream_going_silent_after_trickling_past_the_idle_timeout_fails_as_stalled() -> None:
    # Trickling for longer than the idle timeout, then silent: the same classified timeout
    # as a stream that stalls at once.
    # (12 chunks 0.1 s apart: 1.2 s of trickle against a 1 s idle timeout, each gap 10× inside
    # it — a loaded CI host once stretched a 0.05 s gap past a 0.3 s timeout.)
    script = oai.Completion(content=TRICKLE[:12], chunk_delay=0.1, stall_after=13)
    async with oai.FakeOpenAI([script]) as fake:
        provider = OpenAIProvider(
            base_url=fake.base_url, api_key="k", model="m", first_token_timeout=60, stream_idle_timeout=1.0
        )
        try:
            events, error = await until_error(provider)
        finally:
            await provider.aclose()
    assert [e.text for e in events if isinstance(e, TextDelta)] == TRICKLE[:12]
    assert "stalled" in error.message
    assert_timeout_is_retried(error)


async def test_a_first_token_deadline_shorter_than_the_idle_timeout_still_bounds_the_first_read() -> None:
    # A connection kept from an earlier call has its timer armed for that call's reads; the
    # next call's first-token deadline, earlier, must still fire on time.
    script = [oai.Completion(content=["a"]), oai.Completion(content=["late"], first_chunk_delay=30)]
    async with oai.FakeOpenAI(script) as fake:
        provider = OpenAIProvider(
            base_url=fake.base_url, api_key="k", model="m", first_token_timeout=0.3, stream_idle_timeout=600
        )
        try:
            assert TextDelta("a") in await drain(provider, request(0))
            async with asyncio.timeout(20):  # not the idle timeout's 600 s
                events, error = await until_error(provider)
        finally:
            await provider.aclose()
    assert events == []
    assert "first token" in error.message
    assert_timeout_is_retried(error)
