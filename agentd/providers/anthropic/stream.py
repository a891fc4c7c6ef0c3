"""Reading an Anthropic event stream: JSON events (decoded by `sse.py`) → the
provider-neutral `StreamEvent`s (`Assembler`), and a non-streamed Message replayed the same way.

Usage is reported the way Anthropic counts it: `input_tokens` are the uncached input
tokens, cache reads and cache writes are separate, so input + output + cache read + cache
write is the whole spend (R-B1).

Thinking streams as `thinking_delta`s (surfaced as `ReasoningDelta`s) and one
`signature_delta`; at its `content_block_stop` the whole signed block — and any
`redacted_thinking` block — leaves as a `ReasoningBlockComplete`, verbatim, to be sent back.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentd.core import (
    ErrorKind,
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
from agentd.providers.anthropic.errors import classify_http_error
from agentd.providers.anthropic.messages import PROVIDER

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": StopReason.END_TURN,
    "stop_sequence": StopReason.END_TURN,
    # Server-side tools paused a long turn; the answer so far is complete as far as we care.
    "pause_turn": StopReason.END_TURN,
    "tool_use": StopReason.TOOL_USE,
    "max_tokens": StopReason.MAX_TOKENS,
    # Newer models stop like this when the context window, not max_tokens, ran out.
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
    "refusal": StopReason.REFUSAL,
}


def _malformed(data: Any) -> HarnessError:
    text = data if isinstance(data, str) else json.dumps(data)
    return HarnessError(ErrorKind.PROVIDER_UNAVAILABLE, f"malformed chunk in stream: {text[:200]!r}")


@dataclass
class _Block:
    kind: str  # "text", "thinking", "redacted_thinking", "tool_use", or a type we ignore
    tool_index: int = 0
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)  # tool_use input / thinking text pieces
    signature: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)  # reasoning blocks: the start block, verbatim

    def reasoning(self) -> ReasoningBlockComplete | None:
        """The finished signed block; None when it cannot be sent back (no signature)."""
        if self.kind == "redacted_thinking":
            if not self.data.get("data"):
                return None
            return ReasoningBlockComplete(ReasoningBlock(provider=PROVIDER, data=self.data))
        if self.kind != "thinking":
            return None
        signature = "".join(self.signature)
        if not signature:
            return None  # the API would refuse it back; its text already streamed
        data = {**self.data, "thinking": "".join(self.arguments), "signature": signature}
        return ReasoningBlockComplete(ReasoningBlock(provider=PROVIDER, data=data))


_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


class Assembler:
    """Folds stream events into `StreamEvent`s. Content blocks stream one after another, so
    a tool call is complete at its `content_block_stop` and tool calls finish in order."""

    end_event: ClassVar[str] = "message_stop"

    def __init__(self) -> None:
        self.blocks: dict[int, _Block] = {}
        self.tool_count = 0
        self.stop_reason: str | None = None
        self.usage: dict[str, int] = {}
        self.model = ""  # the answering model, as `message_start` names it
        self.ended = False  # message_stop seen

    def feed(self, event: dict[str, Any], event_name: str = "") -> list[StreamEvent]:
        kind = event.get("type") or event_name
        try:
            return self._feed(kind, event)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise _malformed(event) from exc

    def _feed(self, kind: str, event: dict[str, Any]) -> list[StreamEvent]:
        if kind == "message_start":
            self._merge_usage(event["message"].get("usage"))
            if isinstance(model := event["message"].get("model"), str):
                self.model = model
        elif kind == "content_block_start":
            return self._block_start(_index(event), event["content_block"])
        elif kind == "content_block_delta":
            return self._block_delta(_index(event), event["delta"])
        elif kind == "content_block_stop":
            block = self.blocks.pop(_index(event), None)
            if block is not None and block.kind == "tool_use":
                return [_complete(block)]
            if block is not None and (reasoning := block.reasoning()) is not None:
                return [reasoning]
        elif kind == "message_delta":
            reason = (event.get("delta") or {}).get("stop_reason")
            if reason:
                self.stop_reason = str(reason)
            self._merge_usage(event.get("usage"))  # cumulative counts: later values win
        elif kind == "message_stop":
            self.ended = True
        elif kind == "error":
            raise classify_http_error(None, event, {})
        # "ping" and event types added after this was written carry nothing for us.
        return []

    def _block_start(self, index: int, block: dict[str, Any]) -> list[StreamEvent]:
        block_type = str(block["type"])
        if block_type == "text":
            self.blocks[index] = _Block("text")
            text = block.get("text") or ""
            return [TextDelta(text)] if text else []
        if block_type == "thinking":
            thinking = str(block.get("thinking") or "")
            # A non-streamed message carries the whole text and signature in its start block.
            self.blocks[index] = _Block(
                "thinking",
                arguments=[thinking],
                signature=[str(block.get("signature") or "")],
                data=dict(block),
            )
            return [ReasoningDelta(thinking)] if thinking else []
        if block_type == "redacted_thinking":
            self.blocks[index] = _Block("redacted_thinking", data=dict(block))
            return []
        if block_type == "tool_use":
            call = _Block(
                "tool_use",
                tool_index=self.tool_count,
                id=str(block.get("id") or f"toolu_{uuid.uuid4().hex[:24]}"),
                name=str(block.get("name") or ""),
            )
            self.tool_count += 1
            self.blocks[index] = call
            # Streamed starts carry `input: {}`; a non-streamed message carries the whole input.
            initial = block.get("input")
            arguments = json.dumps(initial) if initial else ""
            if arguments:
                call.arguments.append(arguments)
            return [
                ToolCallDelta(index=call.tool_index, id=call.id, name=call.name, arguments_delta=arguments)
            ]
        # server_tool_use, web_search_tool_result, ...: not ours to surface.
        self.blocks[index] = _Block(block_type)
        return []

    def _block_delta(self, index: int, delta: dict[str, Any]) -> list[StreamEvent]:
        delta_type = delta["type"]
        if delta_type == "text_delta":
            text = str(delta["text"])
            return [TextDelta(text)] if text else []
        if delta_type == "thinking_delta":
            thinking = str(delta["thinking"])
            block = self.blocks.get(index)
            if block is not None and block.kind == "thinking":
                block.arguments.append(thinking)
            return [ReasoningDelta(thinking)] if thinking else []
        if delta_type == "signature_delta":
            block = self.blocks.get(index)
            if block is not None and block.kind == "thinking":
                block.signature.append(str(delta["signature"]))
            return []
        if delta_type == "input_json_delta":
            block = self.blocks.get(index)
            if block is None:
                raise ValueError(f"input_json_delta for unknown content block {index}")
            fragment = str(delta["partial_json"])
            if block.kind != "tool_use" or not fragment:
                return []  # server_tool_use input, or the usual empty first fragment
            block.arguments.append(fragment)
            return [ToolCallDelta(index=block.tool_index, arguments_delta=fragment)]
        # citations_delta, ...
        return []

    def _merge_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for key in _USAGE_FIELDS:
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                self.usage[key] = value

    def feed_document(self, message: dict[str, Any]) -> list[StreamEvent]:
        """A non-streamed Message document, replayed as the events that would have streamed it."""
        if message.get("type") == "error":
            raise classify_http_error(None, message, {})
        events = self.feed({"type": "message_start", "message": message})
        content = message.get("content")
        if not isinstance(content, list):
            raise _malformed(message)
        for index, block in enumerate(content):
            events += self.feed({"type": "content_block_start", "index": index, "content_block": block})
            events += self.feed({"type": "content_block_stop", "index": index})
        events += self.feed({"type": "message_delta", "delta": {"stop_reason": message.get("stop_reason")}})
        events += self.feed({"type": "message_stop"})
        return events

    def finish(self) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        # Blocks left open (no content_block_stop) still complete, reasoning first, in order.
        for index in sorted(self.blocks):
            if (reasoning := self.blocks[index].reasoning()) is not None:
                events.append(reasoning)
        open_calls = sorted(
            (b for b in self.blocks.values() if b.kind == "tool_use"), key=lambda b: b.tool_index
        )
        events += [_complete(block) for block in open_calls]
        self.blocks.clear()
        if self.usage:
            events.append(
                Usage(
                    input_tokens=self.usage.get("input_tokens", 0),
                    output_tokens=self.usage.get("output_tokens", 0),
                    cache_read_tokens=self.usage.get("cache_read_input_tokens", 0),
                    cache_write_tokens=self.usage.get("cache_creation_input_tokens", 0),
                    model=self.model,
                )
            )
        default = StopReason.TOOL_USE if self.tool_count else StopReason.END_TURN
        events.append(Stop(_STOP_REASONS.get(self.stop_reason or "", default)))
        return events


def _index(event: dict[str, Any]) -> int:
    index = event["index"]
    if not isinstance(index, int) or isinstance(index, bool):
        raise TypeError(f"content block index is not an integer: {index!r}")
    return index


def _complete(block: _Block) -> ToolCallComplete:
    return ToolCallComplete(
        index=block.tool_index, id=block.id, name=block.name, arguments="".join(block.arguments) or "{}"
    )
