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

from collections.abc import AsyncIterator
from typing import Any

import httpx
from pydantic import SecretStr

from agentd.core import ErrorKind, HarnessError, ProviderRequest, StreamEvent
from agentd.infra import HttpTransport
from agentd.providers.anthropic.errors import classify_http_error
from agentd.providers.anthropic.request import AnthropicOptions, build_body
from agentd.providers.anthropic.stream import Assembler
from agentd.providers.anthropic.wire import AnthropicWire
from agentd.providers.http import HttpProvider, ListFormat, parse_json

__all__ = ["API_VERSION", "AnthropicProvider", "classify_http_error"]

API_VERSION = "2023-06-01"


class AnthropicProvider(HttpProvider):
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
        api_key: SecretStr | str | None,
        model: str,
        max_tokens: int = 8192,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        first_token_timeout: float | None = None,
        stream_idle_timeout: float | None = None,
        client: httpx.AsyncClient | None = None,
        http_transport: HttpTransport | None = None,
        prompt_cache: bool = True,
        thinking_budget: int = 0,
        adaptive_thinking: bool = False,
    ) -> None:
        # Built first: a bad thinking budget is refused before a client is made.
        self.options = AnthropicOptions(model, max_tokens, prompt_cache, thinking_budget, adaptive_thinking)
        self.max_tokens = max_tokens
        self._wire = AnthropicWire()  # per session: the conversation's wire bytes
        # The SDKs' base URL has no /v1; tolerate one given OpenAI-style.
        super().__init__(
            base_url=base_url.rstrip("/").removesuffix("/v1"),
            api_key=api_key,
            model=model,
            timeout=timeout,
            connect_timeout=connect_timeout,
            first_token_timeout=first_token_timeout,
            stream_idle_timeout=stream_idle_timeout,
            client=client,
            http_transport=http_transport,
        )

    # -- request translation -------------------------------------------------------------

    def build_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The JSON body for `request` (public so tests and debugging tools can inspect it)."""
        return build_body(request, self.options)

    def encode_body(self, request: ProviderRequest) -> bytes:
        """`build_body(request)` encoded, the conversation's bytes reused from the session's
        previous call (`anthropic_wire`)."""
        return b"".join(self.encode_pieces(request))

    def forget_session(self, session_id: str) -> None:
        """Drop what is kept for the session (its conversation's wire bytes): it was unloaded."""
        self._wire.forget(session_id)

    def encode_pieces(self, request: ProviderRequest) -> list[bytes]:
        """`encode_body(request)` in pieces, as the transport writes them (not joined)."""
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

    # -- streaming -----------------------------------------------------------------------

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        """Yield the events of one streamed message; raise `HarnessError` on any failure."""
        response, deadline = await self._open(self.encode_pieces(request))
        try:
            assembler = Assembler()
            reader = self._reader(response, deadline)
            if reader is None:
                # A proxy that ignored `stream: true` and answered with one Message document.
                for event in assembler.feed_message(await self._document(response, deadline)):
                    yield event
            else:
                async for event_name, data in reader.events():
                    for event in assembler.feed(parse_json(data), event_name):
                        reader.first_token()
                        yield event
                    if assembler.stopped:
                        reader.end()  # message_stop: the reader drains the body so the connection is reused
            if not assembler.stopped:
                raise HarnessError(
                    ErrorKind.PROVIDER_UNAVAILABLE,
                    "stream cut: the server closed the stream before message_stop",
                )
            for event in assembler.finish():
                yield event
        finally:
            await response.aclose()
