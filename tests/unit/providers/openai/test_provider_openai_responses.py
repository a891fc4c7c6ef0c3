"""OpenAIResponsesProvider against FakeResponses: a real uvicorn server speaking the Responses
API's SSE wire format, rejecting bodies the official `openai` request types reject."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentd.core.conversation import Message, ReasoningBlock, ToolCall
from agentd.core.errors import ErrorKind, HarnessError
from agentd.core.provider import (
    ProviderRequest,
    ReasoningBlockComplete,
    ReasoningDelta,
    Stop,
    StopReason,
    StreamEvent,
    TextDelta,
    ToolCallComplete,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from agentd.infra.config import ReasoningEffort
from agentd.providers.openai.responses import OpenAIResponsesProvider
from tests.support.fakes.openai_responses_server import (
    ErrorResponse,
    FakeResponses,
    FunctionCallItem,
    MessageItem,
    RawStream,
    ReasoningItem,
    ResponseStream,
    ResponsesUsage,
)
from tests.support.openai_types import responses_body_error

TOOLS = [ToolSpec("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})]


@pytest.fixture
async def fake() -> AsyncIterator[FakeResponses]:
    async with FakeResponses() as server:
        yield server


def make_provider(fake: FakeResponses, model: str = "gpt-5", **kwargs: Any) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(base_url=fake.base_url, api_key="sk-test", model=model, **kwargs)


def simple_request(model: str = "gpt-5", **kwargs: Any) -> ProviderRequest:
    return ProviderRequest(model=model, system="Be brief.", messages=[Message.user("hi")], **kwargs)


async def collect(
    provider: OpenAIResponsesProvider, request: ProviderRequest | None = None
) -> list[StreamEvent]:
    try:
        return [event async for event in provider.stream(request or simple_request())]
    finally:
        await provider.aclose()


async def collect_error(provider: OpenAIResponsesProvider) -> tuple[list[StreamEvent], HarnessError]:
    events: list[StreamEvent] = []
    try:
        with pytest.raises(HarnessError) as info:
            async for event in provider.stream(simple_request()):
                events.append(event)
    finally:
        await provider.aclose()
    return events, info.value


# -- streaming ------------------------------------------------------------------------------


async def test_text_usage_with_cached_tokens(fake: FakeResponses) -> None:
    usage = ResponsesUsage(input_tokens=1200, output_tokens=9, cached_tokens=1024)
    fake.enqueue(ResponseStream([MessageItem(["Hel", "lo"])], usage=usage))
    events = await collect(make_provider(fake))
    assert events == [
        TextDelta("Hel"),
        TextDelta("lo"),
        Usage(input_tokens=176, output_tokens=9, cache_read_tokens=1024),
        Stop(StopReason.END_TURN),
    ]
    [req] = fake.requests
    assert req.path == "/v1/responses" and req.headers["authorization"] == "Bearer sk-test"
    assert req.body["stream"] is True and req.body["store"] is False
    assert req.body["instructions"] == "Be brief."
    assert req.body["input"] == [{"role": "user", "content": "hi"}]
    [usage] = [e for e in events if isinstance(e, Usage)]
    assert usage.model == "gpt-fake"  # the model the response names (traces' gen_ai.response.model)


async def test_reasoning_summary_item_and_parallel_function_calls(fake: FakeResponses) -> None:
    reasoning = ReasoningItem(["Look at the file.", "Then list."], encrypted_content="enc-123", id="rs_1")
    calls = [
        FunctionCallItem("call_a", "read_file", '{"path": "README.md"}', fragment_size=5),
        FunctionCallItem("call_b", "list_dir", '{"path": "."}', fragment_size=4),
    ]
    fake.enqueue(ResponseStream([reasoning, *calls], usage=None))
    events = await collect(make_provider(fake), simple_request(tools=TOOLS))

    thought = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert thought == "Look at the file.\n\nThen list."
    [block] = [e.block for e in events if isinstance(e, ReasoningBlockComplete)]
    assert block == ReasoningBlock(
        provider="openai-responses",
        data={
            "id": "rs_1",
            "type": "reasoning",
            "summary": [
                {"type": "summary_text", "text": "Look at the file."},
                {"type": "summary_text", "text": "Then list."},
            ],
            "encrypted_content": "enc-123",
        },
    )
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(d.index, d.id, d.name) for d in deltas if d.id] == [
        (0, "call_a", "read_file"),
        (1, "call_b", "list_dir"),
    ]
    assert "".join(d.arguments_delta for d in deltas if d.index == 0) == '{"path": "README.md"}'
    assert events[-3:] == [
        ToolCallComplete(0, "call_a", "read_file", '{"path": "README.md"}'),
        ToolCallComplete(1, "call_b", "list_dir", '{"path": "."}'),
        Stop(StopReason.TOOL_USE),
    ]


async def test_incomplete_and_refusal_stops(fake: FakeResponses) -> None:
    fake.enqueue(
        ResponseStream([MessageItem(["cut"])], incomplete_reason="max_output_tokens", usage=None),
        ResponseStream([MessageItem(["I can't help."], refusal=True)], usage=None),
    )
    assert await collect(make_provider(fake)) == [TextDelta("cut"), Stop(StopReason.MAX_TOKENS)]
    assert await collect(make_provider(fake)) == [TextDelta("I can't help."), Stop(StopReason.REFUSAL)]


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"code": "rate_limit_exceeded", "message": "Rate limit reached"}, ErrorKind.RATE_LIMITED),
        ({"code": "server_error", "message": "The server had an error"}, ErrorKind.PROVIDER_UNAVAILABLE),
        ({"code": "invalid_prompt", "message": "Invalid prompt"}, ErrorKind.INVALID_REQUEST),
        (
            {"code": "context_length_exceeded", "message": "Your input exceeds the context window"},
            ErrorKind.CONTEXT_OVERFLOW,
        ),
    ],
)
async def test_response_failed_is_classified(
    fake: FakeResponses, error: dict[str, str], kind: ErrorKind
) -> None:
    fake.enqueue(ResponseStream([MessageItem(["partial"])], fail_with=error))
    events, err = await collect_error(make_provider(fake))
    assert events == [TextDelta("partial")]
    assert err.kind is kind and error["message"] in err.message


async def test_error_event_is_classified(fake: FakeResponses) -> None:
    fake.enqueue(
        ResponseStream([], error_event={"code": "rate_limit_exceeded", "message": "slow down", "param": None})
    )
    _, err = await collect_error(make_provider(fake))
    assert err.kind is ErrorKind.RATE_LIMITED


async def test_cut_before_completed_is_provider_unavailable(fake: FakeResponses) -> None:
    fake.enqueue(ResponseStream([MessageItem(["a", "b"])], cut_after=5))
    events, err = await collect_error(make_provider(fake))
    assert events == [TextDelta("a")]
    assert err.kind is ErrorKind.PROVIDER_UNAVAILABLE and "stream cut" in err.message


async def test_http_error_is_classified(fake: FakeResponses) -> None:
    fake.enqueue(ErrorResponse.rate_limited(retry_after=7))
    _, err = await collect_error(make_provider(fake))
    assert (err.kind, err.status, err.retry_after) == (ErrorKind.RATE_LIMITED, 429, 7.0)


async def test_non_streamed_json_answer(fake: FakeResponses) -> None:
    # A server that ignores stream: true answers with the Response object itself.
    script = ResponseStream([ReasoningItem(["Hmm."], id="rs_9"), MessageItem(["Done."])])
    completed = script.events()[-1][1]["response"]
    fake.enqueue(RawStream([json.dumps(completed)], content_type="application/json"))
    events = await collect(make_provider(fake))
    assert events[0] == ReasoningDelta("Hmm.")
    assert isinstance(events[1], ReasoningBlockComplete) and events[1].block.data["id"] == "rs_9"
    assert events[2:] == [
        TextDelta("Done."),
        Usage(input_tokens=20, output_tokens=8),
        Stop(StopReason.END_TURN),
    ]


# -- request translation ----------------------------------------------------------------------


def tool_round_messages() -> list[Message]:
    anthropic_block = ReasoningBlock(provider="anthropic", data={"type": "thinking", "signature": "x"})
    rs = {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "enc-1"}
    return [
        Message.user("read it"),
        Message(
            role="assistant",
            content="Reading.",
            reasoning="thinking...",
            reasoning_blocks=[ReasoningBlock(provider="openai-responses", data=rs), anthropic_block],
            tool_calls=[ToolCall(id="call_a", name="read_file", arguments='{"path": "README.md"}')],
        ),
        Message.tool_result(ToolCall(id="call_a", name="read_file"), "# Demo"),
    ]


def test_body_carries_reasoning_items_back_before_the_calls() -> None:
    provider = OpenAIResponsesProvider(base_url="http://127.0.0.1:9/v1", api_key=None, model="gpt-5")
    body = provider.build_body(
        ProviderRequest(model="gpt-5", system="sys", messages=tool_round_messages(), tools=TOOLS)
    )
    assert body["input"] == [
        {"role": "user", "content": "read it"},
        {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "enc-1"},  # verbatim
        {"role": "assistant", "content": "Reading."},
        {
            "type": "function_call",
            "call_id": "call_a",
            "name": "read_file",
            "arguments": '{"path": "README.md"}',
        },
        {"type": "function_call_output", "call_id": "call_a", "output": "# Demo"},
    ]  # the Anthropic thinking block is not this API's: left out
    [tool] = body["tools"]
    assert tool == {
        "type": "function",
        "name": "read_file",
        "description": "Read a file",
        "parameters": TOOLS[0].parameters,
        "strict": False,
    }
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["reasoning"] == {"summary": "auto"}
    assert "tool_choice" not in body
    assert responses_body_error(body) is None


def test_body_options_by_model() -> None:
    provider = OpenAIResponsesProvider(
        base_url="http://127.0.0.1:9/v1", api_key=None, model="gpt-5", reasoning_effort=ReasoningEffort.HIGH
    )
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    body = provider.build_body(simple_request("o4-mini", output_schema=schema, max_output_tokens=500))
    assert body["reasoning"] == {"summary": "auto", "effort": "high"}
    assert body["max_output_tokens"] == 500
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "output", "schema": schema, "strict": False}
    }
    assert responses_body_error(body) is None
    # A non-reasoning model refuses encrypted reasoning and reasoning options: none are sent.
    plain = provider.build_body(simple_request("gpt-4.1"))
    assert "include" not in plain and "reasoning" not in plain


def test_the_validator_rejects_bad_bodies() -> None:
    provider = OpenAIResponsesProvider(base_url="http://127.0.0.1:9/v1", api_key=None, model="gpt-5")
    good = provider.build_body(ProviderRequest(model="gpt-5", system="", messages=tool_round_messages()))
    assert responses_body_error(good) is None
    no_arguments = json.loads(json.dumps(good))
    del no_arguments["input"][3]["arguments"]
    assert responses_body_error(no_arguments) is not None
    assert responses_body_error({**good, "include": ["reasoning.everything"]}) is not None
    assert responses_body_error({**good, "store": "no"}) is not None


async def test_the_fake_answers_400_to_a_bad_body(fake: FakeResponses) -> None:
    provider = make_provider(fake)
    body = provider.build_body(simple_request())
    body["input"] = [{"type": "function_call", "call_id": "call_a", "name": "read_file"}]  # no arguments
    response = await provider._client.post(f"{fake.base_url}/responses", json=body)
    await provider.aclose()
    assert response.status_code == 400 and "invalid body" in response.json()["error"]["message"]
