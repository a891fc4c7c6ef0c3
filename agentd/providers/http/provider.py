"""The transport half every HTTP provider shares: the endpoint, the API key, the timeouts,
the pooled client (`http_pool`) and its closing, opening a streamed answer (an error status
classified and raised), and reading it as SSE or as the one JSON document a server that
ignored `stream: true` sends. Each provider (`anthropic`, `openai`, `openai_responses`)
subclasses `HttpProvider` and keeps only its wire format: the body, the headers it needs
beyond a bearer key, and turning events into `StreamEvent`s.

Per call this adds no coroutine layer: `_open` hands back `open_stream`'s coroutine for
the caller to await, and `_reader` is a plain call (nothing here runs per chunk)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, ClassVar

import httpx
from pydantic import SecretStr

from agentd.core import HarnessError
from agentd.infra import HttpTransport
from agentd.providers.http import pool as http_pool
from agentd.providers.http.common import default_ssl_context, guard, open_stream
from agentd.providers.http.sse import SSEReader, parse_json

__all__ = ["HttpProvider"]


class HttpProvider:
    """One HTTP endpoint + model; subclasses set `path` (appended to the base URL) and
    `classify` (an error status → `HarnessError`), and build the body."""

    path: ClassVar[str]
    classify: ClassVar[Callable[[int, Any, Any], HarnessError]]

    def __init__(
        self,
        *,
        base_url: str,
        api_key: SecretStr | str | None,
        model: str,
        timeout: float,
        connect_timeout: float,
        first_token_timeout: float | None,
        stream_idle_timeout: float | None,
        client: httpx.AsyncClient | None,
        http_transport: HttpTransport | None = None,
    ) -> None:
        self.base_url = base_url
        self.model = model
        # Kept wrapped so a repr or a logged `vars()` of the provider cannot show it.
        self._api_key = SecretStr(api_key) if isinstance(api_key, str) else api_key
        self._url = f"{base_url}{self.path}"
        # `timeout` bounds every read/write/pool wait (i.e. the gap between two events);
        # applied per request so it also holds for a caller-supplied client. The stream
        # timeouts are finer (see `SSEReader`).
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self._first_token_timeout = first_token_timeout
        self._idle_timeout = stream_idle_timeout
        self._owns_client = client is None
        self._client = client or http_pool.client(self._timeout, default_ssl_context(), http_transport)

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it (a passed-in client is the caller's)."""
        if self._owns_client:
            await self._client.aclose()

    def _headers(self) -> dict[str, str]:
        """An SSE answer, the key as a bearer token (OpenAI's way; Anthropic has its own)."""
        headers = {"Accept": "text/event-stream"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
        return headers

    def _open(self, body: bytes | list[bytes]) -> Coroutine[Any, Any, tuple[httpx.Response, float | None]]:
        """POST `body` (`open_stream`): await it for the open response, which the caller
        closes, and the first-token deadline."""
        return open_stream(
            self._client,
            self._url,
            body,
            self._headers(),
            self._timeout,
            base_url=self.base_url,
            first_token_timeout=self._first_token_timeout,
            classify=type(self).classify,
        )

    def _reader(self, response: httpx.Response, deadline: float | None) -> SSEReader | None:
        """The response's event stream; None when it is one JSON document instead (read
        that with `_document`)."""
        content_type = response.headers.get("content-type", "")
        if "json" in content_type and "event-stream" not in content_type:
            return None
        return SSEReader(
            response,
            deadline,
            base_url=self.base_url,
            first_token_timeout=self._first_token_timeout,
            idle_timeout=self._idle_timeout,
        )

    async def _document(self, response: httpx.Response, deadline: float | None) -> Any:
        """The whole body of a non-streamed answer, parsed."""
        raw = await guard(
            response.aread(),
            deadline,
            base_url=self.base_url,
            first_token_timeout=self._first_token_timeout,
        )
        return parse_json(raw.decode(errors="replace"))
