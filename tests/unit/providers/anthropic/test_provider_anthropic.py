"""AnthropicProvider against FakeAnthropic: a real uvicorn server speaking the Messages SSE format."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
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
from agentd.providers.anthropic.provider import AnthropicProvider, classify_http_error
from tests.support.fakes.anthropic_server import (
    ErrorResponse,
    FakeAnthropic,
    RawStream,
    StreamedMessage,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    UsageScript,
    sse_event,
)


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def make_provider(fake: FakeAnthropic, **kwargs: Any) -> AnthropicProvider:
    kwargs.setdefault("api_key", "sk-ant-test")
    return AnthropicProvider(base_url=fake.base_url, model="claude-test", **kwargs)


def simple_request(**kwargs: Any) -> ProviderRequest:
    return ProviderRequest(model="claude-test", system="", messages=[Message.user("hi")], **kwargs)


async def collect(provider: AnthropicProvider, request: ProviderRequest | None = None) -> list[StreamEvent]:
    try:
        return [event async for event in provider.stream(request or simple_request())]
    finally:
        await provider.aclose()


async def collect_until_error(
    provider: AnthropicProvider, request: ProviderRequest | None = None
) -> tuple[list[StreamEvent], HarnessError]:
    events: list[StreamEvent] = []
    try:
        with pytest.raises(HarnessError) as info:
            async for event in provider.stream(request or simple_request()):
                events.append(event)
    finally:
        await provider.aclose()
    return events, info.value


def raw_event(name: str, **data: Any) -> str:
    return sse_event(name, json.dumps({"type": name, **data})).decode()


def message_start(**usage: int) -> str:
    message = {"id": "msg_x", "type": "message", "role": "assistant", "content": [], "usage": usage}
    return raw_event("message_start", message=message)


# -- happy paths ---------------------------------------------------------------------------


async def test_text_streaming_in_order_with_usage_and_end_turn(fake: FakeAnthropic) -> None:
    fake.enqueue(
        StreamedMessage(
            [TextBlock(["Hel", "lo, ", "world"])], usage=UsageScript(input_tokens=12, output_tokens=7)
        )
    )
    events = await collect(make_provider(fake))
    # message_start, ping, content_block_start/stop and message_stop surface as nothing.
    assert events == [
        TextDelta("Hel"),
        TextDelta("lo, "),
        TextDelta("world"),
        Usage(input_tokens=12, output_tokens=7, cache_read_tokens=0, cache_write_tokens=0),
        Stop(StopReason.END_TURN),
    ]
    [usage] = [e for e in events if isinstance(e, Usage)]
    assert usage.model == "claude-fake-4"  # the model the response names (traces' gen_ai.response.model)


async def test_thinking_becomes_reasoning_and_a_signed_block(fake: FakeAnthropic) -> None:
    thinking = ThinkingBlock(["Let me ", "think."])
    fake.enqueue(
        StreamedMessage(
            [thinking, TextBlock(["4", "2"])], usage=UsageScript(input_tokens=3, output_tokens=30)
        )
    )
    events = await collect(make_provider(fake))
    assert events == [
        ReasoningDelta("Let me "),
        ReasoningDelta("think."),
        ReasoningBlockComplete(ReasoningBlock(provider="anthropic", data=thinking.wire())),
        TextDelta("4"),
        TextDelta("2"),
        Usage(input_tokens=3, output_tokens=30),
        Stop(StopReason.END_TURN),
    ]


TOOL_CALLS = [
    ToolUseBlock("toolu_01A", "read_file", '{"path": "/etc/hosts", "limit": 20}', fragment_size=5),
    ToolUseBlock("toolu_01B", "search", '{"query": "needle \\"in\\" haystack", "tags": ["a", "b"]}', 3),
]


async def test_two_tool_use_blocks_with_partial_json(fake: FakeAnthropic) -> None:
    fake.enqueue(StreamedMessage([TextBlock(["Checking."]), *TOOL_CALLS]))
    events = await collect(make_provider(fake))

    assert events[0] == TextDelta("Checking.")
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    # A header delta per call (id + name), then only argument fragments; tool indices count
    # tool calls (0, 1) even though the content blocks are 1 and 2.
    assert [(d.index, d.id, d.name) for d in deltas if d.id] == [
        (0, "toolu_01A", "read_file"),
        (1, "toolu_01B", "search"),
    ]
    for index, call in enumerate(TOOL_CALLS):
        pieces = [d.arguments_delta for d in deltas if d.index == index and d.id is None]
        assert len(pieces) > 3  # really streamed in fragments
        assert "".join(pieces) == call.input_json

    completes = [e for e in events if isinstance(e, ToolCallComplete)]
    assert completes == [
        ToolCallComplete(0, "toolu_01A", "read_file", '{"path": "/etc/hosts", "limit": 20}'),
        ToolCallComplete(
            1, "toolu_01B", "search", '{"query": "needle \\"in\\" haystack", "tags": ["a", "b"]}'
        ),
    ]
    assert json.loads(completes[1].arguments) == {"query": 'needle "in" haystack', "tags": ["a", "b"]}
    # Each call completes at its content_block_stop: before the next call's header.
    order = [e for e in events if isinstance(e, ToolCallComplete) or (isinstance(e, ToolCallDelta) and e.id)]
    assert [type(e).__name__ for e in order] == [
        "ToolCallDelta",
        "ToolCallComplete",
        "ToolCallDelta",
        "ToolCallComplete",
    ]
    assert events[-2:] == [Usage(input_tokens=10, output_tokens=5), Stop(StopReason.TOOL_USE)]


async def test_tool_use_without_input_is_empty_object(fake: FakeAnthropic) -> None:
    fake.enqueue(StreamedMessage([ToolUseBlock("toolu_1", "list_dir", "")]))
    events = await collect(make_provider(fake))
    assert [e for e in events if isinstance(e, ToolCallComplete)] == [
        ToolCallComplete(0, "toolu_1", "list_dir", "{}")
    ]


@pytest.mark.parametrize("full_delta_usage", [False, True], ids=["delta-output-only", "delta-cumulative"])
async def test_usage_with_cache_read_and_write(fake: FakeAnthropic, full_delta_usage: bool) -> None:
    fake.enqueue(
        StreamedMessage.from_text(
            "cached",
            usage=UsageScript(
                input_tokens=25,
                output_tokens=40,
                cache_creation_input_tokens=1800,
                cache_read_input_tokens=12000,
            ),
            full_delta_usage=full_delta_usage,
        )
    )
    events = await collect(make_provider(fake))
    usages = [e for e in events if isinstance(e, Usage)]
    # Exactly one Usage, right before Stop; the final output count (not message_start's 1).
    assert usages == [
        Usage(input_tokens=25, output_tokens=40, cache_read_tokens=12000, cache_write_tokens=1800)
    ]
    assert events[-2] == usages[0]


async def test_message_delta_usage_overrides_message_start(fake: FakeAnthropic) -> None:
    fake.enqueue(
        RawStream(
            [
                message_start(input_tokens=5, cache_read_input_tokens=0, output_tokens=1),
                raw_event("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 9}),
                raw_event(
                    "message_delta",
                    delta={},
                    usage={"input_tokens": 7, "cache_read_input_tokens": 100, "output_tokens": 11},
                ),
                raw_event("message_stop"),
            ]
        )
    )
    events = await collect(make_provider(fake))
    assert events == [
        Usage(input_tokens=7, output_tokens=11, cache_read_tokens=100),
        Stop(StopReason.END_TURN),
    ]


@pytest.mark.parametrize(
    ("stop_reason", "expected"),
    [
        ("end_turn", StopReason.END_TURN),
        ("stop_sequence", StopReason.END_TURN),
        ("pause_turn", StopReason.END_TURN),
        ("tool_use", StopReason.TOOL_USE),
        ("max_tokens", StopReason.MAX_TOKENS),
        ("model_context_window_exceeded", StopReason.MAX_TOKENS),
        ("refusal", StopReason.REFUSAL),
        ("some_future_reason", StopReason.END_TURN),
    ],
)
async def test_stop_reason_mapping(fake: FakeAnthropic, stop_reason: str, expected: StopReason) -> None:
    fake.enqueue(StreamedMessage([TextBlock(["partial"])], stop_reason=stop_reason))
    events = await collect(make_provider(fake))
    assert events == [TextDelta("partial"), Usage(input_tokens=10, output_tokens=5), Stop(expected)]


async def test_max_tokens_inside_a_tool_call_keeps_the_partial_arguments(fake: FakeAnthropic) -> None:
    # The API closes the truncated tool_use block and reports max_tokens.
    fake.enqueue(
        StreamedMessage([ToolUseBlock("toolu_1", "write", '{"content": "abc')], stop_reason="max_tokens")
    )
    events = await collect(make_provider(fake))
    assert events[-3:] == [
        ToolCallComplete(0, "toolu_1", "write", '{"content": "abc'),
        Usage(input_tokens=10, output_tokens=5),
        Stop(StopReason.MAX_TOKENS),
    ]


async def test_first_token_timeout_only_bounds_the_first_token(fake: FakeAnthropic) -> None:
    # 11 events 0.1s apart (~1s in all) exceed the 0.6s budget; the first text comes at ~0.3s.
    fake.enqueue(StreamedMessage([TextBlock(["a", "b", "c", "d"])], event_delay=0.1))
    events = await collect(make_provider(fake, first_token_timeout=0.6))
    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta(t) for t in "abcd"]
    assert events[-1] == Stop(StopReason.END_TURN)


# -- request translation -----------------------------------------------------------------------


def conversation_request() -> ProviderRequest:
    return ProviderRequest(
        model="claude-test",
        system="You are terse.",
        messages=[
            Message.system("Workspace: /repo"),
            Message.user("look at a.txt"),
            Message.user("and b.txt"),
            Message(
                role="assistant",
                content="Reading both.",
                reasoning="I should read them in parallel.",
                tool_calls=[
                    ToolCall(id="toolu_a", name="read_file", arguments='{"path": "a.txt"}'),
                    ToolCall(id="toolu_b", name="read_file", arguments='{"path": "b.txt'),
                ],
            ),
            Message.tool_result(ToolCall(id="toolu_a", name="read_file"), "alpha"),
            Message.tool_result(ToolCall(id="toolu_b", name="read_file"), "", is_error=True),
            Message.user("now summarise"),
            Message(role="assistant", content="", reasoning="only thoughts, dropped"),
            Message(role="assistant", content="Summary: alpha."),
            Message.user("thanks"),
        ],
        tools=[
            ToolSpec(
                "read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}}
            )
        ],
        output_schema={"type": "object"},  # no native schema support: not sent
        max_output_tokens=256,
    )


async def test_request_translation_exact_body_and_headers(fake: FakeAnthropic) -> None:
    fake.enqueue(StreamedMessage.from_text("ok"))
    # Caching off: the plain body (test_anthropic_request.py covers the breakpoints).
    events = await collect(make_provider(fake, prompt_cache=False), conversation_request())
    assert events[0] == TextDelta("ok")  # the strict fake accepted the body

    [recorded] = fake.requests
    assert recorded.path == "/v1/messages"
    assert recorded.headers["x-api-key"] == "sk-ant-test"
    assert recorded.headers["anthropic-version"] == "2023-06-01"
    assert recorded.headers["content-type"] == "application/json"
    assert "authorization" not in recorded.headers
    assert recorded.body == {
        "model": "claude-test",
        "max_tokens": 256,
        "system": "You are terse.\n\nWorkspace: /repo",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "look at a.txt"}, {"type": "text", "text": "and b.txt"}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Reading both."},
                    {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a.txt"}},
                    {
                        "type": "tool_use",
                        "id": "toolu_b",
                        "name": "read_file",
                        "input": {"_raw": '{"path": "b.txt'},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "alpha", "is_error": False},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_b",
                        "content": "(no output)",
                        "is_error": True,
                    },
                    {"type": "text", "text": "now summarise"},
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Summary: alpha."}]},
            {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
        ],
        "tools": [
            {
                "name": "read_file",
                "description": "Read a file",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
            }
        ],
        "stream": True,
    }


async def test_minimal_request_uses_defaults(fake: FakeAnthropic) -> None:
    fake.enqueue(StreamedMessage.from_text("ok"))
    provider = AnthropicProvider(
        base_url=fake.base_url + "/v1/",
        api_key="k",
        model="claude-default",
        max_tokens=1000,
        prompt_cache=False,
    )
    await collect(provider, ProviderRequest(model="", system="", messages=[Message.user("hi")]))
    [recorded] = fake.requests
    assert recorded.path == "/v1/messages"  # a trailing /v1 in base_url is tolerated
    assert recorded.body == {
        "model": "claude-default",
        "max_tokens": 1000,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "stream": True,
    }


def test_build_body_puts_tool_results_first_and_drops_blank_text() -> None:
    provider = AnthropicProvider(api_key=None, model="m", prompt_cache=False)
    call = ToolCall(id="t1", name="ls", arguments="[1, 2]")  # valid JSON, but not an object
    body = provider.build_body(
        ProviderRequest(
            model="m",
            system="",
            messages=[
                Message.user("go"),
                Message(role="assistant", content="  \n", tool_calls=[call]),
                Message.user("(interjection)"),
                Message.tool_result(call, "out"),
            ],
        )
    )
    assert body["max_tokens"] == 8192
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {"_raw": "[1, 2]"}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "out", "is_error": False},
                {"type": "text", "text": "(interjection)"},
            ],
        },
    ]


# -- wire-format tolerance ---------------------------------------------------------------------


async def test_unknown_events_and_blocks_are_ignored(fake: FakeAnthropic) -> None:
    fake.enqueue(
        RawStream(
            [
                ": keep-alive comment\n\n",
                message_start(input_tokens=1, output_tokens=1),
                raw_event(
                    "content_block_start", index=0, content_block={"type": "redacted_thinking", "data": "x"}
                ),
                raw_event("content_block_stop", index=0),
                raw_event(
                    "content_block_start",
                    index=1,
                    content_block={
                        "type": "server_tool_use",
                        "id": "srvtoolu_1",
                        "name": "web_search",
                        "input": {},
                    },
                ),
                raw_event(
                    "content_block_delta", index=1, delta={"type": "input_json_delta", "partial_json": "{}"}
                ),
                raw_event("content_block_stop", index=1),
                raw_event("content_block_start", index=2, content_block={"type": "text", "text": ""}),
                raw_event("content_block_delta", index=2, delta={"type": "citations_delta", "citation": {}}),
                "event: content_block_delta\r\ndata:"
                + json.dumps(
                    {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "x"}}
                )
                + "\r\n\r\n",
                raw_event("brand_new_event", payload=1),
                raw_event("content_block_stop", index=2),
                raw_event("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 2}),
                raw_event("message_stop"),
                raw_event("ping"),  # after message_stop: never read
            ]
        )
    )
    events = await collect(make_provider(fake))
    assert events == [
        # redacted_thinking is kept (verbatim) to be sent back, never shown.
        ReasoningBlockComplete(
            ReasoningBlock(provider="anthropic", data={"type": "redacted_thinking", "data": "x"})
        ),
        TextDelta("x"),
        Usage(input_tokens=1, output_tokens=2),
        Stop(StopReason.END_TURN),
    ]


async def test_tool_block_left_open_still_completes(fake: FakeAnthropic) -> None:
    fake.enqueue(
        RawStream(
            [
                message_start(input_tokens=1),
                raw_event(
                    "content_block_start",
                    index=0,
                    content_block={"type": "tool_use", "id": "toolu_9", "name": "ls", "input": {}},
                ),
                raw_event(
                    "content_block_delta",
                    index=0,
                    delta={"type": "input_json_delta", "partial_json": '{"a":1}'},
                ),
                raw_event("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 3}),
                raw_event("message_stop"),
            ]
        )
    )
    events = await collect(make_provider(fake))
    assert events[-3:] == [
        ToolCallComplete(0, "toolu_9", "ls", '{"a":1}'),
        Usage(input_tokens=1, output_tokens=3),
        Stop(StopReason.TOOL_USE),
    ]


async def test_non_streamed_json_message_is_accepted(fake: FakeAnthropic) -> None:
    doc = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "text", "text": "Listing."},
            {"type": "tool_use", "id": "toolu_7", "name": "ls", "input": {"path": "."}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 3, "output_tokens": 2, "cache_read_input_tokens": 1},
    }
    fake.enqueue(RawStream([json.dumps(doc)], content_type="application/json"))
    events = await collect(make_provider(fake))
    assert events == [
        ReasoningDelta("hmm"),
        ReasoningBlockComplete(
            ReasoningBlock(
                provider="anthropic", data={"type": "thinking", "thinking": "hmm", "signature": "sig"}
            )
        ),
        TextDelta("Listing."),
        ToolCallDelta(index=0, id="toolu_7", name="ls", arguments_delta='{"path": "."}'),
        ToolCallComplete(0, "toolu_7", "ls", '{"path": "."}'),
        Usage(input_tokens=3, output_tokens=2, cache_read_tokens=1),
        Stop(StopReason.TOOL_USE),
    ]


# -- faults ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "kind", "retry_after"),
    [
        (ErrorResponse.rate_limited(retry_after=7), ErrorKind.RATE_LIMITED, 7.0),
        (ErrorResponse.rate_limited(), ErrorKind.RATE_LIMITED, None),
        (ErrorResponse.overloaded(), ErrorKind.PROVIDER_UNAVAILABLE, None),
        (ErrorResponse.api_error(500), ErrorKind.PROVIDER_UNAVAILABLE, None),
        (ErrorResponse.api_error(503), ErrorKind.PROVIDER_UNAVAILABLE, None),
        (ErrorResponse.unauthorized(), ErrorKind.AUTHENTICATION, None),
        (ErrorResponse.permission_denied(), ErrorKind.AUTHENTICATION, None),
        (ErrorResponse.permission_billing(), ErrorKind.QUOTA, None),
        (ErrorResponse.prompt_too_long(), ErrorKind.CONTEXT_OVERFLOW, None),
        (ErrorResponse.context_limit(), ErrorKind.CONTEXT_OVERFLOW, None),
        (ErrorResponse.request_too_large(), ErrorKind.CONTEXT_OVERFLOW, None),
        (ErrorResponse.credit_too_low(), ErrorKind.QUOTA, None),
        (ErrorResponse.bad_request(), ErrorKind.INVALID_REQUEST, None),
        (
            ErrorResponse.bad_request(
                "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens"
            ),
            ErrorKind.INVALID_REQUEST,
            None,
        ),
        (ErrorResponse.not_found(), ErrorKind.PROVIDER_UNAVAILABLE, None),
    ],
    ids=[
        "429-retry-after",
        "429-no-retry-after",
        "529-overloaded",
        "500",
        "503",
        "401",
        "403-permission",
        "403-billing",
        "400-prompt-too-long",
        "400-context-limit",
        "413-request-too-large",
        "400-credit-balance",
        "400-other",
        "400-max-tokens-too-high",
        "404",
    ],
)
async def test_http_error_classification(
    fake: FakeAnthropic, response: ErrorResponse, kind: ErrorKind, retry_after: float | None
) -> None:
    fake.enqueue(response)
    events, error = await collect_until_error(make_provider(fake))
    assert events == []
    assert error.kind is kind
    assert error.status == response.status
    assert error.retry_after == retry_after
    assert response.message in error.message  # the server's own explanation is kept
    assert response.type in error.message
    assert response.request_id in error.message


async def test_overloaded_with_retry_after_keeps_it(fake: FakeAnthropic) -> None:
    response = ErrorResponse.overloaded()
    response.headers["retry-after"] = "3"
    fake.enqueue(response)
    _, error = await collect_until_error(make_provider(fake))
    assert (error.kind, error.status, error.retry_after) == (ErrorKind.PROVIDER_UNAVAILABLE, 529, 3.0)


async def test_missing_api_key_is_authentication(fake: FakeAnthropic) -> None:
    _, error = await collect_until_error(make_provider(fake, api_key=None))
    assert (error.kind, error.status) == (ErrorKind.AUTHENTICATION, 401)
    assert "x-api-key" in error.message
    assert "x-api-key" not in fake.requests[0].headers


async def test_error_body_that_is_not_json(fake: FakeAnthropic) -> None:
    fake.enqueue(RawStream(["<html>Bad Gateway</html>"], status=502, content_type="text/html"))
    _, error = await collect_until_error(make_provider(fake))
    assert (error.kind, error.status) == (ErrorKind.PROVIDER_UNAVAILABLE, 502)
    assert "Bad Gateway" in error.message


@pytest.mark.parametrize("abrupt", [False, True], ids=["clean-eof", "connection-dropped"])
async def test_stream_cut_midway(fake: FakeAnthropic, abrupt: bool) -> None:
    # Events: message_start, ping, block start, "one ", "two ", "three", ... cut after "two ".
    fake.enqueue(StreamedMessage([TextBlock(["one ", "two ", "three"])], cut_after=5, cut_abruptly=abrupt))
    events, error = await collect_until_error(make_provider(fake))
    assert events == [TextDelta("one "), TextDelta("two ")]
    assert error.kind is ErrorKind.PROVIDER_UNAVAILABLE
    if not abrupt:
        assert "stream cut" in error.message


async def test_stream_cut_inside_a_tool_call(fake: FakeAnthropic) -> None:
    # message_start, ping, block start, then the first 3 input_json_delta fragments.
    fake.enqueue(StreamedMessage([ToolUseBlock("toolu_1", "ls", '{"path": "/tmp"}', 4)], cut_after=6))
    events, error = await collect_until_error(make_provider(fake))
    assert not any(isinstance(e, ToolCallComplete) for e in events)
    assert error.kind is ErrorKind.PROVIDER_UNAVAILABLE


async def test_stream_cut_just_before_message_stop(fake: FakeAnthropic) -> None:
    message = StreamedMessage.from_text("done")
    fake.enqueue(StreamedMessage.from_text("done", cut_after=len(message.events()) - 1))
    events, error = await collect_until_error(make_provider(fake))
    assert events == [TextDelta("done")]
    assert error.kind is ErrorKind.PROVIDER_UNAVAILABLE
    assert "message_stop" in error.message


async def test_malformed_event_data(fake: FakeAnthropic) -> None:
    # Events: message_start, ping, block start, "good ", <malformed>, ...
    fake.enqueue(StreamedMessage([TextBlock(["good ", "bad"])], malformed_after=4))
    events, error = await collect_until_error(make_provider(fake))
    assert events == [TextDelta("good ")]
    assert error.kind is ErrorKind.PROVIDER_UNAVAILABLE
    assert "malformed chunk" in error.message


@pytest.mark.parametrize(
    "bad_event",
    [
        raw_event("content_block_delta", delta={"type": "text_delta", "text": "no index"}),
        raw_event("content_block_delta", index=5, delta={"type": "input_json_delta", "partial_json": "{"}),
        raw_event("content_block_start", index="0", content_block={"type": "text", "text": ""}),
        sse_event("message_delta", "[1, 2]").decode(),
    ],
    ids=["missing-index", "json-delta-for-unknown-block", "string-index", "not-an-object"],
)
async def test_structurally_malformed_events(fake: FakeAnthropic, bad_event: str) -> None:
    fake.enqueue(RawStream([message_start(input_tokens=1), bad_event, raw_event("message_stop")]))
    events, error = await collect_until_error(make_provider(fake))
    assert events == []
    assert error.kind is ErrorKind.PROVIDER_UNAVAILABLE
    assert "malformed chunk" in error.message


@pytest.mark.parametrize(
    ("error_type", "message", "kind"),
    [
        ("overloaded_error", "Overloaded", ErrorKind.PROVIDER_UNAVAILABLE),
        ("api_error", "Internal server error", ErrorKind.PROVIDER_UNAVAILABLE),
        (
            "rate_limit_error",
            "Number of concurrent connections has exceeded your rate limit",
            ErrorKind.RATE_LIMITED,
        ),
        (
            "invalid_request_error",
            "prompt is too long: 201000 tokens > 200000 maximum",
            ErrorKind.CONTEXT_OVERFLOW,
        ),
    ],
)
async def test_error_event_inside_stream(
    fake: FakeAnthropic, error_type: str, message: str, kind: ErrorKind
) -> None:
    # Events: message_start, ping, block start, "par", then the error event.
    fake.enqueue(
        StreamedMessage(
            [TextBlock(["par", "tial"])], error_after=4, error_type=error_type, error_message=message
        )
    )
    events, error = await collect_until_error(make_provider(fake))
    assert events == [TextDelta("par")]
    assert error.kind is kind
    assert error.status is None  # the HTTP status was 200
    assert message in error.message
    assert error_type in error.message


async def test_connection_refused_is_network() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # The port was just released and nothing listens there.
    provider = AnthropicProvider(base_url=f"http://127.0.0.1:{port}", api_key="k", model="m")
    events, error = await collect_until_error(provider)
    assert events == []
    assert error.kind is ErrorKind.NETWORK


async def test_slow_first_event_hits_first_token_timeout(fake: FakeAnthropic) -> None:
    fake.enqueue(StreamedMessage.from_text("late", first_event_delay=30))
    events, error = await collect_until_error(make_provider(fake, first_token_timeout=0.2))
    assert events == []
    assert error.kind is ErrorKind.TIMEOUT
    assert "first token" in error.message


async def test_pings_do_not_count_as_first_token(fake: FakeAnthropic) -> None:
    # message_start and pings arrive every 0.15s, but no content within the 0.5s budget.
    fake.enqueue(
        RawStream(
            [message_start(input_tokens=1), *[raw_event("ping")] * 8, raw_event("message_stop")],
            chunk_delay=0.15,
        )
    )
    events, error = await collect_until_error(make_provider(fake, first_token_timeout=0.5))
    assert events == []
    assert error.kind is ErrorKind.TIMEOUT
    assert "first token" in error.message


async def test_read_timeout_is_timeout(fake: FakeAnthropic) -> None:
    fake.enqueue(StreamedMessage.from_text("late", first_event_delay=30))
    events, error = await collect_until_error(make_provider(fake, timeout=0.2))
    assert events == []
    assert error.kind is ErrorKind.TIMEOUT


async def test_fake_without_script_answers_500(fake: FakeAnthropic) -> None:
    _, error = await collect_until_error(make_provider(fake))
    assert (error.kind, error.status) == (ErrorKind.PROVIDER_UNAVAILABLE, 500)
    assert "no scripted response left" in error.message


async def test_strict_fake_rejects_what_the_api_rejects(fake: FakeAnthropic) -> None:
    # A tool_result without its tool_use: the fake answers like the real API, and the
    # provider classifies the 400 as an invalid request.
    orphan = Message.tool_result(ToolCall(id="toolu_missing", name="ls"), "out")
    request = ProviderRequest(model="m", system="", messages=[Message.user("hi"), orphan])
    fake.enqueue(StreamedMessage.from_text("never served"))
    _, error = await collect_until_error(make_provider(fake), request)
    assert (error.kind, error.status) == (ErrorKind.INVALID_REQUEST, 400)
    assert "toolu_missing" in error.message
    assert fake.pending == 1


# -- client ownership and pure helpers ---------------------------------------------------------


async def test_passed_client_is_used_and_not_closed(fake: FakeAnthropic) -> None:
    fake.enqueue(StreamedMessage.from_text("a"), StreamedMessage.from_text("b"))
    async with httpx.AsyncClient() as client:
        provider = make_provider(fake, client=client)
        events = [e async for e in provider.stream(simple_request())]
        assert events == [TextDelta("a"), Usage(input_tokens=10, output_tokens=5), Stop(StopReason.END_TURN)]
        await provider.aclose()
        assert not client.is_closed
        events = await collect(make_provider(fake, client=client))
        assert events[0] == TextDelta("b")
    assert len(fake.requests) == 2


def test_provider_identity() -> None:
    provider = AnthropicProvider(api_key="k", model="m")
    assert provider.name == "anthropic"
    assert provider.supports_native_schema is False
    assert provider.base_url == "https://api.anthropic.com"


@pytest.mark.parametrize(
    ("error_type", "kind"),
    [
        ("overloaded_error", ErrorKind.PROVIDER_UNAVAILABLE),
        ("api_error", ErrorKind.PROVIDER_UNAVAILABLE),
        ("rate_limit_error", ErrorKind.RATE_LIMITED),
        ("authentication_error", ErrorKind.AUTHENTICATION),
        ("permission_error", ErrorKind.AUTHENTICATION),
        ("billing_error", ErrorKind.QUOTA),
        ("not_found_error", ErrorKind.PROVIDER_UNAVAILABLE),
        ("request_too_large", ErrorKind.CONTEXT_OVERFLOW),
        ("invalid_request_error", ErrorKind.INVALID_REQUEST),
        ("unknown_future_error", ErrorKind.PROVIDER_UNAVAILABLE),
    ],
)
def test_in_stream_error_types(error_type: str, kind: ErrorKind) -> None:
    error = classify_http_error(None, {"type": "error", "error": {"type": error_type, "message": "x"}}, {})
    assert (error.kind, error.status) == (kind, None)
