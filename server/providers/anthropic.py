"""Anthropic Messages API provider (streaming SSE over httpx).

Speaks `POST {base_url}/v1/messages` with `stream: true` and `anthropic-version:
2023-06-01`. The event stream (`message_start`, `content_block_start/delta/stop`,
`message_delta`, `message_stop`, `ping`, `error`) is translated into the provider-neutral
`StreamEvent`s of `server.providers.base`; every failure leaves as a classified
`HarnessError` so the loop can decide on retries by `ErrorKind` alone. No retries happen here.

Usage is reported the way Anthropic counts it: `input_tokens` are the uncached input
tokens, cache reads and cache writes are separate, so input + output + cache read + cache
write is the whole spend (R-B1).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
from pydantic import SecretStr

from server.core.conversation import Message
from server.core.errors import ErrorKind, HarnessError
from server.core.provider import (
    ProviderRequest,
    ReasoningDelta,
    Stop,
    StopReason,
    StreamEvent,
    TextDelta,
    ToolCallComplete,
    ToolCallDelta,
    Usage,
)
from server.providers.http_common import default_ssl_context, guard, open_stream
from server.providers.openai import parse_retry_after

_T = TypeVar("_T")

API_VERSION = "2023-06-01"

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

# e.g. "prompt is too long: 208310 tokens > 200000 maximum",
# "input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000, ..."
_CONTEXT_OVERFLOW_RE = re.compile(
    r"prompt is too long|exceeds? (the )?context (limit|window)|context[ _-]?(length|window)"
    r"|maximum context|too many (input |prompt )?tokens",
    re.IGNORECASE,
)
# e.g. "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing..."
_QUOTA_RE = re.compile(r"credit balance|billing|purchase credits|quota", re.IGNORECASE)

# An empty tool_result is rejected ("content cannot be empty if `is_error` is true").
_EMPTY_TOOL_RESULT = "(no output)"


class AnthropicProvider:
    """One Anthropic endpoint + model. `stream()` performs one sampling call."""

    name = "anthropic"
    supports_native_schema = False

    def __init__(
        self,
        *,
        base_url: str = "https://api.anthropic.com",
        api_key: SecretStr | str | None,
        model: str,
        max_tokens: int = 8192,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        first_token_timeout: float | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        # The SDKs' base URL has no /v1; tolerate one given OpenAI-style.
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.model = model
        self.max_tokens = max_tokens
        # Kept wrapped so a repr or a logged `vars()` of the provider cannot show it.
        self._api_key = SecretStr(api_key) if isinstance(api_key, str) else api_key
        self._url = f"{self.base_url}/v1/messages"
        # `timeout` bounds every read/write/pool wait (i.e. the gap between two events);
        # applied per request so it also holds for a caller-supplied client.
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self._first_token_timeout = first_token_timeout
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(timeout=self._timeout, verify=default_ssl_context())

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it (a passed-in client is the caller's)."""
        if self._owns_client:
            await self._client.aclose()

    # -- request translation -------------------------------------------------------------

    def build_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The JSON body for `request` (public so tests and debugging tools can inspect it)."""
        # Anthropic has no system role inside `messages`: system messages join the prompt.
        system = [request.system] if request.system else []
        system += [m.content for m in request.messages if m.role == "system" and m.content]
        body: dict[str, Any] = {
            "model": request.model or self.model,
            "max_tokens": request.max_output_tokens or self.max_tokens,
            "messages": _translate_messages(request.messages),
            "stream": True,
        }
        if system:
            body["system"] = "\n\n".join(system)
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        # `output_schema` is ignored (supports_native_schema = False): the loop's
        # StructuredOutput tool shim handles it.
        return body

    def _headers(self) -> dict[str, str]:
        headers = {
            "anthropic-version": API_VERSION,
            "content-type": "application/json",
            "accept": "text/event-stream",
        }
        if self._api_key:
            headers["x-api-key"] = self._api_key.get_secret_value()
        return headers

    # -- streaming -----------------------------------------------------------------------

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        """Yield the events of one streamed message; raise `HarnessError` on any failure."""
        response, deadline = await open_stream(
            self._client,
            self._url,
            self.build_body(request),
            self._headers(),
            self._timeout,
            base_url=self.base_url,
            first_token_timeout=self._first_token_timeout,
            classify=classify_http_error,
        )
        try:
            assembler = _Assembler()
            content_type = response.headers.get("content-type", "")
            if "json" in content_type and "event-stream" not in content_type:
                # A proxy that ignored `stream: true` and answered with one Message document.
                raw = await self._guard(response.aread(), deadline)
                for event in assembler.feed_message(_parse_json(raw.decode(errors="replace"))):
                    yield event
            else:
                async for event in self._read_sse(response, assembler, deadline):
                    yield event
            if not assembler.stopped:
                raise HarnessError(
                    ErrorKind.PROVIDER_UNAVAILABLE,
                    "stream cut: the server closed the stream before message_stop",
                )
            for event in assembler.finish():
                yield event
        finally:
            await response.aclose()

    async def _read_sse(
        self, response: httpx.Response, assembler: _Assembler, deadline: float | None
    ) -> AsyncIterator[StreamEvent]:
        decoder = _SSEDecoder()
        lines = response.aiter_lines()
        while True:
            line = await self._guard(anext(lines, None), deadline)
            item = decoder.flush() if line is None else decoder.feed(line)
            if item is not None:
                event_name, data = item
                for event in assembler.feed(_parse_json(data), event_name):
                    deadline = None  # the first token arrived; from now on only `timeout` applies
                    yield event
                if assembler.stopped:
                    return  # message_stop: anything after it is not ours to read
            if line is None:
                return

    async def _guard(self, awaitable: Awaitable[_T], deadline: float | None) -> _T:
        return await guard(
            awaitable, deadline, base_url=self.base_url, first_token_timeout=self._first_token_timeout
        )


# -- message translation -----------------------------------------------------------------


def _translate_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Conversation → Anthropic `messages`: strict user/assistant alternation, where
    consecutive same-role messages (e.g. several tool results) become one message."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue  # folded into `system` by build_body
        role, blocks = _content_blocks(message)
        if not blocks:
            continue  # "all messages must have non-empty content"
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    for entry in out:
        if entry["role"] == "user":
            # tool_result blocks must come first in their user message (stable order otherwise).
            entry["content"].sort(key=lambda block: block["type"] != "tool_result")
    return out


def _content_blocks(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "tool":
        content = message.content if message.content.strip() else _EMPTY_TOOL_RESULT
        block = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id or "",
            "content": content,
            "is_error": message.is_error,
        }
        return "user", [block]
    # Whitespace-only text blocks are rejected ("text content blocks must contain non-whitespace text").
    blocks: list[dict[str, Any]] = [
        {"type": "image", "source": {"type": "base64", "media_type": i.mime_type, "data": i.data}}
        for i in message.images
    ]
    if message.content.strip():
        blocks.append({"type": "text", "text": message.content})
    if message.role == "assistant":
        # `reasoning` is dropped: thinking blocks may only be sent back with their signature.
        blocks += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": _tool_input(c.arguments)}
            for c in message.tool_calls
        ]
        return "assistant", blocks
    return "user", blocks


def _tool_input(arguments: str) -> dict[str, Any]:
    """`input` must be a JSON object; keep unparseable model output visible rather than lose it."""
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except ValueError:
        return {"_raw": arguments}
    return value if isinstance(value, dict) else {"_raw": arguments}


# -- SSE parsing ---------------------------------------------------------------------------


class _SSEDecoder:
    """Line-level Server-Sent Events decoding: (`event:` name, joined `data:` lines) per event."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> tuple[str, str] | None:
        if line == "":
            return self.flush()
        if line.startswith(":"):  # comment / keep-alive
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        return None  # id:, retry: carry nothing we need

    def flush(self) -> tuple[str, str] | None:
        event, self._event = self._event, ""
        if not self._data:
            return None
        data, self._data = "\n".join(self._data), []
        return event, data


def _malformed(data: Any) -> HarnessError:
    text = data if isinstance(data, str) else json.dumps(data)
    return HarnessError(ErrorKind.PROVIDER_UNAVAILABLE, f"malformed chunk in stream: {text[:200]!r}")


def _parse_json(data: str) -> dict[str, Any]:
    try:
        chunk = json.loads(data)
    except ValueError as exc:
        raise _malformed(data) from exc
    if not isinstance(chunk, dict):
        raise _malformed(data)
    return chunk


@dataclass
class _Block:
    kind: str  # "text", "thinking", "tool_use", or a type we ignore
    tool_index: int = 0
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


class _Assembler:
    """Folds stream events into `StreamEvent`s. Content blocks stream one after another, so
    a tool call is complete at its `content_block_stop` and tool calls finish in order."""

    def __init__(self) -> None:
        self.blocks: dict[int, _Block] = {}
        self.tool_count = 0
        self.stop_reason: str | None = None
        self.usage: dict[str, int] = {}
        self.stopped = False  # message_stop seen

    def feed(self, event: dict[str, Any], event_name: str = "") -> list[StreamEvent]:
        kind = event.get("type") or event_name
        try:
            return self._feed(kind, event)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise _malformed(event) from exc

    def _feed(self, kind: str, event: dict[str, Any]) -> list[StreamEvent]:
        if kind == "message_start":
            self._merge_usage(event["message"].get("usage"))
        elif kind == "content_block_start":
            return self._block_start(_index(event), event["content_block"])
        elif kind == "content_block_delta":
            return self._block_delta(_index(event), event["delta"])
        elif kind == "content_block_stop":
            block = self.blocks.pop(_index(event), None)
            if block is not None and block.kind == "tool_use":
                return [_complete(block)]
        elif kind == "message_delta":
            reason = (event.get("delta") or {}).get("stop_reason")
            if reason:
                self.stop_reason = str(reason)
            self._merge_usage(event.get("usage"))  # cumulative counts: later values win
        elif kind == "message_stop":
            self.stopped = True
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
            self.blocks[index] = _Block("thinking")
            thinking = block.get("thinking") or ""
            return [ReasoningDelta(thinking)] if thinking else []
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
        # redacted_thinking, server_tool_use, web_search_tool_result, ...: not ours to surface.
        self.blocks[index] = _Block(block_type)
        return []

    def _block_delta(self, index: int, delta: dict[str, Any]) -> list[StreamEvent]:
        delta_type = delta["type"]
        if delta_type == "text_delta":
            text = str(delta["text"])
            return [TextDelta(text)] if text else []
        if delta_type == "thinking_delta":
            thinking = str(delta["thinking"])
            return [ReasoningDelta(thinking)] if thinking else []
        if delta_type == "input_json_delta":
            block = self.blocks.get(index)
            if block is None:
                raise ValueError(f"input_json_delta for unknown content block {index}")
            fragment = str(delta["partial_json"])
            if block.kind != "tool_use" or not fragment:
                return []  # server_tool_use input, or the usual empty first fragment
            block.arguments.append(fragment)
            return [ToolCallDelta(index=block.tool_index, arguments_delta=fragment)]
        # signature_delta (only needed to send thinking back), citations_delta, ...
        return []

    def _merge_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for key in _USAGE_FIELDS:
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                self.usage[key] = value

    def feed_message(self, message: dict[str, Any]) -> list[StreamEvent]:
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
        # Tool blocks left open (no content_block_stop) still complete, in order.
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


# -- error classification ------------------------------------------------------------------

# Anthropic's error types, for in-stream errors that come without an HTTP status.
_TYPE_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def _error_fields(body: Any) -> tuple[str, str, str]:
    """(message, error type, request id) from `{"type": "error", "error": {...}}` or a stray body."""
    if isinstance(body, str):
        return body.strip(), "", ""
    if not isinstance(body, dict):
        return "", "", ""
    request_id = str(body.get("request_id") or "")
    error = body.get("error", body)
    if isinstance(error, str):
        return error, "", request_id
    if not isinstance(error, dict):
        return str(error), "", request_id
    return str(error.get("message") or ""), str(error.get("type") or ""), request_id


def classify_http_error(status: int | None, body: Any, headers: Mapping[str, str]) -> HarnessError:
    """Map an HTTP error status + Anthropic error body to a `HarnessError`.

    `status=None`: an `error` event inside a 200 stream, classified by its error type.
    """
    message, err_type, request_id = _error_fields(body)
    request_id = request_id or headers.get("request-id", "")
    effective = status if status is not None else _TYPE_STATUS.get(err_type)
    detail = f"HTTP {status}" if status is not None else "error in stream"
    if err_type:
        detail += f" ({err_type})"
    full = f"{detail}: {message}" if message else detail
    if request_id:
        full += f" [request-id {request_id}]"
    retry_after = parse_retry_after(headers)

    def err(kind: ErrorKind, *, retry: float | None = None) -> HarnessError:
        return HarnessError(kind, full, status=status, retry_after=retry)

    if effective == 402 or (effective in (None, 400, 403) and _QUOTA_RE.search(message)):
        return err(ErrorKind.QUOTA)
    if effective == 413 or (effective in (None, 400) and _CONTEXT_OVERFLOW_RE.search(message)):
        return err(ErrorKind.CONTEXT_OVERFLOW)
    if effective == 429:
        return err(ErrorKind.RATE_LIMITED, retry=retry_after)
    if effective in (401, 403):
        return err(ErrorKind.AUTHENTICATION)
    if effective == 404:
        return err(ErrorKind.PROVIDER_UNAVAILABLE)  # model or endpoint not served here
    if effective == 408:
        return err(ErrorKind.TIMEOUT)
    if effective is not None and 400 <= effective < 500:
        return err(ErrorKind.INVALID_REQUEST)
    # 500 api_error, 529 overloaded_error, other 5xx, or an unknown in-stream error.
    return err(ErrorKind.PROVIDER_UNAVAILABLE, retry=retry_after)
