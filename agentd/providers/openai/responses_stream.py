"""Folding a Responses API event stream (`response.output_text.delta`,
`response.reasoning_summary_text.delta`, `response.function_call_arguments.delta`,
`response.output_item.added/done`, `response.completed`, ...) into the provider-neutral
`StreamEvent`s; a non-streamed Response object is replayed through the same fold.

A `reasoning` output item is kept whole (with its `encrypted_content`) as a
`ReasoningBlock`, so the next call can send it back: with `store: false` that is the only
way the model keeps its chain of thought across tool calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentd.core import (
    HarnessError,
    ReasoningBlock,
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
from agentd.providers.openai.chat_stream import token_count
from agentd.providers.openai.errors import classify_http_error

PROVIDER_TAG = "openai-responses"  # ReasoningBlock.provider of this wire format

_INCOMPLETE_REASONS: dict[str, StopReason] = {
    "max_output_tokens": StopReason.MAX_TOKENS,
    "content_filter": StopReason.REFUSAL,
}


@dataclass
class _PendingCall:
    index: int  # among the tool calls of this response (output_index also counts other items)
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    final_arguments: str | None = None  # from ...arguments.done / output_item.done: authoritative


def stream_error(error: Any) -> HarnessError:
    """An `error` event or a failed response's `error` object as a classified error."""
    if not isinstance(error, dict):
        error = {"message": str(error)}
    inner = error.get("error") if isinstance(error.get("error"), dict) else error
    code = str(inner.get("code") or "")
    err_type = str(inner.get("type") or "")
    # A refused request (bad prompt, bad image, bad parameter) fails every retry: say so.
    status = 400 if code.startswith("invalid") or err_type == "invalid_request_error" else None
    return classify_http_error(status, {"error": inner}, {})


class ResponsesAssembler:
    end_event: ClassVar[str] = "response.completed"

    def __init__(self) -> None:
        self.calls: dict[int, _PendingCall] = {}  # by output_index
        self.usage: Usage | None = None
        self.ended = False  # response.completed or .incomplete arrived (.failed raises)
        self.incomplete_reason: str | None = None
        self.refused = False
        self._text_items: set[str] = set()  # item ids whose text streamed as deltas
        self._summary_items: set[str] = set()  # reasoning item ids whose summary streamed
        self._last_part: tuple[str, int] | None = None  # (item id, summary index) last streamed

    def feed(self, event: dict[str, Any], event_name: str | None = None) -> list[StreamEvent]:
        """One event; a streamed one without a `type` takes its SSE event name."""
        kind = event.get("type") if event_name is None else event.setdefault("type", event_name)
        match kind:
            case "response.output_text.delta":
                self._text_items.add(str(event.get("item_id")))
                return _text(event.get("delta"))
            case "response.refusal.delta":
                self.refused = True
                self._text_items.add(str(event.get("item_id")))
                return _text(event.get("delta"))
            case "response.reasoning_summary_text.delta" | "response.reasoning_text.delta":
                return self._reasoning(event)
            case "response.output_item.added":
                return self._item_added(event)
            case "response.function_call_arguments.delta":
                return self._arguments(event)
            case "response.function_call_arguments.done":
                call = self.calls.get(_int(event.get("output_index")))
                if call is not None and isinstance(event.get("arguments"), str):
                    call.final_arguments = event["arguments"]
                return []
            case "response.output_item.done":
                return self._item_done(event)
            case "response.completed" | "response.incomplete":
                self._end(event.get("response") or {})
                return []
            case "response.failed":
                response = event.get("response") or {}
                raise stream_error(response.get("error") or {"message": "the response failed"})
            case "error":
                raise stream_error(event)
        return []  # created, in_progress, content_part.*, *.done bookkeeping, unknown newer events

    def _reasoning(self, event: dict[str, Any]) -> list[StreamEvent]:
        delta = event.get("delta")
        if not isinstance(delta, str) or not delta:
            return []
        item_id = str(event.get("item_id"))
        self._summary_items.add(item_id)
        part = (item_id, _int(event.get("summary_index", event.get("content_index"))))
        events: list[StreamEvent] = []
        if self._last_part is not None and part != self._last_part:
            events.append(ReasoningDelta("\n\n"))  # summary parts are paragraphs
        self._last_part = part
        events.append(ReasoningDelta(delta))
        return events

    def _call(self, output_index: int) -> _PendingCall:
        if output_index not in self.calls:
            self.calls[output_index] = _PendingCall(index=len(self.calls))
        return self.calls[output_index]

    def _item_added(self, event: dict[str, Any]) -> list[StreamEvent]:
        item = event.get("item") or {}
        if item.get("type") != "function_call":
            return []
        call = self._call(_int(event.get("output_index")))
        call.call_id = str(item.get("call_id") or "")
        call.name = str(item.get("name") or "")
        return [ToolCallDelta(index=call.index, id=call.call_id or None, name=call.name or None)]

    def _arguments(self, event: dict[str, Any]) -> list[StreamEvent]:
        delta = event.get("delta")
        if not isinstance(delta, str):
            return []
        call = self._call(_int(event.get("output_index")))
        call.arguments.append(delta)
        return [ToolCallDelta(index=call.index, arguments_delta=delta)]

    def _item_done(self, event: dict[str, Any]) -> list[StreamEvent]:
        item = event.get("item") or {}
        events: list[StreamEvent] = []
        match item.get("type"):
            case "reasoning":
                if str(item.get("id")) not in self._summary_items:
                    # Nothing streamed (a replayed non-streamed answer): show the summary now.
                    summary = [s.get("text") for s in item.get("summary") or [] if isinstance(s, dict)]
                    text = "\n\n".join(t for t in summary if isinstance(t, str) and t)
                    if text:
                        events.append(ReasoningDelta(text))
                data = {k: v for k, v in item.items() if v is not None}  # null fields are not valid input
                events.append(ReasoningBlockComplete(ReasoningBlock(provider=PROVIDER_TAG, data=data)))
            case "message" if str(item.get("id")) not in self._text_items:
                for part in item.get("content") or []:
                    if not isinstance(part, dict):
                        continue
                    if part.get("type") == "refusal":
                        self.refused = True
                        events += _text(part.get("refusal"))
                    else:
                        events += _text(part.get("text"))
            case "function_call":
                call = self._call(_int(event.get("output_index")))
                call.call_id = str(item.get("call_id") or call.call_id)
                call.name = call.name or str(item.get("name") or "")
                if isinstance(item.get("arguments"), str):
                    call.final_arguments = item["arguments"]
        return events

    def _end(self, response: dict[str, Any]) -> None:
        self.ended = True
        details = response.get("incomplete_details") or {}
        if response.get("status") == "incomplete" or details:
            self.incomplete_reason = str(details.get("reason") or "max_output_tokens")
        usage = response.get("usage")
        if isinstance(usage, dict):
            input_details = usage.get("input_tokens_details") or {}
            cached = token_count(input_details.get("cached_tokens") if isinstance(input_details, dict) else 0)
            # `input_tokens` includes the cached part; agentd's input_tokens are the uncached ones.
            model = response.get("model")
            self.usage = Usage(
                input_tokens=max(0, token_count(usage.get("input_tokens")) - cached),
                output_tokens=token_count(usage.get("output_tokens")),
                cache_read_tokens=cached,
                model=model if isinstance(model, str) else "",
            )

    def finish(self) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for call in sorted(self.calls.values(), key=lambda c: c.index):
            arguments = call.final_arguments if call.final_arguments is not None else "".join(call.arguments)
            events.append(
                ToolCallComplete(
                    index=call.index,
                    id=call.call_id or f"call_{call.index}",
                    name=call.name,
                    arguments=arguments or "{}",
                )
            )
        if self.usage is not None:
            events.append(self.usage)
        if self.refused:
            reason = StopReason.REFUSAL
        elif self.incomplete_reason is not None:
            reason = _INCOMPLETE_REASONS.get(self.incomplete_reason, StopReason.MAX_TOKENS)
        elif self.calls:
            reason = StopReason.TOOL_USE
        else:
            reason = StopReason.END_TURN
        events.append(Stop(reason))
        return events

    def feed_document(self, response: dict[str, Any]) -> list[StreamEvent]:
        """A whole (non-streamed) Response object, folded like its stream would be."""
        if response.get("error") and response.get("status") in (None, "failed"):
            raise stream_error(response["error"])
        events: list[StreamEvent] = []
        for index, item in enumerate(response.get("output") or []):
            if isinstance(item, dict):
                done = {"type": "response.output_item.done", "output_index": index, "item": item}
                events += self._item_done(done)
        self._end(response)
        return events


def _text(value: Any) -> list[StreamEvent]:
    return [TextDelta(value)] if isinstance(value, str) and value else []


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
