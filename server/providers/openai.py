"""OpenAI-compatible Chat Completions provider (streaming SSE over httpx).

Speaks `POST {base_url}/chat/completions` with `stream: true`, which OpenAI itself and
most self-hosted or proxy servers (vLLM, llama.cpp, Ollama, OpenRouter, DeepSeek, LiteLLM)
implement. The stream is translated into the provider-neutral `StreamEvent`s of
`server.providers.base`; every failure leaves as a classified `HarnessError` so the loop
can decide on retries by `ErrorKind` alone. No retries happen here.
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
from server.providers.http_common import (  # parse_retry_after: re-exported, tests import it here
    default_ssl_context,
    guard,
    open_stream,
    parse_retry_after,
)

_T = TypeVar("_T")

_FINISH_REASONS: dict[str, StopReason] = {
    "stop": StopReason.END_TURN,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,  # legacy functions API
    "length": StopReason.MAX_TOKENS,
    "content_filter": StopReason.REFUSAL,
}

# Wordings used by OpenAI, vLLM, llama.cpp, OpenRouter... for an over-long prompt.
_CONTEXT_OVERFLOW_RE = re.compile(
    r"context[ _-]?(length|window)|maximum context|prompt is too long|input is too long"
    r"|too many (input |prompt )?tokens",
    re.IGNORECASE,
)


class OpenAIProvider:
    """One OpenAI-compatible endpoint + model. `stream()` performs one sampling call."""

    name = "openai"
    supports_native_schema = True

    def __init__(
        self,
        *,
        base_url: str,
        api_key: SecretStr | str | None,
        model: str,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        first_token_timeout: float | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        # Kept wrapped so a repr or a logged `vars()` of the provider cannot show it.
        self._api_key = SecretStr(api_key) if isinstance(api_key, str) else api_key
        self._url = f"{self.base_url}/chat/completions"
        # `timeout` bounds every read/write/pool wait (i.e. the gap between two chunks);
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
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.extend(_translate_message(m) for m in request.messages)
        body: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": messages,
            "stream": True,
            # Without this the stream carries no token counts at all.
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in request.tools
            ]
        if request.output_schema is not None:
            # strict=False: strict mode rejects common schema features (optional fields,
            # additionalProperties omitted); the loop validates the answer itself anyway.
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": request.output_schema, "strict": False},
            }
        if request.max_output_tokens is not None:
            body["max_tokens"] = request.max_output_tokens
        return body

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
        return headers

    # -- streaming -----------------------------------------------------------------------

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        """Yield the events of one streamed completion; raise `HarnessError` on any failure."""
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
                # Some servers ignore `stream: true` and answer with one JSON document.
                raw = await self._guard(response.aread(), deadline)
                for event in assembler.feed(_non_stream_as_chunk(_parse_json(raw.decode(errors="replace")))):
                    yield event
                assembler.done = True
            else:
                async for event in self._read_sse(response, assembler, deadline):
                    yield event
            if not assembler.done and assembler.finish_reason is None:
                raise HarnessError(
                    ErrorKind.PROVIDER_UNAVAILABLE,
                    "stream cut: the server closed the stream without [DONE] or a finish_reason",
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
            try:
                line = await self._guard(anext(lines, None), deadline)
            except HarnessError:
                # Once the finish_reason is in, only the usage chunk and [DONE] are missing:
                # the answer is complete, so a late transport hiccup must not discard it.
                if assembler.finish_reason is not None:
                    return
                raise
            data = decoder.flush() if line is None else decoder.feed(line)
            if data is not None:
                if data.strip() == "[DONE]":
                    assembler.done = True
                    return
                for event in assembler.feed(_parse_json(data)):
                    deadline = None  # the first token arrived; from now on only `timeout` applies
                    yield event
            if line is None:
                return

    async def _guard(self, awaitable: Awaitable[_T], deadline: float | None) -> _T:
        return await guard(
            awaitable, deadline, base_url=self.base_url, first_token_timeout=self._first_token_timeout
        )


# -- message translation -----------------------------------------------------------------


def _translate_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.content}
    if message.role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            # `null` rather than "" beside tool calls: some servers reject an empty string.
            out["content"] = message.content or None
            out["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in message.tool_calls
            ]
        # `reasoning` is deliberately not sent back: DeepSeek rejects reasoning_content in input.
        return out
    if message.images:
        parts: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
        parts += [
            {"type": "image_url", "image_url": {"url": f"data:{i.mime_type};base64,{i.data}"}}
            for i in message.images
        ]
        return {"role": message.role, "content": parts}
    return {"role": message.role, "content": message.content}


# -- SSE parsing ---------------------------------------------------------------------------


class _SSEDecoder:
    """Line-level Server-Sent Events decoding: `data:` lines joined until a blank line."""

    def __init__(self) -> None:
        self._data: list[str] = []

    def feed(self, line: str) -> str | None:
        if line == "":
            return self.flush()
        if line.startswith(":"):  # comment / keep-alive (e.g. ": OPENROUTER PROCESSING")
            return None
        name, _, value = line.partition(":")
        if name == "data":
            self._data.append(value.removeprefix(" "))
        return None  # event:, id:, retry: carry nothing we need

    def flush(self) -> str | None:
        if not self._data:
            return None
        data, self._data = "\n".join(self._data), []
        return data


def _parse_json(data: str) -> dict[str, Any]:
    try:
        chunk = json.loads(data)
    except ValueError as exc:
        raise HarnessError(
            ErrorKind.PROVIDER_UNAVAILABLE, f"malformed chunk in stream: {data[:200]!r}"
        ) from exc
    if not isinstance(chunk, dict):
        raise HarnessError(ErrorKind.PROVIDER_UNAVAILABLE, f"malformed chunk in stream: {data[:200]!r}")
    return chunk


def _non_stream_as_chunk(doc: dict[str, Any]) -> dict[str, Any]:
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


class _Assembler:
    """Folds chunks into events; tool calls are accumulated by `index` until the end."""

    def __init__(self) -> None:
        self.calls: dict[int, _PendingCall] = {}
        self.finish_reason: str | None = None
        self.refused = False
        self.usage: Usage | None = None
        self.done = False  # [DONE] seen

    def feed(self, chunk: dict[str, Any]) -> list[StreamEvent]:
        if "error" in chunk and not chunk.get("choices"):
            # OpenRouter / vLLM report failures after the 200 as an error object in the stream.
            raise classify_http_error(None, chunk, {})
        events: list[StreamEvent] = []
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = _usage(usage)
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # we always ask for n=1
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content")
            if not isinstance(reasoning, str) or not reasoning:
                # vLLM >= 0.10 / OpenRouter name it `reasoning`; never take both (some send both).
                reasoning = delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                events.append(ReasoningDelta(reasoning))
            content = delta.get("content")
            if isinstance(content, str) and content:
                events.append(TextDelta(content))
            refusal = delta.get("refusal")
            if isinstance(refusal, str) and refusal:
                self.refused = True
                events.append(TextDelta(refusal))
            for fragment in delta.get("tool_calls") or []:
                if isinstance(fragment, dict):
                    events.append(self._tool_fragment(fragment))
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
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
        call = self.calls.setdefault(index, _PendingCall())
        function = fragment.get("function") or {}
        new_id = fragment.get("id") or None
        new_name = function.get("name") or None
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
        for index in sorted(self.calls):
            call = self.calls[index]
            events.append(
                ToolCallComplete(
                    index=index,
                    id=call.id or f"call_{uuid.uuid4().hex[:24]}",  # Ollama & co. may omit ids
                    name=call.name,
                    arguments="".join(call.arguments) or "{}",
                )
            )
        if self.usage is not None:
            events.append(self.usage)
        if self.refused:
            reason = StopReason.REFUSAL
        elif self.calls and self.finish_reason in (None, "stop"):
            # Several servers (older vLLM, Ollama) say "stop" even when they emitted tool calls.
            reason = StopReason.TOOL_USE
        else:
            reason = _FINISH_REASONS.get(self.finish_reason or "stop", StopReason.END_TURN)
        events.append(Stop(reason))
        return events


def _usage(usage: dict[str, Any]) -> Usage:
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if cached is None:
        cached = usage.get("prompt_cache_hit_tokens")  # DeepSeek's spelling
    # `prompt_tokens` includes the cached part on OpenAI; agentd's `input_tokens` means
    # uncached input (as Anthropic reports it), so budgets that add cache reads never
    # count the cached tokens twice.
    cached_n = int(cached or 0)
    return Usage(
        input_tokens=max(0, int(usage.get("prompt_tokens") or 0) - cached_n),
        output_tokens=int(usage.get("completion_tokens") or 0),
        cache_read_tokens=cached_n,
    )


# -- error classification ------------------------------------------------------------------


def _error_fields(body: Any) -> tuple[str, str, str]:
    """(message, code, type) from the many error body shapes in the wild."""
    if isinstance(body, list) and body:  # Gemini's OpenAI layer wraps it in a list
        body = body[0]
    if isinstance(body, str):
        return body.strip(), "", ""
    if not isinstance(body, dict):
        return "", "", ""
    error = body.get("error", body)
    if isinstance(error, str):
        return error, str(body.get("code") or ""), str(body.get("type") or "")
    if not isinstance(error, dict):
        return str(error), "", ""
    message = error.get("message") or error.get("detail") or body.get("detail") or ""
    return str(message), str(error.get("code") or ""), str(error.get("type") or "")


def classify_http_error(status: int | None, body: Any, headers: Mapping[str, str]) -> HarnessError:
    """Map an HTTP error status + body to a `HarnessError`. `status=None`: an in-stream error."""
    message, code, err_type = _error_fields(body)
    if status is None and code.isdigit():
        status = int(code)  # OpenRouter puts the HTTP status in `error.code`
    tags = f"{code} {err_type}".lower()
    text = f"{message} {tags}".lower()
    detail = f"HTTP {status}" if status is not None else "error in stream"
    if code or err_type:
        detail += f" ({', '.join(x for x in (code, err_type) if x)})"
    full = f"{detail}: {message}" if message else detail
    retry_after = parse_retry_after(headers)

    def err(kind: ErrorKind, *, retry: float | None = None) -> HarnessError:
        return HarnessError(kind, full, status=status, retry_after=retry)

    if "insufficient_quota" in tags or "exceeded your current quota" in text:
        return err(ErrorKind.QUOTA)
    if "context_length_exceeded" in tags or (
        status in (None, 400, 413, 422) and _CONTEXT_OVERFLOW_RE.search(message)
    ):
        return err(ErrorKind.CONTEXT_OVERFLOW)
    if status == 429 or "rate_limit" in tags:
        return err(ErrorKind.RATE_LIMITED, retry=retry_after)
    if status == 401:
        return err(ErrorKind.AUTHENTICATION)
    if status == 402:  # OpenRouter: out of credits
        return err(ErrorKind.QUOTA)
    if status == 403:
        return err(ErrorKind.QUOTA if "quota" in text or "billing" in text else ErrorKind.AUTHENTICATION)
    if status == 404:
        return err(ErrorKind.PROVIDER_UNAVAILABLE)  # model or endpoint not served here
    if status == 408:
        return err(ErrorKind.TIMEOUT)
    if status == 413:
        # Payload too large, typically from a reverse proxy: shrinking the context fixes it.
        return err(ErrorKind.CONTEXT_OVERFLOW)
    if status is not None and 400 <= status < 500:
        return err(ErrorKind.INVALID_REQUEST)
    # 5xx, or an in-stream error without a usable status.
    return err(ErrorKind.PROVIDER_UNAVAILABLE, retry=retry_after)
