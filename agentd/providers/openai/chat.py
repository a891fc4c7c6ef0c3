"""OpenAI-compatible Chat Completions provider (streaming SSE over httpx).

Speaks `POST {base_url}/chat/completions` with `stream: true`, which OpenAI itself and
most self-hosted or proxy servers (vLLM, llama.cpp, Ollama, OpenRouter, DeepSeek, LiteLLM)
implement. The stream is translated into the provider-neutral `StreamEvent`s of
`agentd.core.provider`; every failure leaves as a classified `HarnessError` so the loop
can decide on retries by `ErrorKind` alone. The one request repeated here is a body a server
refused for a single optional parameter (`openai_models.Amendments`): the amended body is
sent once, and later calls use it from the start.

Compatibility choices: `tool_choice` is never sent (the default `auto` is what we want, and
several servers reject the field or need a special flag for it); `stream_options.include_usage`
is asked for, and a stream without usage is still a complete answer. The stream side is in
`openai_stream.py`, the error classification in `openai_errors.py`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Unpack

import orjson

from agentd.core import ErrorKind, HarnessError, Message, ProviderRequest, StreamEvent, events_of
from agentd.infra import ReasoningEffort, TokenField
from agentd.providers.http import HttpOptions, parse_retry_after
from agentd.providers.openai.base import OpenAIHttpProvider
from agentd.providers.openai.chat_stream import ChatAssembler, non_stream_as_chunk
from agentd.providers.openai.errors import classify_http_error
from agentd.providers.openai.models import Amendments, is_reasoning_model, token_field
from agentd.providers.wire_cache import Spliced, encode_items

__all__ = ["OpenAIProvider", "classify_http_error", "parse_retry_after"]


class OpenAIProvider(OpenAIHttpProvider):
    """One OpenAI-compatible endpoint + model. `stream()` performs one sampling call."""

    name = "openai"
    path = "/chat/completions"

    def __init__(
        self,
        *,
        base_url: str,
        token_field: TokenField = TokenField.AUTO,
        reasoning_effort: ReasoningEffort | None = None,
        **http: Unpack[HttpOptions],
    ) -> None:
        super().__init__(base_url=base_url, reasoning_effort=reasoning_effort, **http)
        self.token_field = token_field
        self._amendments: dict[str, Amendments] = {}  # per model

    # -- request translation -------------------------------------------------------------

    def build_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The JSON body for `request` (public so tests and debugging tools can inspect it)."""
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.extend(_translate_message(m) for m in request.messages)
        return self._compose(request, messages)

    def _first(self, request: ProviderRequest) -> bytes:
        return encode_items([{"role": "system", "content": request.system}]) if request.system else b""

    def _messages(self, request: ProviderRequest, first: bytes) -> Spliced:
        return self._encoded.array(request.session_id, request.messages, _encode_message, first)

    def _compose(self, request: ProviderRequest, messages: Any) -> dict[str, Any]:
        model = request.model or self.model
        body: dict[str, Any] = {
            "model": model,
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
            field = token_field(self.token_field, base_url=self.base_url, model=model)
            body[field] = request.max_output_tokens
        if self.reasoning_effort is not None and is_reasoning_model(model):
            body["reasoning_effort"] = self.reasoning_effort.value
        return self._amendments.get(model, Amendments()).apply(body)

    # -- streaming -----------------------------------------------------------------------

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        """Yield the events of one streamed completion; raise `HarnessError` on any failure
        (`stream_batches`' events one by one)."""
        return events_of(self.stream_batches(request))

    async def stream_batches(self, request: ProviderRequest) -> AsyncIterator[list[StreamEvent]]:
        """The events of one streamed completion, a network read's at a time (`StreamBatches`).
        Not `FoldingHttpProvider.stream_batches` on purpose: a refused parameter is amended
        and the body sent again, `[DONE]` is no JSON event, and a connection lost after the
        finish_reason still leaves a complete answer."""
        model = request.model or self.model
        for attempt in range(2):
            try:
                # With what the server refused so far amended.
                response, deadline = await self._open(self.encode_pieces(request))
                break
            except HarnessError as err:
                amendments = self._amendments.setdefault(model, Amendments())
                if attempt or not amendments.learn(self._compose(request, []), err):
                    raise
                self._forget_bodies()  # their bytes have the refused parameter
        else:  # pragma: no cover
            raise AssertionError("unreachable")
        try:
            assembler = ChatAssembler()
            reader = self._reader(response, deadline)
            tail: list[StreamEvent] | None = None  # `finish()`'s events, once taken
            if reader is None:
                # Some servers ignore `stream: true` and answer with one JSON document.
                batch = assembler.feed(non_stream_as_chunk(await self._document(response, deadline)))
                if batch:
                    yield batch
                assembler.done = True
            else:
                try:
                    while (events := await reader.read()) is not None:
                        # A read's events folded at once (`feed_read`) and handed over as one list.
                        batch = assembler.feed_read(events)
                        if assembler.done and assembler.failed is None:
                            reader.end()  # [DONE]: the rest of the body is read, so the connection is reused
                            # Nothing after [DONE] is folded: the answer's last events go with
                            # this read's (one resume less), unless finishing fails (raised below,
                            # after the drain, as before).
                            try:
                                tail = assembler.finish()
                            except HarnessError:
                                tail = None
                            else:
                                batch += tail
                        if batch:
                            if not reader.started:
                                reader.first_token()
                            yield batch
                        if assembler.failed is not None:
                            raise assembler.failed
                except HarnessError as err:
                    # Once the finish_reason is in, only the usage chunk and [DONE] are missing:
                    # the answer is complete, so a late transport hiccup must not discard it.
                    if assembler.finish_reason is None or err.kind not in _TRANSPORT_KINDS:
                        raise
            if tail is None:
                if not assembler.done and assembler.finish_reason is None:
                    raise HarnessError(
                        ErrorKind.PROVIDER_UNAVAILABLE,
                        "stream cut: the server closed the stream without [DONE] or a finish_reason",
                    )
                yield assembler.finish()
        finally:
            await response.aclose()


# Failures of the connection rather than of the answer (a malformed chunk is not one).
_TRANSPORT_KINDS = frozenset({ErrorKind.TIMEOUT, ErrorKind.NETWORK, ErrorKind.PROVIDER_UNAVAILABLE})


# -- message translation -----------------------------------------------------------------


def _encode_message(message: Message) -> bytes:
    # (`encode_items` of the one item, without its generator)
    return orjson.dumps(_translate_message(message)) + b","


# Chat Completions' tool messages are text only (images go in user messages, which cannot
# sit between a call and its result): the model is told why it cannot see them.
_IMAGES_NOT_SENT = (
    "\n[The images above are not shown to you: tool results carry text only on this API. The user sees them.]"
)


def _translate_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        content = message.content + (_IMAGES_NOT_SENT if message.images else "")
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": content}
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
