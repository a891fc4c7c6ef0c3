"""Folding a Chat Completions stream (chunk by chunk) into the provider-neutral
`StreamEvent`s; a non-streamed `chat.completion` is replayed as one chunk."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentd.core import (
    ErrorKind,
    HarnessError,
    ReasoningDelta,
    Stop,
    StopReason,
    StreamEvent,
    TextDelta,
    ToolCallComplete,
    ToolCallDelta,
    Usage,
)
from agentd.providers.http import Event, parse_event
from agentd.providers.openai.errors import classify_http_error

_FINISH_REASONS: dict[str, StopReason] = {
    "stop": StopReason.END_TURN,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,  # legacy functions API
    "length": StopReason.MAX_TOKENS,
    "content_filter": StopReason.REFUSAL,
}

# Where compatible servers put the model's reasoning text: DeepSeek / llama.cpp / older vLLM
# say `reasoning_content`, vLLM >= 0.10 / OpenRouter / Ollama `reasoning`. Some send both
# (the same text twice): the first one present wins.
REASONING_FIELDS = ("reasoning_content", "reasoning")


def non_stream_as_chunk(doc: dict[str, Any]) -> dict[str, Any]:
    """Reshape a non-streamed `chat.completion` into one equivalent stream chunk."""
    if "error" in doc:
        return doc
    choices = []
    for choice in doc.get("choices") or []:
        message = dict(choice.get("message") or {})
        message["tool_calls"] = [
            {**call, "index": i} for i, call in enumerate(message.get("tool_calls") or [])
        ]
        choices.append(
            {"index": choice.get("index", 0), "delta": message, "finish_reason": choice.get("finish_reason")}
        )
    return {"choices": choices, "usage": doc.get("usage")}


@dataclass
class _PendingCall:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


_NO_DELTA: dict[str, Any] = {}  # (never written to)


class ChatAssembler:
    """Folds chunks into events; tool calls are accumulated by `index` until the end."""

    def __init__(self) -> None:
        self.calls: dict[int, _PendingCall] = {}
        self.finish_reason: str | None = None
        self.refused = False
        self.usage: Usage | None = None
        self.model = ""  # the answering model, as the chunks name it
        self.done = False  # [DONE] seen
        self.failed: HarnessError | None = None  # `feed_read` stopped at this error

    def feed_read(self, events: list[Event]) -> list[StreamEvent]:
        """`feed(parse_event(data))` of each event a network read completed, up to [DONE]
        (then `done` is set and the rest is not looked at). Per read, not per event (issue
        32): the usual chunks — one choice whose delta has none of the keys but `content`
        that `feed` reads (the text pieces, the opening role chunk, the finish chunk), or
        no choice and the usage — are folded here with `in`, subscripts and `match` (its length checks are no
        calls), no call but the JSON parse and the event made; any other chunk (or one orjson
        does not take as an object) goes through `parse_event` and `feed`. A chunk that fails
        leaves its error in `failed`, the events before it returned."""
        out: list[StreamEvent] = []
        try:
            for _, data in events:
                if data == b"[DONE]" or (data[:1] != b"{" and data.strip() == b"[DONE]"):
                    self.done = True
                    break
                try:
                    chunk = orjson.loads(data)
                except orjson.JSONDecodeError:
                    chunk = None
                if type(chunk) is not dict:
                    chunk = parse_event(data)  # (its fallbacks and errors)
                choices = chunk["choices"] if "choices" in chunk else None
                match choices:
                    case [dict() as choice]:
                        delta = choice["delta"] if "delta" in choice else None
                        if delta is None:
                            delta = _NO_DELTA
                        if (
                            type(delta) is not dict
                            or "tool_calls" in delta
                            or "reasoning_content" in delta
                            or "reasoning" in delta
                            or "refusal" in delta
                            or ("index" in choice and choice["index"] != 0)
                        ):
                            out += self.feed(chunk)
                            continue
                    case [] | None if "error" not in chunk:
                        delta = choice = _NO_DELTA
                    case _:
                        out += self.feed(chunk)
                        continue
                # What `feed` does for these, in its order (the model, the usage, the text,
                # the finish reason), with its truthiness and type tests.
                if "model" in chunk and (model := chunk["model"]) and model != self.model:
                    if type(model) is str:
                        self.model = model
                if "usage" in chunk and type(usage := chunk["usage"]) is dict:
                    self.usage = _usage(usage)
                if "content" in delta and (content := delta["content"]) and type(content) is str:
                    out.append(TextDelta(content))
                if "finish_reason" in choice and (finish_reason := choice["finish_reason"]):
                    self.finish_reason = finish_reason if type(finish_reason) is str else str(finish_reason)
        except HarnessError as err:
            # The events before the failing one are the caller's all the same, as when
            # they were folded one by one: it yields `out`, then raises this.
            self.failed = err
        return out

    def feed(self, chunk: dict[str, Any]) -> list[StreamEvent]:
        # Per chunk only the fields it has are looked at (`in` first: most deltas hold
        # `content` alone), and the model's name only when it changes.
        choices = chunk.get("choices")
        if not choices and "error" in chunk:
            # OpenRouter / vLLM report failures after the 200 as an error object in the stream.
            raise classify_http_error(None, chunk, {})
        model = chunk.get("model")
        if model and model != self.model and isinstance(model, str):
            self.model = model
        usage = chunk.get("usage")
        if usage is not None and isinstance(usage, dict):
            self.usage = _usage(usage)
        events: list[StreamEvent] = []
        for choice in choices or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # we always ask for n=1
            delta = choice.get("delta") or _NO_DELTA
            if type(delta) is not dict:  # a broken or hostile server: typed, never a crash
                raise _malformed(f"a choice's delta is {type(delta).__name__}, not an object")
            if "reasoning_content" in delta or "reasoning" in delta:
                for name in REASONING_FIELDS:
                    reasoning = delta.get(name)
                    if reasoning and isinstance(reasoning, str):
                        events.append(ReasoningDelta(reasoning))
                        break
            content = delta.get("content")
            if content and isinstance(content, str):
                events.append(TextDelta(content))
            if "refusal" in delta:
                refusal = delta["refusal"]
                if refusal and isinstance(refusal, str):
                    self.refused = True
                    events.append(TextDelta(refusal))
            if "tool_calls" in delta:
                fragments = delta["tool_calls"] or ()
                if type(fragments) is not list and fragments != ():
                    raise _malformed(f"tool_calls is {type(fragments).__name__}, not a list")
                for fragment in fragments:
                    if isinstance(fragment, dict):
                        events.append(self._tool_fragment(fragment))
            finish_reason = choice.get("finish_reason")
            if finish_reason:
                self.finish_reason = str(finish_reason)
        return events

    def _tool_fragment(self, fragment: dict[str, Any]) -> ToolCallDelta:
        index = fragment.get("index")
        if not isinstance(index, int):
            # A few servers omit `index`: a fragment with a new id opens a call, else continues the last.
            known = {c.id: i for i, c in self.calls.items()}
            fragment_id = fragment.get("id")
            if fragment_id and fragment_id in known:
                index = known[fragment_id]
            elif fragment_id or not self.calls:
                index = len(self.calls)
            else:
                index = max(self.calls)
        function = fragment.get("function") or _NO_DELTA
        new_id = fragment.get("id") or None
        new_name = function.get("name") or None if type(function) is dict else None
        if (
            type(function) is not dict
            or not isinstance(new_id, str | None)
            or not isinstance(new_name, str | None)
        ):
            raise _malformed("a tool call fragment's function, id or name has the wrong type")
        call = self.calls.setdefault(index, _PendingCall())
        if new_id and call.id is None:
            call.id = new_id
        if new_name and not call.name:
            call.name = new_name  # some servers repeat the name in every fragment: keep the first
        arguments = function.get("arguments") or ""
        if not isinstance(arguments, str):  # a server sending parsed JSON instead of text
            arguments = json.dumps(arguments)
        call.arguments.append(arguments)
        return ToolCallDelta(index=index, id=new_id, name=new_name, arguments_delta=arguments)

    def finish(self) -> list[StreamEvent]:
        if self.finish_reason == "error":
            raise HarnessError(
                ErrorKind.PROVIDER_UNAVAILABLE, "the server ended the stream with finish_reason=error"
            )
        events: list[StreamEvent] = []
        for index in sorted(self.calls) if self.calls else ():
            call = self.calls[index]
            events.append(
                ToolCallComplete(
                    index=index,
                    id=call.id or f"call_{uuid.uuid4().hex[:24]}",  # Ollama & co. may omit ids
                    name=call.name,
                    arguments="".join(call.arguments) or "{}",
                )
            )
        if (usage := self.usage) is not None:
            # (`dataclasses.replace` without its field walk: `_usage` sets these three)
            events.append(
                Usage(usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, model=self.model)
            )
        if self.refused:
            reason = StopReason.REFUSAL
        elif self.calls and self.finish_reason in (None, "stop"):
            # Several servers (older vLLM, Ollama) say "stop" even when they emitted tool calls.
            reason = StopReason.TOOL_USE
        else:
            reason = _FINISH_REASONS.get(self.finish_reason or "stop", StopReason.END_TURN)
        events.append(Stop(reason))
        return events


def _malformed(what: str) -> HarnessError:
    return HarnessError(ErrorKind.PROVIDER_UNAVAILABLE, f"malformed chunk in stream: {what}")


def token_count(value: Any) -> int:
    """A token count from a usage object; a missing or garbled one counts 0, never crashes."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int | float):
        return max(0, int(value))
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return 0


def _usage(usage: dict[str, Any]) -> Usage:
    # `in` and subscripts rather than `.get` (no call per field: once per answer, but the
    # answer is a few chunks); an absent field is as a null one.
    details = usage["prompt_tokens_details"] if "prompt_tokens_details" in usage else None
    cached = None
    if details and type(details) is dict and "cached_tokens" in details:
        cached = details["cached_tokens"]
    if cached is None:
        cached = usage.get("prompt_cache_hit_tokens")  # DeepSeek's spelling
    # `prompt_tokens` includes the cached part on OpenAI; agentd's `input_tokens` means
    # uncached input (as Anthropic reports it), so budgets that add cache reads never
    # count the cached tokens twice.
    cached_n = cached if type(cached) is int and cached >= 0 else token_count(cached)
    # (a non-negative int, what servers send, taken as it is: `token_count` gives it back)
    prompt = usage["prompt_tokens"] if "prompt_tokens" in usage else None
    completion = usage["completion_tokens"] if "completion_tokens" in usage else None
    uncached = (prompt if type(prompt) is int else token_count(prompt)) - cached_n
    return Usage(
        input_tokens=uncached if uncached > 0 else 0,
        output_tokens=completion if type(completion) is int and completion >= 0 else token_count(completion),
        cache_read_tokens=cached_n,
    )
