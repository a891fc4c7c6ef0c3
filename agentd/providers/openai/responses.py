"""OpenAI Responses API provider (`POST {base_url}/responses`, streaming SSE over httpx).

Stateless on purpose: every call sends the whole conversation with `store: false`, so
nothing lives on OpenAI's side and a session survives restarts and provider rotation. A
reasoning model's reasoning items come back encrypted (`include:
["reasoning.encrypted_content"]`); they are kept on the assistant message as
`ReasoningBlock`s and sent back verbatim before that message's function calls, which is how
the model keeps its chain of thought across a tool round. Readable reasoning summaries
stream as thought chunks. The stream side is in `openai_responses_stream.py`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
from pydantic import SecretStr

from agentd.core import ErrorKind, HarnessError, Image, Message, ProviderRequest, StreamEvent
from agentd.infra import HttpTransport, ReasoningEffort
from agentd.providers.http import HttpProvider, parse_json
from agentd.providers.openai.errors import classify_http_error
from agentd.providers.openai.models import is_reasoning_model
from agentd.providers.openai.responses_stream import PROVIDER_TAG, TERMINAL_EVENTS, ResponsesAssembler
from agentd.providers.wire_cache import EncodedMessages, encode_items, wire_pieces

__all__ = ["OpenAIResponsesProvider", "translate_input"]


class OpenAIResponsesProvider(HttpProvider):
    """One Responses API endpoint + model. `stream()` performs one sampling call."""

    name = "openai-responses"
    supports_native_schema = True
    path = "/responses"
    classify = classify_http_error

    def __init__(
        self,
        *,
        base_url: str,
        api_key: SecretStr | str | None,
        model: str,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        first_token_timeout: float | None = None,
        stream_idle_timeout: float | None = None,
        reasoning_effort: ReasoningEffort | None = None,
        client: httpx.AsyncClient | None = None,
        http_transport: HttpTransport | None = None,
    ) -> None:
        super().__init__(
            base_url=base_url.rstrip("/"),
            api_key=api_key,
            model=model,
            timeout=timeout,
            connect_timeout=connect_timeout,
            first_token_timeout=first_token_timeout,
            stream_idle_timeout=stream_idle_timeout,
            client=client,
            http_transport=http_transport,
        )
        self.reasoning_effort = reasoning_effort
        self._encoded = EncodedMessages()  # per session: the conversation's wire bytes

    def forget_session(self, session_id: str) -> None:
        """Drop what is kept for the session (its conversation's wire bytes): it was unloaded."""
        self._encoded.forget(session_id)

    def build_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The JSON body for `request` (public so tests and debugging tools can inspect it)."""
        return self._compose(request, translate_input(request.messages))

    def encode_body(self, request: ProviderRequest) -> bytes:
        """`build_body(request)` encoded, the conversation's bytes reused from the session's
        previous call (`wire_cache`)."""
        return b"".join(self.encode_pieces(request))

    def encode_pieces(self, request: ProviderRequest) -> list[bytes]:
        """`encode_body(request)` in pieces, as the transport writes them (not joined)."""
        return wire_pieces(
            lambda: self._compose(
                request, self._encoded.array(request.session_id, request.messages, _encode_message)
            ),
            lambda: self.build_body(request),
        )

    def _compose(self, request: ProviderRequest, items: Any) -> dict[str, Any]:
        model = request.model or self.model
        body: dict[str, Any] = {
            "model": model,
            "input": items,
            "stream": True,
            "store": False,
        }
        if request.system:
            body["instructions"] = request.system
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    # Strict mode rejects optional properties; the tools validate their input.
                    "strict": False,
                }
                for t in request.tools
            ]
        if request.output_schema is not None:
            body["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": "output",
                    "schema": request.output_schema,
                    "strict": False,
                }
            }
        if request.max_output_tokens is not None:
            body["max_output_tokens"] = request.max_output_tokens
        if is_reasoning_model(model):
            # Other models refuse encrypted reasoning ("not supported with this model").
            body["include"] = ["reasoning.encrypted_content"]
            reasoning: dict[str, Any] = {"summary": "auto"}
            if self.reasoning_effort is not None:
                reasoning["effort"] = self.reasoning_effort.value
            body["reasoning"] = reasoning
        return body

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        """Yield the events of one streamed response; raise `HarnessError` on any failure."""
        response, deadline = await self._open(self.encode_pieces(request))
        try:
            assembler = ResponsesAssembler()
            reader = self._reader(response, deadline)
            if reader is None:
                # A server that ignored `stream: true` and answered with one Response object.
                for out in assembler.feed_response(await self._document(response, deadline)):
                    yield out
            else:
                async for name, data in reader.events():
                    chunk = parse_json(data)
                    chunk.setdefault("type", name)
                    for out in assembler.feed(chunk):
                        reader.first_token()
                        yield out
                    if chunk["type"] in TERMINAL_EVENTS:
                        reader.end()  # the rest of the body is read, so the connection is reused
            if not assembler.ended:
                raise HarnessError(
                    ErrorKind.PROVIDER_UNAVAILABLE,
                    "stream cut: the server closed the stream before response.completed",
                )
            for out in assembler.finish():
                yield out
        finally:
            await response.aclose()


def translate_input(messages: list[Message]) -> list[dict[str, Any]]:
    """The conversation as Responses API input items."""
    return [item for m in messages for item in message_items(m)]


def _encode_message(message: Message) -> bytes:
    return encode_items(message_items(message))


def _image(image: Image) -> dict[str, Any]:
    url = f"data:{image.mime_type};base64,{image.data}"
    return {"type": "input_image", "image_url": url, "detail": "auto"}


def message_items(m: Message) -> list[dict[str, Any]]:
    """One message's input items (none, one or several)."""
    if m.role == "tool":
        output: str | list[dict[str, Any]] = m.content
        if m.images:  # a function_call_output takes image items beside its text
            output = [{"type": "input_text", "text": m.content}, *(_image(i) for i in m.images)]
        return [{"type": "function_call_output", "call_id": m.tool_call_id or "", "output": output}]
    if m.role == "assistant":
        # Reasoning first, as the model produced it, then the text, then the calls it led to.
        items = [dict(b.data) for b in m.reasoning_blocks if b.provider == PROVIDER_TAG]
        if m.content:
            items.append({"role": "assistant", "content": m.content})
        items += [
            {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
            for c in m.tool_calls
        ]
        return items
    if m.images:
        parts: list[dict[str, Any]] = [{"type": "input_text", "text": m.content}] if m.content else []
        parts += [_image(i) for i in m.images]
        return [{"type": "message", "role": m.role, "content": parts}]
    return [{"role": m.role, "content": m.content}]
