"""Anthropic Messages API provider (streaming SSE over httpx).

Speaks `POST {base_url}/v1/messages` with `stream: true` and `anthropic-version:
2023-06-01`. The event stream (`message_start`, `content_block_start/delta/stop`,
`message_delta`, `message_stop`, `ping`, `error`) is translated into the provider-neutral
`StreamEvent`s of `agentd.core.provider`; every failure leaves as a classified
`HarnessError` so the loop can decide on retries by `ErrorKind` alone. No retries happen here.

Usage is reported the way Anthropic counts it: `input_tokens` are the uncached input
tokens, cache reads and cache writes are separate, so input + output + cache read + cache
write is the whole spend (R-B1); see `anthropic_stream.py`.

The request side is in `anthropic_request.py` (body, prompt caching, extended thinking) and
`anthropic_messages.py` (the conversation), the stream side in `anthropic_stream.py`, the
error classification in `anthropic_errors.py`.
"""

from __future__ import annotations

from typing import Any, Unpack

from agentd.core import ProviderRequest
from agentd.providers.anthropic.errors import classify_http_error
from agentd.providers.anthropic.request import AnthropicOptions, build_body
from agentd.providers.anthropic.stream import Assembler
from agentd.providers.anthropic.wire import AnthropicWire
from agentd.providers.http import FoldingHttpProvider, HttpOptions, ListFormat

__all__ = ["API_VERSION", "AnthropicProvider", "classify_http_error"]

API_VERSION = "2023-06-01"


class AnthropicProvider(FoldingHttpProvider):
    """One Anthropic endpoint + model. `stream()` performs one sampling call."""

    name = "anthropic"
    supports_native_schema = False
    path = "/v1/messages"
    models_path = "/v1/models"
    models_format = ListFormat.ANTHROPIC
    classify = classify_http_error

    def __init__(
        self,
        *,
        base_url: str = "https://api.anthropic.com",
        max_tokens: int = 8192,
        prompt_cache: bool = True,
        thinking_budget: int = 0,
        adaptive_thinking: bool = False,
        **http: Unpack[HttpOptions],
    ) -> None:
        # Built first: a bad thinking budget is refused before a client is made (a missing
        # model is refused by `HttpProvider`'s own signature, hence no KeyError here).
        model = http.get("model", "")
        self.options = AnthropicOptions(model, max_tokens, prompt_cache, thinking_budget, adaptive_thinking)
        self.max_tokens = max_tokens
        self._wire = AnthropicWire()  # per session: the conversation's wire bytes
        # The SDKs' base URL has no /v1; tolerate one given OpenAI-style.
        super().__init__(base_url=base_url.rstrip("/").removesuffix("/v1"), **http)

    # -- request translation -------------------------------------------------------------

    def build_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The JSON body for `request` (public so tests and debugging tools can inspect it)."""
        return build_body(request, self.options)

    def forget_session(self, session_id: str) -> None:
        """Drop what is kept for the session (its conversation's wire bytes): it was unloaded."""
        self._wire.forget(session_id)

    def encode_pieces(self, request: ProviderRequest) -> list[bytes]:
        """`build_body(request)` encoded in pieces, as the transport writes them (not joined),
        the conversation's bytes reused from the session's previous call (`anthropic_wire`)."""
        return self._wire.encode_pieces(request, self.options)

    def _headers(self) -> dict[str, str]:
        headers = {
            "anthropic-version": API_VERSION,
            "content-type": "application/json",
            "accept": "text/event-stream",
        }
        if self._api_key:
            headers["x-api-key"] = self._api_key.get_secret_value()
        return headers

    def _fold(self) -> Assembler:
        return Assembler()
