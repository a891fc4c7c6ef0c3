"""`ChatAssembler.feed_read` (issue 32: a network read's events folded at once, the usual text
chunk without `feed`) gives exactly what `feed(parse_event(data))` per event gave: the same
events, the same state (model, usage, finish reason, calls), the same errors — and the events
before a failing chunk are still returned (`failed` holds the error)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentd.core import Stop, StopReason, Usage
from agentd.core.errors import HarnessError
from agentd.providers.http import parse_event
from agentd.providers.openai.chat_stream import ChatAssembler


def _chunk(delta: Any, *, finish: Any = None, **top: Any) -> bytes:
    envelope: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
    envelope["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    envelope.update(top)
    return json.dumps(envelope).encode()


# The shapes a stream takes: the usual text chunk (the fast path) and every other kind.
_DATA = st.sampled_from(
    [
        _chunk({"role": "assistant", "content": ""}, usage=None),
        _chunk({"content": "Hello "}, usage=None),
        _chunk({"content": "é 漢字"}),
        _chunk({"content": ""}),
        _chunk({"content": "x"}, model="other-model"),
        _chunk({"content": "x"}, model=""),
        _chunk({"content": "x"}, model=7),
        _chunk({"content": None}),
        _chunk({"content": 5}),
        _chunk({"content": "t"}, finish="stop"),
        _chunk({"content": "t"}, finish=""),
        _chunk({"reasoning_content": "think"}),
        _chunk({"reasoning": "think", "content": "and say"}),
        _chunk({"refusal": "no"}),
        _chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "ls", "arguments": "{"}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}),
        _chunk({}, finish="tool_calls"),
        _chunk({"content": "x"}, usage={"prompt_tokens": 3, "completion_tokens": 2}),
        json.dumps({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}}).encode(),
        json.dumps({"choices": [{"index": 1, "delta": {"content": "n=2"}}]}).encode(),
        json.dumps({"choices": [{"delta": {"content": "no index"}}]}).encode(),
        json.dumps({"choices": [{"index": 0, "delta": {"content": "a"}}, {"index": 1}]}).encode(),
        json.dumps({"choices": ["odd"]}).encode(),
        json.dumps({"choices": {"index": 0}}).encode(),
        b'{"choices": [{"index": 0, "delta": {"content": NaN}}]}',
        # The other chunks `feed_read` folds itself now: the opening role chunk, the finish
        # chunk, the usage chunk (as OpenAI and the bench's fake send them), and their edges.
        _chunk({"role": "assistant"}, usage=None, model="fake-model"),
        _chunk({"role": "assistant", "content": "hi"}, model=None),
        _chunk({}, finish="stop", usage=None),
        _chunk({"content": "x", "function_call": None, "audio": {"id": "a"}}),
        _chunk({"role": "assistant", "content": None, "refusal": None}),
        _chunk({"content": "y", "tool_calls": None}),
        _chunk({"content": "z", "reasoning": None, "reasoning_content": ""}),
        _chunk({}, finish=1),
        _chunk({"content": "x"}, finish="length", usage=[]),
        _chunk(None, finish="stop"),
        _chunk("", finish="stop"),
        json.dumps({"choices": [{"index": 0, "finish_reason": "stop"}]}).encode(),
        json.dumps({"choices": [{"index": 0, "delta": {"content": "i"}}], "usage": "odd"}).encode(),
        json.dumps(
            {
                "choices": [],
                "model": "other",
                "usage": {
                    "prompt_tokens": 10,
                    "completion_tokens": 5,
                    "total_tokens": 15,
                    "prompt_tokens_details": {"cached_tokens": 4, "audio_tokens": 0},
                },
            }
        ).encode(),
        json.dumps({"choices": [], "usage": {"prompt_tokens": 3, "prompt_tokens_details": None}}).encode(),
        json.dumps({"choices": [], "usage": {"prompt_tokens": "7", "prompt_cache_hit_tokens": 9}}).encode(),
        json.dumps({"choices": [], "usage": {"prompt_tokens_details": {"cached_tokens": "2"}}}).encode(),
        json.dumps({"usage": {"prompt_tokens": 1, "completion_tokens": -1}}).encode(),
        json.dumps({"choices": None, "model": "m2"}).encode(),
        json.dumps({"choices": "", "model": "m3"}).encode(),
        json.dumps(
            {"choices": [{"index": 0, "delta": {"content": "b"}}], "error": {"message": "x"}}
        ).encode(),
        b" [DONE] ",
        b"[DONE]",
    ]
)


def _state(assembler: ChatAssembler) -> tuple[Any, ...]:
    calls = {i: (c.id, c.name, c.arguments) for i, c in assembler.calls.items()}
    return assembler.model, assembler.usage, assembler.finish_reason, assembler.refused, assembler.done, calls


def _one_by_one(reads: list[list[bytes]]) -> tuple[list[Any], tuple[Any, ...]]:
    """What the stream did before feed_read: each event parsed and fed, [DONE] ends it."""
    assembler, events = ChatAssembler(), []
    for read in reads:
        for data in read:
            if data.strip() == b"[DONE]":
                assembler.done = True
                break
            events += assembler.feed(parse_event(data))
        if assembler.done:
            break
    return events, _state(assembler)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_DATA, max_size=6), min_size=1, max_size=5))
def test_feed_read_folds_as_feed_did_event_by_event(reads: list[list[bytes]]) -> None:
    want_events, want_state = _one_by_one(reads)
    assembler, events = ChatAssembler(), []
    for read in reads:
        events += assembler.feed_read([("", data) for data in read])
        assert assembler.failed is None
        if assembler.done:
            break
    assert events == want_events
    assert _state(assembler) == want_state


def test_the_events_before_a_broken_chunk_are_returned_and_its_error_kept() -> None:
    assembler = ChatAssembler()
    read = [
        _chunk({"content": "good "}),
        _chunk({"content": "too"}),
        b'{"choices": [{"delta": {"con',
        _chunk({}),
    ]
    events = assembler.feed_read([("", data) for data in read])
    assert [e.text for e in events] == ["good ", "too"]  # type: ignore[attr-defined]
    assert isinstance(assembler.failed, HarnessError)
    assert "malformed chunk" in assembler.failed.message
    with pytest.raises(HarnessError) as raised:
        ChatAssembler().feed(parse_event(read[2]))
    assert raised.value.kind is assembler.failed.kind


@pytest.mark.parametrize("choices", [{}, {"choices": []}, {"choices": None}])
def test_an_error_object_in_the_stream_is_kept_as_feed_raised_it(choices: dict[str, Any]) -> None:
    assembler = ChatAssembler()
    error = json.dumps(
        {"error": {"message": "overloaded", "type": "server_error", "code": 503}, **choices}
    ).encode()
    events = assembler.feed_read([("", _chunk({"content": "a"})), ("", error)])
    assert [e.text for e in events] == ["a"]  # type: ignore[attr-defined]
    with pytest.raises(HarnessError) as raised:
        ChatAssembler().feed(parse_event(error))
    assert assembler.failed is not None and assembler.failed.kind is raised.value.kind
    assert assembler.failed.message == raised.value.message
    assert assembler.usage is None and assembler.model == "m"  # (the error is raised before either is taken)


def test_a_plain_answer_is_folded_without_feed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chunks of a plain text answer — the role chunk, the text, the finish chunk and the
    usage chunk, as OpenAI sends them — take `feed_read`'s own path (issue 32: `feed` and its
    `.get`s per field were most of a trivial answer's fold), with the state `feed` leaves."""
    fed: list[Any] = []
    monkeypatch.setattr(ChatAssembler, "feed", lambda self, chunk: fed.append(chunk) or [])
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 4}}
    read = [
        _chunk({"role": "assistant", "content": ""}, usage=None, model="gpt-x"),
        _chunk({"content": "Hello "}, usage=None, model="gpt-x"),
        _chunk({"content": "there."}, usage=None, model="gpt-x"),
        _chunk({}, finish="stop", usage=None, model="gpt-x"),
        json.dumps({"id": "c", "model": "gpt-x", "choices": [], "usage": usage}).encode(),
        b"[DONE]",
    ]
    assembler = ChatAssembler()
    events = assembler.feed_read([("", data) for data in read])
    assert fed == []
    assert [e.text for e in events] == ["Hello ", "there."]  # type: ignore[attr-defined]
    assert (assembler.model, assembler.finish_reason, assembler.done) == ("gpt-x", "stop", True)
    *_, got_usage, stop = assembler.finish()
    assert got_usage == Usage(input_tokens=6, output_tokens=5, cache_read_tokens=4)
    assert got_usage.model == "gpt-x"  # type: ignore[attr-defined]
    assert stop == Stop(StopReason.END_TURN)


@pytest.mark.parametrize(
    "delta",
    [
        "text where an object belongs",
        5,
        [1, 2],
        {"tool_calls": 7},
        {"tool_calls": {"index": 0}},
        {"tool_calls": [{"index": 0, "function": "ls"}]},
        {"tool_calls": [{"index": 0, "id": 5, "function": {"name": "ls"}}]},
        {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": ["ls"]}}]},
    ],
)
def test_a_chunk_of_the_wrong_shape_is_a_typed_provider_error_not_a_crash(delta: Any) -> None:
    """A broken or hostile server's delta (a string, a number, tool calls that are not a
    list of objects with text ids and names) fails the sampling as a malformed stream —
    retryable, like unparseable JSON — and the events before it still count."""
    bad = _chunk(delta)
    with pytest.raises(HarnessError) as raised:
        ChatAssembler().feed(parse_event(bad))
    assert "malformed chunk" in raised.value.message
    assembler = ChatAssembler()
    events = assembler.feed_read([("", _chunk({"content": "before"})), ("", bad)])
    assert [e.text for e in events] == ["before"]  # type: ignore[attr-defined]
    assert assembler.failed is not None and assembler.failed.kind is raised.value.kind
