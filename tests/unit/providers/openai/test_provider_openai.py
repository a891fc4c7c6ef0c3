"""OpenAIProvider against FakeOpenAI: a real uvicorn server speaking the OpenAI SSE format."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from agentd.core.conversation import Message, ToolCall
from agentd.core.errors import ErrorKind, HarnessError
from agentd.core.provider import (
    ProviderRequest,
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
from agentd.providers.openai.chat import OpenAIProvider, classify_http_error, parse_retry_after
from tests.support.fakes.openai_server import (
    Completion,
    ErrorResponse,
    FakeOpenAI,
    RawStream,
    ToolCallScript,
    UsageScript,
    sse,
)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def make_provider(fake: FakeOpenAI, **kwargs: Any) -> OpenAIProvider:
    kwargs.setdefault("api_key", "sk-test")
    return OpenAIProvider(base_url=fake.base_url, model="gpt-test", **kwargs)


def simple_request(**kwargs: Any) -> ProviderRequest:
    return ProviderRequest(model="gpt-test", system="", messages=[Message.user("hi")], **kwargs)


async def collect(provider: OpenAIProvider, request: ProviderRequest | None = None) -> list[StreamEvent]:
    try:
        return [event async for event in provider.stream(request or simple_request())]
    finally:
        await provider.aclose()


async def collect_until_error(
    provider: OpenAIProvider, request: ProviderRequest | None = None
) -> tuple[list[StreamEvent], HarnessError]:
    events: list[StreamEvent] = []
    try:
        with pytest.raises(HarnessError) as info:
            async for event in provider.stream(request or simple_request()):
                events.append(event)
    finally:
        await provider.aclose()
    return events, info.value


# -- happy paths ---------------------------------------------------------------------------


async def test_text_streaming_in_order_with_usage_and_end_turn(fake: FakeOpenAI) -> None:
    fake.enqueue(
        Completion(
            content=["Hel", "lo, ", "world"],
            usage=UsageScript(prompt_tokens=1200, completion_tokens=7, cached_tokens=1024),
        )
    )
    events = await collect(make_provider(fake))
    # The leading role chunk (content "") must not surface as an empty TextDelta.
    assert events == [
        TextDelta("Hel"),
        TextDelta("lo, "),
        TextDelta("world"),
        Usage(input_tokens=176, output_tokens=7, cache_read_tokens=1024, cache_write_tokens=0),
        Stop(StopReason.END_TURN),
    ]
    [usage] = [e for e in events if isinstance(e, Usage)]
    assert usage.model == "fake-model"  # the model the response names (traces' gen_ai.response.model)


@pytest.mark.parametrize("reasoning_field", ["reasoning_content", "reasoning"])
async def test_reasoning_deltas(fake: FakeOpenAI, reasoning_field: str) -> None:
    fake.enqueue(
        Completion(
            reasoning=["Let me ", "think."],
            reasoning_field=reasoning_field,
            content=["42"],
            usage=None,
        )
    )
    events = await collect(make_provider(fake))
    assert events == [
        ReasoningDelta("Let me "),
        ReasoningDelta("think."),
        TextDelta("42"),
        Stop(StopReason.END_TURN),
    ]


PARALLEL_CALLS = [
    ToolCallScript("call_aaa", "read_file", '{"path": "/etc/hosts", "limit": 20}', fragment_size=5),
    ToolCallScript("call_bbb", "search", '{"query": "needle in haystack"}', fragment_size=4),
    ToolCallScript("call_ccc", "list_dir", '{"path": "."}', fragment_size=3),
]


@pytest.mark.parametrize("per_chunk", [1, 2])
async def test_parallel_tool_calls_interleaved(fake: FakeOpenAI, per_chunk: int) -> None:
    fake.enqueue(
        Completion(
            content=["Checking."],
            tool_calls=PARALLEL_CALLS,
            tool_fragments_per_chunk=per_chunk,
            usage=UsageScript(prompt_tokens=50, completion_tokens=30),
        )
    )
    events = await collect(make_provider(fake))

    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    # Truly interleaved: the fragment index sequence starts 0, 1, 2, 0, 1, 2, ...
    assert [d.index for d in deltas[:6]] == [0, 1, 2, 0, 1, 2]
    assert [(d.id, d.name) for d in deltas[:3]] == [(c.id, c.name) for c in PARALLEL_CALLS]
    assert all(d.id is None and d.name is None for d in deltas[3:])
    for index, call in enumerate(PARALLEL_CALLS):
        pieces = [d.arguments_delta for d in deltas if d.index == index]
        assert "".join(pieces) == call.arguments
        assert len([p for p in pieces if p]) == len(call.fragments())

    tail = events[len(events) - 5 :]
    assert tail == [
        ToolCallComplete(0, "call_aaa", "read_file", '{"path": "/etc/hosts", "limit": 20}'),
        ToolCallComplete(1, "call_bbb", "search", '{"query": "needle in haystack"}'),
        ToolCallComplete(2, "call_ccc", "list_dir", '{"path": "."}'),
        Usage(input_tokens=50, output_tokens=30),
        Stop(StopReason.TOOL_USE),
    ]
    assert events[0] == TextDelta("Checking.")
    assert sum(isinstance(e, ToolCallComplete) for e in events) == 3


async def test_request_translation(fake: FakeOpenAI) -> None:
    fake.enqueue(Completion(content=['{"answer": 1}']))
    call = ToolCall(id="call_1", name="read_file", arguments='{"path": "a.txt"}')
    request = ProviderRequest(
        model="gpt-test",
        system="You are terse.",
        messages=[
            Message.user("read a.txt"),
            Message(role="assistant", content="", reasoning="hidden", tool_calls=[call]),
            Message.tool_result(call, "file contents"),
            Message(role="assistant", content="It says: file contents"),
            Message.user("answer as JSON"),
        ],
        tools=[
            ToolSpec(
                name="read_file",
                description="Read a file",
                parameters={"type": "object", "properties": {"path": {"type": "string"}}},
            )
        ],
        output_schema={"type": "object", "properties": {"answer": {"type": "integer"}}},
        max_output_tokens=256,
    )
    events = await collect(make_provider(fake, api_key="sk-secret"), request)
    assert events[-1] == Stop(StopReason.END_TURN)

    [recorded] = fake.requests
    assert recorded.path == "/v1/chat/completions"
    assert recorded.headers["authorization"] == "Bearer sk-secret"
    assert recorded.body == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "read a.txt"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "file contents"},
            {"role": "assistant", "content": "It says: file contents"},
            {"role": "user", "content": "answer as JSON"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "read_file",
                    "description": "Read a file",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                },
            }
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "output",
                "schema": {"type": "object", "properties": {"answer": {"type": "integer"}}},
                "strict": False,
            },
        },
        "max_tokens": 256,
    }


async def test_minimal_request_has_no_optional_fields(fake: FakeOpenAI) -> None:
    fake.enqueue(Completion(content=["ok"]))
    await collect(make_provider(fake, api_key=None))
    [recorded] = fake.requests
    assert "authorization" not in recorded.headers
    assert recorded.body == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


@pytest.mark.parametrize(
    ("finish_reason", "expected"),
    [
        ("stop", StopReason.END_TURN),
        ("length", StopReason.MAX_TOKENS),
        ("content_filter", StopReason.REFUSAL),
        ("tool_calls", StopReason.TOOL_USE),
        ("function_call", StopReason.TOOL_USE),
    ],
)
async def test_finish_reason_mapping(fake: FakeOpenAI, finish_reason: str, expected: StopReason) -> None:
    fake.enqueue(Completion(content=["partial"], finish_reason=finish_reason, usage=None))
    events = await collect(make_provider(fake))
    assert events == [TextDelta("partial"), Stop(expected)]


async def test_refusal_delta_is_text_and_refusal_stop(fake: FakeOpenAI) -> None:
    fake.enqueue(Completion(refusal=["I can't ", "help with that."], usage=None))
    events = await collect(make_provider(fake))
    assert events == [TextDelta("I can't "), TextDelta("help with that."), Stop(StopReason.REFUSAL)]


async def test_first_token_timeout_only_bounds_the_first_event(fake: FakeOpenAI) -> None:
    # Total stream time (~1.5s) exceeds the first-token budget (1s); the first token comes fast.
    fake.enqueue(Completion(content=["a", "b", "c", "d"], chunk_delay=0.25, usage=None))
    events = await collect(make_provider(fake, first_token_timeout=1.0))
    assert events == [
        TextDelta("a"),
        TextDelta("b"),
        TextDelta("c"),
        TextDelta("d"),
        Stop(StopReason.END_TURN),
    ]


# -- wire-format tolerance -----------------------------------------------------------------


def chunk_json(delta: dict[str, Any], finish_reason: str | None = None) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})


async def test_sse_comments_events_and_no_space_data(fake: FakeOpenAI) -> None:
    fake.enqueue(
        RawStream(
            [
                ": OPENROUTER PROCESSING\n\n",
                "event: message\nid: 1\ndata:" + chunk_json({"content": "x"}) + "\n\n",
                "data: " + chunk_json({"content": "y"}) + "\r\n\r\n",
                "data: [DONE]\n\n",
            ]
        )
    )
    # No finish_reason at all, but [DONE] arrived: a complete answer.
    assert await collect(make_provider(fake)) == [TextDelta("x"), TextDelta("y"), Stop(StopReason.END_TURN)]


async def test_tool_calls_with_finish_reason_stop_are_tool_use(fake: FakeOpenAI) -> None:
    fake.enqueue(
        Completion(tool_calls=[ToolCallScript("c1", "ls", '{"path": "."}')], finish_reason="stop", usage=None)
    )
    events = await collect(make_provider(fake))
    assert events[-2:] == [ToolCallComplete(0, "c1", "ls", '{"path": "."}'), Stop(StopReason.TOOL_USE)]


async def test_finish_reason_without_done_is_complete(fake: FakeOpenAI) -> None:
    fake.enqueue(Completion(content=["done"], send_done=False, usage=None))
    assert await collect(make_provider(fake)) == [TextDelta("done"), Stop(StopReason.END_TURN)]


async def test_error_object_inside_stream(fake: FakeOpenAI) -> None:
    fake.enqueue(
        RawStream(
            [
                sse(chunk_json({"content": "par"})).decode(),
                'data: {"error": {"message": "Upstream overloaded", "code": 502}}\n\n',
            ]
        )
    )
    events, error = await collect_until_error(make_provider(fake))
    assert events == [TextDelta("par")]
    assert error.kind is ErrorKind.PROVIDER_UNAVAILABLE
    assert error.status == 502
    assert "Upstream overloaded" in error.message


async def test_non_streamed_json_answer_is_accepted(fake: FakeOpenAI) -> None:
    doc = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c9", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }
    fake.enqueue(RawStream([json.dumps(doc)], content_type="application/json"))
    events = await collect(make_provider(fake))
    assert events == [
        ToolCallDelta(index=0, id="c9", name="ls", arguments_delta="{}"),
        ToolCallComplete(0, "c9", "ls", "{}"),
        Usage(input_tokens=3, output_tokens=2),
        Stop(StopReason.TOOL_USE),
    ]


# -- faults --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "kind", "retry_after"),
    [
        (ErrorResponse.rate_limited(retry_after=7), ErrorKind.RATE_LIMITED, 7.0),
        (ErrorResponse.rate_limited(), ErrorKind.RATE_LIMITED, None),
        (ErrorResponse.insufficient_quota(), ErrorKind.QUOTA, None),
        (ErrorResponse.unauthorized(), ErrorKind.AUTHENTICATION, None),
        (ErrorResponse.forbidden(), ErrorKind.AUTHENTICATION, None),
        (ErrorResponse.forbidden_quota(), ErrorKind.QUOTA, None),
        (ErrorResponse.context_length_exceeded(), ErrorKind.CONTEXT_OVERFLOW, None),
        (ErrorResponse.context_length_exceeded(with_code=False), ErrorKind.CONTEXT_OVERFLOW, None),
        (ErrorResponse.bad_request(), ErrorKind.INVALID_REQUEST, None),
        (ErrorResponse.model_not_found(), ErrorKind.PROVIDER_UNAVAILABLE, None),
        (ErrorResponse.server_error(500), ErrorKind.PROVIDER_UNAVAILABLE, None),
        (ErrorResponse.server_error(503), ErrorKind.PROVIDER_UNAVAILABLE, None),
    ],
    ids=[
        "429-retry-after",
        "429-no-retry-after",
        "429-insufficient-quota",
        "401",
        "403-forbidden",
        "403-quota",
        "400-context-code",
        "400-context-message",
        "400-other",
        "404",
        "500",
        "503",
    ],
)
async def test_http_error_classification(
    fake: FakeOpenAI, response: ErrorResponse, kind: ErrorKind, retry_after: float | None
) -> None:
    fake.enqueue(response)
    events, error = await collect_until_error(make_provider(fake))
    assert events == []
    assert error.kind is kind
    assert error.status == response.status
    assert error.retry_after == retry_after
    assert response.message in error.message  # the server's own explanation is kept


async def test_error_body_that_is_not_json(fake: FakeOpenAI) -> None:
    fake.enqueue(RawStream(["<html>Bad Gateway</html>"], status=502, content_type="text/html"))
    _, error = await collect_until_error(make_provider(fake))
    assert (error.kind, error.status) == (ErrorKind.PROVIDER_UNAVAILABLE, 502)
    assert "Bad Gateway" in error.message


@pytest.mark.parametrize("abrupt", [False, True], ids=["clean-eof", "connection-dropped"])
async def test_stream_cut_midway(fake: FakeOpenAI, abrupt: bool) -> None:
    # Blocks: role chunk, "one ", "two ", "three" ... cut after the second text chunk.
    fake.enqueue(Completion(content=["one ", "two ", "three"], cut_after=3, cut_abruptly=abrupt))
    events, error = await collect_until_error(make_provider(fake))
    assert events == [TextDelta("one "), TextDelta("two ")]
    assert error.kind is ErrorKind.PROVIDER_UNAVAILABLE
    if not abrupt:
        assert "stream cut" in error.message


async def test_malformed_chunk(fake: FakeOpenAI) -> None:
    fake.enqueue(Completion(content=["good ", "bad"], malformed_after=2))
    events, error = await collect_until_error(make_provider(fake))
    assert events == [TextDelta("good ")]
    assert error.kind is ErrorKind.PROVIDER_UNAVAILABLE
    assert "malformed chunk" in error.message


async def test_connection_refused_is_network() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # The port was just released and nothing listens there.
    provider = OpenAIProvider(base_url=f"http://127.0.0.1:{port}/v1", api_key=None, model="m")
    events, error = await collect_until_error(provider)
    assert events == []
    assert error.kind is ErrorKind.NETWORK


async def test_slow_first_token_hits_first_token_timeout(fake: FakeOpenAI) -> None:
    fake.enqueue(Completion(content=["late"], first_chunk_delay=30))
    events, error = await collect_until_error(make_provider(fake, first_token_timeout=0.2))
    assert events == []
    assert error.kind is ErrorKind.TIMEOUT
    assert "first token" in error.message


async def test_read_timeout_is_timeout(fake: FakeOpenAI) -> None:
    fake.enqueue(Completion(content=["late"], first_chunk_delay=30))
    events, error = await collect_until_error(make_provider(fake, timeout=0.2))
    assert events == []
    assert error.kind is ErrorKind.TIMEOUT


async def test_fake_without_script_answers_500(fake: FakeOpenAI) -> None:
    _, error = await collect_until_error(make_provider(fake))
    assert (error.kind, error.status) == (ErrorKind.PROVIDER_UNAVAILABLE, 500)
    assert "no scripted response left" in error.message


# -- client ownership and pure helpers -----------------------------------------------------


async def test_passed_client_is_used_and_not_closed(fake: FakeOpenAI) -> None:
    fake.enqueue(Completion(content=["a"]), Completion(content=["b"]))
    async with httpx.AsyncClient() as client:
        provider = make_provider(fake, client=client)
        events = [e async for e in provider.stream(simple_request())]
        assert events == [TextDelta("a"), Usage(input_tokens=10, output_tokens=5), Stop(StopReason.END_TURN)]
        await provider.aclose()
        assert not client.is_closed
        # Still usable by another provider sharing it.
        events = await collect(make_provider(fake, client=client))
        assert events[0] == TextDelta("b")
    assert len(fake.requests) == 2


def test_parse_retry_after_forms() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after({"retry-after": "12"}, now=now) == 12.0
    assert parse_retry_after({"retry-after": "1.5"}, now=now) == 1.5
    assert parse_retry_after({"retry-after": "Wed, 01 Jan 2025 12:00:30 GMT"}, now=now) == 30.0
    assert parse_retry_after({"retry-after": "Wed, 01 Jan 2025 11:00:00 GMT"}, now=now) == 0.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "1"}, now=now) == 0.25
    assert parse_retry_after({"retry-after": "soon"}, now=now) is None
    assert parse_retry_after({}, now=now) is None


def test_http_date_retry_after_through_classification() -> None:
    error = classify_http_error(
        429, {"error": {"message": "slow down"}}, {"retry-after": "Thu, 01 Jan 1970 00:00:00 GMT"}
    )
    assert (error.kind, error.retry_after, error.status) == (ErrorKind.RATE_LIMITED, 0.0, 429)
