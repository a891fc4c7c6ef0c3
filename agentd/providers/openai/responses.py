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

from typing import Any

from agentd.core import Image, Message, ProviderRequest
from agentd.providers.http import FoldingHttpProvider
from agentd.providers.openai.base import OpenAIHttpProvider
from agentd.providers.openai.models import is_reasoning_model
from agentd.providers.openai.responses_stream import PROVIDER_TAG, ResponsesAssembler
from agentd.providers.wire_cache import Spliced, encode_items

__all__ = ["OpenAIResponsesProvider", "translate_input"]


class OpenAIResponsesProvider(OpenAIHttpProvider, FoldingHttpProvider):
    """One Responses API endpoint + model. `stream()` performs one sampling call."""

    name = "openai-responses"
    path = "/responses"

    def build_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The JSON body for `request` (public so tests and debugging tools can inspect it)."""
        return self._compose(request, translate_input(request.messages))

    def _first(self, request: ProviderRequest) -> bytes:
        return b""  # (the system prompt is the body's `instructions`)

    def _messages(self, request: ProviderRequest, first: bytes) -> Spliced:
        return self._encoded.array(request.session_id, request.messages, _encode_message, first)

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

    def _fold(self) -> ResponsesAssembler:
        return ResponsesAssembler()


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
