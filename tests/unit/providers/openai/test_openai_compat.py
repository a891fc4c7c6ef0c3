"""Chat Completions done properly (issue 13 item 4): the output-cap field per server and
model (and the one switch after a 400 naming it), `reasoning_effort` for reasoning models,
compatible servers' quirks (no `tool_choice`, refused `stream_options`, missing or garbled
usage), compaction following the same field choice, and the request types' validator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentd.core.conversation import Message
from agentd.core.errors import ErrorKind, HarnessError
from agentd.core.provider import ProviderRequest, Stop, StopReason, StreamEvent, TextDelta, ToolSpec
from agentd.infra.config import ReasoningEffort, TokenField
from agentd.loop.compaction import CompactionLimits, summarise
from agentd.providers.openai.chat import OpenAIProvider
from agentd.providers.openai.models import is_reasoning_model, token_field
from tests.support.fakes.openai_server import Completion, ErrorResponse, FakeOpenAI, RawStream
from tests.support.openai_types import chat_body_error

UNSUPPORTED_MAX_TOKENS = ErrorResponse(
    400,
    "Unsupported parameter: 'max_tokens' is not supported with this model. "
    "Use 'max_completion_tokens' instead.",
    type="invalid_request_error",
    code="unsupported_parameter",
)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def provider_for(fake: FakeOpenAI, model: str = "llama3", **kwargs: Any) -> OpenAIProvider:
    return OpenAIProvider(base_url=fake.base_url, api_key="sk-test", model=model, **kwargs)


def capped(model: str, tokens: int = 100) -> ProviderRequest:
    return ProviderRequest(model=model, system="", messages=[Message.user("hi")], max_output_tokens=tokens)


async def run(provider: OpenAIProvider, request: ProviderRequest) -> list[StreamEvent]:
    return [event async for event in provider.stream(request)]


# -- which field caps the output -----------------------------------------------------------


@pytest.mark.parametrize(
    ("base_url", "model", "setting", "expected"),
    [
        ("https://api.openai.com/v1", "gpt-4o-mini", TokenField.AUTO, "max_completion_tokens"),
        ("http://127.0.0.1:8000/v1", "llama3", TokenField.AUTO, "max_tokens"),
        ("http://127.0.0.1:8000/v1", "o3-mini", TokenField.AUTO, "max_completion_tokens"),
        ("https://openrouter.ai/api/v1", "openai/gpt-5-mini", TokenField.AUTO, "max_completion_tokens"),
        ("https://api.openai.com/v1", "gpt-4o", TokenField.MAX_TOKENS, "max_tokens"),
        ("http://127.0.0.1:8000/v1", "llama3", TokenField.MAX_COMPLETION_TOKENS, "max_completion_tokens"),
    ],
)
def test_token_field_choice(base_url: str, model: str, setting: TokenField, expected: str) -> None:
    assert token_field(setting, base_url=base_url, model=model) == expected
    body = OpenAIProvider(base_url=base_url, api_key=None, model=model, token_field=setting).build_body(
        capped(model)
    )
    other = {"max_tokens", "max_completion_tokens"} - {expected}
    assert body[expected] == 100 and not other & set(body)
    assert chat_body_error(body) is None


def test_reasoning_models() -> None:
    for model in ("o1", "o3-mini", "o4-mini-high", "gpt-5", "gpt-5.1-codex", "openai/o3", "gpt-oss-120b"):
        assert is_reasoning_model(model), model
    for model in ("gpt-4o", "gpt-4.1-mini", "gpt-5-chat-latest", "llama3", "qwen2.5-coder", "omni-x"):
        assert not is_reasoning_model(model), model


def test_reasoning_effort_goes_to_reasoning_models_only() -> None:
    provider = OpenAIProvider(
        base_url="http://127.0.0.1:9/v1", api_key=None, model="m", reasoning_effort=ReasoningEffort.LOW
    )
    assert provider.build_body(capped("o4-mini"))["reasoning_effort"] == "low"
    assert "reasoning_effort" not in provider.build_body(capped("gpt-4o"))
    assert chat_body_error(provider.build_body(capped("o4-mini"))) is None


def test_tool_choice_is_never_sent() -> None:
    # Several compatible servers reject it (or need a flag for it); `auto` is the default anyway.
    tools = [ToolSpec("t", "d", {"type": "object", "properties": {}})]
    request = ProviderRequest(model="m", system="s", messages=[Message.user("x")], tools=tools)
    body = OpenAIProvider(base_url="http://127.0.0.1:9/v1", api_key=None, model="m").build_body(request)
    assert "tools" in body and "tool_choice" not in body


# -- a 400 naming a parameter: amend once, remember ------------------------------------------


async def test_a_400_naming_max_tokens_switches_the_field_once_and_remembers(fake: FakeOpenAI) -> None:
    fake.enqueue(UNSUPPORTED_MAX_TOKENS, Completion(content=["ok"]), Completion(content=["again"]))
    provider = provider_for(fake, "my-reasoner")  # unknown to the heuristic: starts with max_tokens
    try:
        assert TextDelta("ok") in await run(provider, capped("my-reasoner"))
        assert TextDelta("again") in await run(provider, capped("my-reasoner"))
    finally:
        await provider.aclose()
    sent = [({"max_tokens", "max_completion_tokens"} & set(r.body)).pop() for r in fake.requests]
    assert sent == ["max_tokens", "max_completion_tokens", "max_completion_tokens"]


async def test_the_switch_happens_only_once_per_call(fake: FakeOpenAI) -> None:
    refused_again = ErrorResponse(
        400, "Unsupported parameter: 'max_completion_tokens'.", code="unsupported_parameter"
    )
    fake.enqueue(UNSUPPORTED_MAX_TOKENS, refused_again)
    provider = provider_for(fake)
    with pytest.raises(HarnessError) as info:
        await run(provider, capped("llama3"))
    await provider.aclose()
    assert info.value.kind is ErrorKind.INVALID_REQUEST
    assert len(fake.requests) == 2


async def test_an_unrelated_400_is_not_retried(fake: FakeOpenAI) -> None:
    fake.enqueue(ErrorResponse.bad_request("max_tokens must be at least 1"))
    provider = provider_for(fake)
    with pytest.raises(HarnessError) as info:
        await run(provider, capped("llama3"))
    await provider.aclose()
    assert info.value.kind is ErrorKind.INVALID_REQUEST and len(fake.requests) == 1


async def test_refused_stream_options_are_dropped_and_a_stream_without_usage_is_complete(
    fake: FakeOpenAI,
) -> None:
    fake.enqueue(
        ErrorResponse(
            400, "Unrecognized request argument supplied: stream_options", type="invalid_request_error"
        ),
        Completion(content=["fine"]),
    )
    provider = provider_for(fake)
    try:
        events = await run(provider, capped("llama3"))
    finally:
        await provider.aclose()
    assert events == [TextDelta("fine"), Stop(StopReason.END_TURN)]  # no usage: none reported, no crash
    assert "stream_options" in fake.requests[0].body and "stream_options" not in fake.requests[1].body


async def test_garbled_usage_counts_zero(fake: FakeOpenAI) -> None:
    chunk = '{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}'
    usage = '{"choices":[],"usage":{"prompt_tokens":"lots","completion_tokens":null}}'
    fake.enqueue(RawStream([f"data: {chunk}\n\n", f"data: {usage}\n\n", "data: [DONE]\n\n"]))
    provider = provider_for(fake)
    try:
        events = await run(provider, capped("llama3"))
    finally:
        await provider.aclose()
    assert events[0] == TextDelta("x") and events[-1] == Stop(StopReason.END_TURN)


# -- compaction follows the same field choice --------------------------------------------------


@pytest.mark.parametrize(
    ("model", "field"), [("gpt-5-mini", "max_completion_tokens"), ("llama3", "max_tokens")]
)
async def test_compaction_summary_uses_the_same_field(fake: FakeOpenAI, model: str, field: str) -> None:
    fake.enqueue(Completion(content=["The summary."]))
    provider = provider_for(fake, model)
    try:
        limits = CompactionLimits(summary_max_tokens=777)
        summary = await summarise(
            provider, model, [Message.user("old"), Message(role="assistant", content="x")], limits
        )
    finally:
        await provider.aclose()
    assert summary == "The summary."
    [req] = fake.requests
    assert req.body[field] == 777
    [other] = {"max_tokens", "max_completion_tokens"} - {field}
    assert other not in req.body


# -- the validator really validates ---------------------------------------------------------


def test_the_chat_validator_rejects_bad_bodies() -> None:
    good = OpenAIProvider(base_url="http://127.0.0.1:9/v1", api_key=None, model="m").build_body(capped("m"))
    assert chat_body_error(good) is None
    assert chat_body_error({**good, "messages": [{"role": "tool", "content": "no id"}]}) is not None
    assert chat_body_error({**good, "max_tokens": "ten"}) is not None
    assert chat_body_error({k: v for k, v in good.items() if k != "model"}) is not None
    bad_call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "n"}}],
    }
    assert chat_body_error({**good, "messages": [bad_call]}) is not None


async def test_the_fake_answers_400_to_a_bad_body(fake: FakeOpenAI) -> None:
    provider = provider_for(fake)
    body = provider.build_body(capped("llama3"))
    body["messages"] = [{"role": "tool", "content": "no tool_call_id"}]
    response = await provider._client.post(f"{fake.base_url}/chat/completions", json=body)
    await provider.aclose()
    assert response.status_code == 400 and "invalid body" in response.json()["error"]["message"]
