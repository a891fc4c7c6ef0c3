"""A streamed model answer as the providers read it (`Answer`): its status, its
Content-Type, its body — straight from a lean connection (`lean`) or as it arrives
(`chunks`) — and its `httpx.Response` for the error mapping. On the lean transport's kept
head (`http_pool.send_head`) it is the transport's own `LeanAnswer`, no `httpx.Response`
made for a 200 (issue 32); any other client's response is wrapped (`HttpxAnswer`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

import httpx

from agentd.providers.http.lean_body import LeanBody, body_chunks, lean_body


class Answer(Protocol):
    status_code: int
    content_type: str  # the Content-Type header's value, "" when none
    lean: LeanBody | None  # the body read straight from the connection (no content coding)

    def response(self) -> httpx.Response:
        """The `httpx.Response` (for an error status: its headers, its body)."""
        ...

    def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive, decoded (the same iterator every time)."""
        ...

    async def aread(self) -> bytes: ...

    async def aclose(self) -> None: ...


class HttpxAnswer:
    """An `httpx.Response` as an `Answer` (httpx's transport; the lean one's general way)."""

    __slots__ = ("_chunks", "_response", "content_type", "lean", "status_code")

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status_code = response.status_code
        self.content_type: str = response.headers.get("content-type", "")
        self.lean = lean_body(response)
        self._chunks: AsyncIterator[bytes] | None = None

    def response(self) -> httpx.Response:
        return self._response

    def chunks(self) -> AsyncIterator[bytes]:
        if self._chunks is None:
            self._chunks = body_chunks(self._response)
        return self._chunks

    async def aread(self) -> bytes:
        return await self._response.aread()

    async def aclose(self) -> None:
        await self._response.aclose()
