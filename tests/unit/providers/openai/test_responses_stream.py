"""`ResponsesAssembler` as `FoldingHttpProvider.stream` feeds it: each event with its SSE name."""

from __future__ import annotations

from agentd.core import Stop, StopReason, TextDelta
from agentd.providers.openai.responses_stream import ResponsesAssembler


def test_an_event_without_a_type_is_read_by_its_sse_name() -> None:
    fold = ResponsesAssembler()
    assert fold.feed({"item_id": "m1", "delta": "hi"}, "response.output_text.delta") == [TextDelta("hi")]
    assert not fold.ended
    assert fold.feed({"response": {"status": "completed"}}, "response.completed") == []
    assert fold.ended  # the end event, named only by the SSE line, still ends the stream
    assert fold.finish() == [Stop(StopReason.END_TURN)]


def test_a_type_in_the_data_wins_over_the_sse_name() -> None:
    fold = ResponsesAssembler()
    event = {"type": "response.output_text.delta", "item_id": "m1", "delta": "hi"}
    assert fold.feed(event, "message") == [TextDelta("hi")]
    assert fold.feed({"type": "response.completed", "response": {}}, "message") == []
    assert fold.ended
