"""The Anthropic `Assembler` on thinking streams: `thinking_delta`s become `ReasoningDelta`s,
the signed block (and any `redacted_thinking` block) completes verbatim as a
`ReasoningBlockComplete`, in stream order, before the tool calls it precedes."""

from __future__ import annotations

from typing import Any

from agentd.core.conversation import ReasoningBlock
from agentd.core.provider import (
    ReasoningBlockComplete,
    ReasoningDelta,
    Stop,
    StopReason,
    StreamEvent,
    TextDelta,
    ToolCallComplete,
    ToolCallDelta,
    Usage,
)
from agentd.providers.anthropic.stream import Assembler


def start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, **d: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": d}


def stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def run(*events: dict[str, Any], finish: bool = True) -> list[StreamEvent]:
    assembler = Assembler()
    out: list[StreamEvent] = []
    for event in events:
        out += assembler.feed(event)
    return out + assembler.finish() if finish else out


def complete(data: dict[str, Any]) -> ReasoningBlockComplete:
    return ReasoningBlockComplete(ReasoningBlock(provider="anthropic", data=data))


THINKING_START = {"type": "thinking", "thinking": "", "signature": ""}


def test_thinking_deltas_and_signature_make_one_signed_block() -> None:
    events = run(
        start(0, THINKING_START),
        delta(0, type="thinking_delta", thinking="Let me "),
        delta(0, type="thinking_delta", thinking="add: 2+2=4."),
        delta(0, type="signature_delta", signature="EqQBCgIYAh"),
        delta(0, type="signature_delta", signature="IM1gbcDa9G"),  # pieces concatenate
        stop(0),
        start(1, {"type": "text", "text": ""}),
        delta(1, type="text_delta", text="4"),
        stop(1),
    )
    assert events == [
        ReasoningDelta("Let me "),
        ReasoningDelta("add: 2+2=4."),
        complete({"type": "thinking", "thinking": "Let me add: 2+2=4.", "signature": "EqQBCgIYAhIM1gbcDa9G"}),
        TextDelta("4"),
        Stop(StopReason.END_TURN),
    ]


def test_unknown_keys_of_the_block_are_kept_verbatim() -> None:
    events = run(
        start(0, {**THINKING_START, "future_field": {"x": 1}}),
        delta(0, type="thinking_delta", thinking="hm"),
        delta(0, type="signature_delta", signature="sig"),
        stop(0),
    )
    assert (
        complete({"type": "thinking", "thinking": "hm", "signature": "sig", "future_field": {"x": 1}})
        in events
    )


def test_a_thinking_block_without_signature_is_not_kept() -> None:
    # It could not be sent back (the API checks the signature); its text still streamed.
    events = run(start(0, THINKING_START), delta(0, type="thinking_delta", thinking="hm"), stop(0))
    assert events == [ReasoningDelta("hm"), Stop(StopReason.END_TURN)]


def test_redacted_thinking_is_kept_verbatim_and_shown_as_nothing() -> None:
    redacted = {
        "type": "redacted_thinking",
        "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP",
    }
    events = run(start(0, redacted), stop(0), start(1, {"type": "redacted_thinking", "data": ""}), stop(1))
    assert events == [complete(redacted), Stop(StopReason.END_TURN)]  # one without data is dropped


def test_blocks_complete_in_stream_order_before_the_tool_call() -> None:
    redacted = {"type": "redacted_thinking", "data": "opaque"}
    events = run(
        start(0, THINKING_START),
        delta(0, type="thinking_delta", thinking="list it"),
        delta(0, type="signature_delta", signature="s1"),
        stop(0),
        start(1, redacted),
        stop(1),
        start(2, {"type": "tool_use", "id": "toolu_1", "name": "list_dir", "input": {}}),
        delta(2, type="input_json_delta", partial_json='{"path": "."}'),
        stop(2),
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
    )
    assert events == [
        ReasoningDelta("list it"),
        complete({"type": "thinking", "thinking": "list it", "signature": "s1"}),
        complete(redacted),
        ToolCallDelta(index=0, id="toolu_1", name="list_dir", arguments_delta=""),
        ToolCallDelta(index=0, arguments_delta='{"path": "."}'),
        ToolCallComplete(0, "toolu_1", "list_dir", '{"path": "."}'),
        Usage(output_tokens=9),
        Stop(StopReason.TOOL_USE),
    ]


def test_blocks_left_open_complete_at_the_end_reasoning_first() -> None:
    events = run(
        start(0, THINKING_START),
        delta(0, type="signature_delta", signature="s"),
        start(1, {"type": "tool_use", "id": "toolu_2", "name": "ls", "input": {}}),
    )
    assert events[-3:] == [
        complete({"type": "thinking", "thinking": "", "signature": "s"}),
        ToolCallComplete(0, "toolu_2", "ls", "{}"),
        Stop(StopReason.TOOL_USE),
    ]


def test_a_non_streamed_message_keeps_its_signed_blocks() -> None:
    thinking = {"type": "thinking", "thinking": "ok", "signature": "sig"}
    events = Assembler().feed_document(
        {"type": "message", "content": [thinking, {"type": "text", "text": "Hi"}], "stop_reason": "end_turn"}
    )
    assert events == [ReasoningDelta("ok"), complete(thinking), TextDelta("Hi")]


def test_cache_usage_from_message_start_and_message_delta() -> None:
    start_usage = {
        "input_tokens": 12,
        "cache_creation_input_tokens": 3000,
        "cache_read_input_tokens": 0,
        "output_tokens": 1,
    }
    events = run(
        {"type": "message_start", "message": {"usage": start_usage}},
        # Newer API versions repeat the input side cumulatively in message_delta: later values win.
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 40, "cache_read_input_tokens": 500},
        },
    )
    assert events == [
        Usage(input_tokens=12, output_tokens=40, cache_read_tokens=500, cache_write_tokens=3000),
        Stop(StopReason.END_TURN),
    ]
