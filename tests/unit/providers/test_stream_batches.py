"""`stream_batches` (issue 32): one list per network read, whose concatenation is `stream`'s
events — a read's events before a failure first, then the failure; the answer's last events
(`finish`) with the read that ended it. The HTTP providers read from a scripted reader here
(each item one network read), so the batch boundaries are exact; the scripted provider's
are its own."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentd.core import events_of
from agentd.core.conversation import Message
from agentd.core.errors import ErrorKind, HarnessError
from agentd.core.provider import (
    ProviderRequest,
    Stop,
    StopReason,
    StreamEvent,
    TextDelta,
    ToolCallComplete,
    ToolCallDelta,
    Usage,
)
from agentd.providers.anthropic.provider import AnthropicProvider
from agentd.providers.openai.chat import OpenAIProvider
from agentd.providers.scripted import Script, ScriptedProvider

Read = list[tuple[str, bytes]]

REQUEST = ProviderRequest(model="m", system="", messages=[Message.user("hi")])


class ScriptedReader:
    """`SSEReader`'s interface over given reads; after `end()` the next read drains (None)."""

    def __init__(self, reads: list[Read]) -> None:
        self.reads = list(reads)
        self.started = False
        self.ended = False
        self.read_count = 0

    def first_token(self) -> None:
        self.started = True

    def end(self) -> None:
        self.ended = True

    async def read(self) -> Read | None:
        self.read_count += 1
        if self.ended or not self.reads:
            return None
        return self.reads.pop(0)


class Answer:
    closed = False

    async def aclose(self) -> None:
        self.closed = True


def wire(provider: Any, reads: list[Read]) -> tuple[ScriptedReader, Answer]:
    reader, answer = ScriptedReader(reads), Answer()

    async def _open(body: Any) -> tuple[Answer, None]:
        return answer, None

    provider._open = _open
    provider._reader = lambda response, deadline: reader
    return reader, answer


async def batches_until_error(provider: Any) -> tuple[list[list[StreamEvent]], HarnessError | None]:
    out: list[list[StreamEvent]] = []
    try:
        async for batch in provider.stream_batches(REQUEST):
            out.append(batch)
    except HarnessError as err:
        return out, err
    return out, None


async def events_until_error(provider: Any) -> tuple[list[StreamEvent], HarnessError | None]:
    out: list[StreamEvent] = []
    try:
        async for event in provider.stream(REQUEST):
            out.append(event)
    except HarnessError as err:
        return out, err
    return out, None


# -- Chat Completions ----------------------------------------------------------------------


def chat(content: str | None = None, finish: str | None = None, **extra: Any) -> tuple[str, bytes]:
    delta = {} if content is None else {"content": content}
    chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    return "", json.dumps(chunk).encode()


USAGE = ("", json.dumps({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}).encode())
DONE = ("", b"[DONE]")

CHAT_CASES: dict[str, tuple[list[Read], list[list[StreamEvent]], ErrorKind | None]] = {
    # Each read's events in one batch; the answer's end with the read that held [DONE].
    "two reads": (
        [[chat("Hel"), chat("lo")], [chat(finish="stop"), USAGE, DONE]],
        [[TextDelta("Hel"), TextDelta("lo")], [Usage(3, 2), Stop(StopReason.END_TURN)]],
        None,
    ),
    "one read": (
        [[chat("a"), chat("b", finish="stop"), DONE]],
        [[TextDelta("a"), TextDelta("b"), Stop(StopReason.END_TURN)]],
        None,
    ),
    # A malformed chunk mid-read: the events before it, then the error.
    "malformed mid-read": (
        [[chat("a")], [chat("b"), ("", b"{not json"), chat("c")]],
        [[TextDelta("a")], [TextDelta("b")]],
        ErrorKind.PROVIDER_UNAVAILABLE,
    ),
    "error object mid-read": (
        [[chat("a"), ("", json.dumps({"error": {"message": "overloaded", "code": 502}}).encode())]],
        [[TextDelta("a")]],
        ErrorKind.PROVIDER_UNAVAILABLE,
    ),
    # The body ends without [DONE] or a finish reason: what came, then "stream cut".
    "cut": ([[chat("a")], [chat("b")]], [[TextDelta("a")], [TextDelta("b")]], ErrorKind.PROVIDER_UNAVAILABLE),
    # Cut after the finish reason: a complete answer, its end after the last read.
    "cut after finish": (
        [[chat("a", finish="stop")]],
        [[TextDelta("a")], [Stop(StopReason.END_TURN)]],
        None,
    ),
    # finish_reason=error: the read's events, then (after the drain) the error.
    "finish error": ([[chat("a", finish="error"), DONE]], [[TextDelta("a")]], ErrorKind.PROVIDER_UNAVAILABLE),
    # A read of keep-alives only (no event) is no batch.
    "empty read": (
        [[], [chat("a", finish="stop"), DONE]],
        [[TextDelta("a"), Stop(StopReason.END_TURN)]],
        None,
    ),
}


@pytest.mark.parametrize("case", CHAT_CASES)
async def test_chat_batches_are_the_reads(case: str) -> None:
    reads, expected, error = CHAT_CASES[case]
    provider = OpenAIProvider(base_url="http://127.0.0.1:9/v1", api_key="k", model="m")
    try:
        _, answer = wire(provider, reads)
        batches, err = await batches_until_error(provider)
        assert batches == expected
        assert all(batches)
        assert (err.kind if err else None) is error
        assert answer.closed
        # `stream` is the same events one by one, the same error.
        wire(provider, reads)
        events, err2 = await events_until_error(provider)
        assert events == [e for batch in expected for e in batch]
        assert (err2.kind if err2 else None) is error
    finally:
        await provider.aclose()


async def test_chat_tool_calls_complete_with_the_last_read() -> None:
    fragment = {"index": 0, "id": "c1", "function": {"name": "ls", "arguments": "{}"}}
    call = ("", json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]}).encode())
    provider = OpenAIProvider(base_url="http://127.0.0.1:9/v1", api_key="k", model="m")
    try:
        wire(provider, [[call], [chat(finish="tool_calls"), DONE]])
        batches, err = await batches_until_error(provider)
    finally:
        await provider.aclose()
    assert err is None
    assert batches == [
        [ToolCallDelta(0, "c1", "ls", "{}")],
        [ToolCallComplete(0, "c1", "ls", "{}"), Stop(StopReason.TOOL_USE)],
    ]


async def test_closing_the_events_closes_the_answer() -> None:
    provider = OpenAIProvider(base_url="http://127.0.0.1:9/v1", api_key="k", model="m")
    try:
        _, answer = wire(provider, [[chat("a")], [chat("b")]])
        stream = provider.stream(REQUEST)
        assert await anext(stream) == TextDelta("a")
        await stream.aclose()  # type: ignore[attr-defined]
        assert answer.closed  # at once, not when the generator is collected
    finally:
        await provider.aclose()


# -- a fold (Anthropic) --------------------------------------------------------------------


def event(name: str, **data: Any) -> tuple[str, bytes]:
    return name, json.dumps({"type": name, **data}).encode()


START = event("message_start", message={"id": "m", "role": "assistant", "content": [], "usage": {}})
OPEN = event("content_block_start", index=0, content_block={"type": "text", "text": ""})


def text(piece: str) -> tuple[str, bytes]:
    return event("content_block_delta", index=0, delta={"type": "text_delta", "text": piece})


END = [
    event("content_block_stop", index=0),
    event("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 2}),
    event("message_stop"),
]


async def test_fold_batches_are_the_reads() -> None:
    provider = AnthropicProvider(base_url="http://127.0.0.1:9", api_key="k", model="m")
    try:
        reader, answer = wire(provider, [[START, OPEN, text("Hel")], [text("lo"), *END]])
        batches, err = await batches_until_error(provider)
        assert err is None
        assert batches == [
            [TextDelta("Hel")],
            [TextDelta("lo"), Usage(output_tokens=2), Stop(StopReason.END_TURN)],
        ]
        assert reader.read_count == 3  # the two reads, then the drain
        assert answer.closed
    finally:
        await provider.aclose()


@pytest.mark.parametrize(
    "reads",
    [
        [[START, OPEN, text("a"), ("error", b'{"type": "error", "error": {"type": "overloaded_error"}}')]],
        [[START, OPEN, text("a"), ("content_block_delta", b"{broken")]],
        [[START, OPEN, text("a")]],  # cut before message_stop
    ],
    ids=["error event", "malformed", "cut"],
)
async def test_fold_gives_the_events_before_a_failure(reads: list[Read]) -> None:
    provider = AnthropicProvider(base_url="http://127.0.0.1:9", api_key="k", model="m")
    try:
        wire(provider, reads)
        batches, err = await batches_until_error(provider)
        wire(provider, reads)
        events, err2 = await events_until_error(provider)
    finally:
        await provider.aclose()
    assert batches == [[TextDelta("a")]]
    assert events == [TextDelta("a")]
    assert err is not None and err2 is not None and err.kind is err2.kind


# -- the scripted provider -----------------------------------------------------------------


def scripted(**step: Any) -> ScriptedProvider:
    return ScriptedProvider(Script.model_validate({"steps": [step]}))


async def all_batches(batches: AsyncIterator[list[StreamEvent]]) -> list[list[StreamEvent]]:
    return [batch async for batch in batches]


async def test_scripted_answer_is_one_batch() -> None:
    batches = await all_batches(scripted(text="abcdef", chunk_size=2).stream_batches(REQUEST))
    assert len(batches) == 1
    assert [e for e in batches[0] if isinstance(e, TextDelta)] == [
        TextDelta("ab"),
        TextDelta("cd"),
        TextDelta("ef"),
    ]
    assert isinstance(batches[0][-1], Stop)


async def test_scripted_spaced_chunks_are_a_batch_each() -> None:
    batches = await all_batches(
        scripted(text="abcd", chunk_size=2, chunk_delay=0.001).stream_batches(REQUEST)
    )
    assert batches[:2] == [[TextDelta("ab")], [TextDelta("cd")]]
    assert isinstance(batches[2][-1], Stop)


@pytest.mark.parametrize("delay", [0.0, 0.001])
async def test_scripted_error_after_chunks(delay: float) -> None:
    error = {"kind": "network", "message": "cut", "after_chunks": 2}
    provider = scripted(text="abcdef", chunk_size=2, chunk_delay=delay, error=error)
    got: list[StreamEvent] = []
    with pytest.raises(HarnessError):
        async for batch in provider.stream_batches(REQUEST):
            got += batch
    assert got == [TextDelta("ab"), TextDelta("cd")]


async def test_scripted_stream_is_the_batches_one_by_one() -> None:
    step = {"text": "abcdef", "chunk_size": 2, "tool_calls": [{"name": "ls", "arguments": {}}]}
    batches = await all_batches(scripted(**step).stream_batches(REQUEST))
    events = [e async for e in events_of(scripted(**step).stream_batches(REQUEST))]
    assert events == [e for batch in batches for e in batch]
    assert events == [e async for e in scripted(**step).stream(REQUEST)]
