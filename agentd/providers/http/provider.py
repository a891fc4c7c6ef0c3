"""The transport half every HTTP provider shares: the endpoint, the API key, the timeouts,
the pooled client (`http_pool`) and its closing, opening a streamed answer (an error status
classified and raised), and reading it as SSE or as the one JSON document a server that
ignored `stream: true` sends, folded into `StreamEvent`s by the provider's `StreamFold`.
Each provider (`anthropic`, `openai`, `openai_responses`) subclasses `HttpProvider` and
keeps only its wire format: the body, the headers it needs beyond a bearer key, and its fold
(Chat Completions keeps its own `stream`: see agentd/providers/openai/chat.py).

Per call this adds no coroutine layer: `_open` hands back `open_stream`'s coroutine for
the caller to await, `_reader` is a plain call, and `stream` is the one generator between
the connection and the caller: it awaits the reader's events a network read at a time
(`SSEReader.read`), parses each from its bytes (`parse_event`) and folds it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, ClassVar, Protocol, Required, TypedDict

import httpx
from pydantic import SecretStr

from agentd.core import ErrorKind, HarnessError, ProviderRequest, StreamEvent, events_of
from agentd.infra import HttpTransport
from agentd.providers.http import pool as http_pool
from agentd.providers.http.answer import Answer
from agentd.providers.http.catalogue import ListFormat, ModelsEndpoint
from agentd.providers.http.common import default_ssl_context, guard, open_stream, with_content_type
from agentd.providers.http.sse import SSEReader, parse_event, parse_json

__all__ = ["FoldingHttpProvider", "HttpOptions", "HttpProvider", "StreamFold"]


class HttpOptions(TypedDict, total=False):
    """The keywords every HTTP provider takes beside its base URL and its own options."""

    api_key: Required[SecretStr | str | None]
    model: Required[str]
    timeout: float
    connect_timeout: float
    first_token_timeout: float | None
    stream_idle_timeout: float | None
    client: httpx.AsyncClient | None
    http_transport: HttpTransport | None


class StreamFold(Protocol):
    """One answer's events folded into `StreamEvent`s (a provider's assembler)."""

    # The wire's last event, named in the error when a stream ends before it.
    end_event: ClassVar[str]
    ended: bool  # the end event arrived: the rest of the body is not ours to read

    def feed(self, event: dict[str, Any], event_name: str) -> list[StreamEvent]: ...

    def feed_document(self, document: dict[str, Any]) -> list[StreamEvent]: ...

    def finish(self) -> list[StreamEvent]: ...


class HttpProvider(ABC):
    """One HTTP endpoint + model; subclasses set `path` (appended to the base URL) and
    `classify` (an error status → `HarnessError`), encode the body (`encode_pieces`) and
    read the answer: `FoldingHttpProvider` by a fold, Chat Completions by itself."""

    path: ClassVar[str]
    models_path: ClassVar[str] = "/models"  # OpenAI's, under a base URL that ends in /v1
    models_format: ClassVar[ListFormat] = ListFormat.OPENAI
    classify: ClassVar[Callable[[int, Any, Any], HarnessError]]

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
        client: httpx.AsyncClient | None = None,
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
        self._request_headers: dict[str, str] | None = None  # `_headers()` for a POST, kept
        self._owns_client = client is None
        self._client = client or http_pool.client(self._timeout, default_ssl_context, http_transport)

    @abstractmethod
    def encode_pieces(self, request: ProviderRequest) -> list[bytes]:
        """The JSON body for `request` in pieces, as the transport writes them (not joined)."""

    def encode_body(self, request: ProviderRequest) -> bytes:
        """The body `stream` sends, joined (the conversation's bytes reused from the
        session's previous call)."""
        return b"".join(self.encode_pieces(request))

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it (a passed-in client is the caller's)."""
        if self._owns_client:
            await self._client.aclose()

    def models_endpoint(self) -> ModelsEndpoint:
        """Where this provider's models are listed (agentd/providers/http/catalogue.py)."""
        return ModelsEndpoint(f"{self.base_url}{self.models_path}", self._headers(), self.models_format)

    def _headers(self) -> dict[str, str]:
        """An SSE answer, the key as a bearer token (OpenAI's way; Anthropic has its own)."""
        headers = {"Accept": "text/event-stream"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
        return headers

    def _open(self, body: bytes | list[bytes]) -> Coroutine[Any, Any, tuple[Answer, float | None]]:
        """POST `body` (`open_stream`): await it for the open answer, which the caller
        closes, and the first-token deadline."""
        headers = self._request_headers
        if headers is None:  # made once: the key and the provider's headers do not change
            headers = self._request_headers = with_content_type(self._headers())
        return open_stream(
            self._client,
            self._url,
            body,
            headers,
            self._timeout,
            base_url=self.base_url,
            first_token_timeout=self._first_token_timeout,
            classify=type(self).classify,
        )

    def _reader(self, answer: Answer, deadline: float | None) -> SSEReader | None:
        """The answer's event stream; None when it is one JSON document instead (read
        that with `_document`)."""
        content_type = answer.content_type
        if "json" in content_type and "event-stream" not in content_type:
            return None
        return SSEReader(
            answer,
            deadline,
            base_url=self.base_url,
            first_token_timeout=self._first_token_timeout,
            idle_timeout=self._idle_timeout,
        )

    async def _document(self, answer: Answer, deadline: float | None) -> Any:
        """The whole body of a non-streamed answer, parsed."""
        raw = await guard(
            answer.aread(),
            deadline,
            base_url=self.base_url,
            first_token_timeout=self._first_token_timeout,
        )
        return parse_json(raw.decode(errors="replace"))


class FoldingHttpProvider(HttpProvider):
    """An `HttpProvider` whose answer is read by a `StreamFold` (Anthropic, Responses)."""

    @abstractmethod
    def _fold(self) -> StreamFold:
        """A new fold for one answer."""

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        """Yield the events of one streamed answer; raise `HarnessError` on any failure
        (`stream_batches`' events one by one)."""
        return events_of(self.stream_batches(request))

    async def stream_batches(self, request: ProviderRequest) -> AsyncIterator[list[StreamEvent]]:
        """The events of one streamed answer, a network read's at a time (`StreamBatches`)."""
        response, deadline = await self._open(self.encode_pieces(request))
        try:
            fold = self._fold()
            reader = self._reader(response, deadline)
            if reader is None:
                # A server that ignored `stream: true` and answered with one JSON document.
                batch = fold.feed_document(await self._document(response, deadline))
                if not fold.ended:
                    if batch:
                        yield batch
                    raise _cut(fold)
                yield batch + fold.finish()
                return
            while (events := await reader.read()) is not None:
                batch = []
                try:
                    for name, data in events:
                        batch += fold.feed(parse_event(data), name)
                        if fold.ended:
                            reader.end()  # the reader drains the body, so the connection is reused
                            # Nothing after the end event is folded: the answer's last events
                            # go with this read's (one resume less); the next read drains.
                            batch += fold.finish()
                            break
                except Exception:
                    if batch:  # the events before the failing one first, as one by one
                        if not reader.started:
                            reader.first_token()
                        yield batch
                    raise
                if batch:
                    if not reader.started:
                        reader.first_token()
                    yield batch
            if not fold.ended:
                raise _cut(fold)
        finally:
            await response.aclose()


def _cut(fold: StreamFold) -> HarnessError:
    return HarnessError(
        ErrorKind.PROVIDER_UNAVAILABLE, f"stream cut: the server closed the stream before {fold.end_event}"
    )
