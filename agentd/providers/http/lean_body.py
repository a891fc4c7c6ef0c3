"""A lean transport's response (`http_lean`): its head as parsed (`LeanAnswer`) and its body
read from the connection's buffer (`LeanBody`: Content-Length, chunked, or up to the close).

Issue 32: a streamed model answer with status 200 is read without an `httpx.Response` — its
`Headers` normalised every name and value, and each look-up (`content-type`,
`content-encoding`, `set-cookie`) went through them; the head's loop notes those three
instead. The `httpx.Response` is built only when one is needed (`LeanAnswer.response`: an
error status to classify, a cookie to keep, a content coding to decode, `handle_async_request`).
The chunked framing is decoded a whole chunk at a time where its bytes are all in."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import httpx

from agentd.providers.http.conn import Connection

_MAX_CHUNK_LINE = 4096  # a chunk-size line (with extensions)


class Releases(Protocol):
    """The pool a body gives its connection back to (`LeanTransport`)."""

    def _finished(self, conn: Connection, *, reuse: bool) -> None: ...


class LeanBody(httpx.AsyncByteStream):
    """A response body read from the connection's buffer; its close hands the connection
    back (read to the end, keep-alive) or closes it."""

    def __init__(
        self,
        pool: Releases,
        conn: Connection,
        framing: int | None,
        keep: bool,
        read_timeout: float | None,
    ) -> None:
        self._pool, self._conn, self._keep, self._timeout = pool, conn, keep, read_timeout
        # framing: a byte count (Content-Length), -1 chunked, None up to the close
        self._left = framing if framing is not None and framing >= 0 else 0
        self._chunked = framing == -1
        self._to_close = framing is None
        self._chunk_left = 0  # chunked: data bytes left in the current chunk
        self._state = 0  # chunked: 0 size line, 1 data, 2 CRLF after data, 3 trailers, 4 done
        self.done = framing == 0
        self._released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while (data := await self.read()) is not None:
            yield data

    async def read(
        self, until: float | None = None, expired: Callable[[], BaseException] | None = None
    ) -> bytes | None:
        """The next decoded body bytes (never empty); None at the end. The read timeout
        bounds each wait for bytes; `until` (loop time), if given, the whole read: then
        `expired()` is raised."""
        conn = self._conn
        buf = conn.buffer  # (the connection's one bytearray, grown and cut in place)
        while not self.done:
            if buf:
                if self._chunked:
                    data = self._take_chunked(buf)
                elif self._to_close:
                    data = bytes(buf)
                    buf.clear()
                else:
                    n = min(self._left, len(buf))
                    data = bytes(buf[:n])
                    del buf[:n]
                    self._left -= n
                    self.done = self._left == 0
                if data:
                    return data
                if self.done:
                    break
            if conn.eof and not buf:
                if self._to_close:
                    self.done = True
                    break
                raise conn.cut()
            await conn.wait_data(self._timeout, until, expired)
        return None

    def _take_chunked(self, buf: bytearray) -> bytes:
        """The chunks' data in `buf` now (b"" when more must arrive), their framing cut."""
        out: list[bytearray] = []
        pos = 0
        end_all = len(buf)
        state = self._state
        while True:
            if state == 0:  # the size line
                end = buf.find(b"\n", pos)
                if end < 0:
                    if end_all - pos > _MAX_CHUNK_LINE:
                        raise httpx.RemoteProtocolError("a chunk-size line is too long")
                    break
                try:
                    size = int(buf[pos:end], 16)  # (int() ignores the CR and spaces around)
                except ValueError:
                    size = -1
                if size < 0:  # with extensions (`1a;name=value`), or bad
                    size = _chunk_size(bytes(buf[pos:end]).rstrip(b"\r"))
                pos = end + 1
                if not size:
                    state = 3
                    continue
                stop = pos + size
                if stop <= end_all:  # the whole chunk is in
                    out.append(buf[pos:stop])
                    pos, state = stop, 2
                    continue
                out.append(buf[pos:end_all])
                self._chunk_left, pos, state = stop - end_all, end_all, 1
                break
            if state == 1:  # the rest of a chunk's data
                n = min(self._chunk_left, end_all - pos)
                if n == 0:
                    break
                out.append(buf[pos : pos + n])
                pos += n
                self._chunk_left -= n
                if self._chunk_left:
                    break
                state = 2
                continue
            if state == 2 and buf[pos : pos + 2] == b"\r\n":  # the CRLF after a chunk's data
                pos, state = pos + 2, 0
                continue
            end = buf.find(b"\n", pos)
            if end < 0:
                if end_all - pos > _MAX_CHUNK_LINE:
                    raise httpx.RemoteProtocolError("a chunk-size line is too long")
                break
            line = bytes(buf[pos:end]).rstrip(b"\r")
            pos = end + 1
            if state == 2:
                if line:
                    raise httpx.RemoteProtocolError("no CRLF after a chunk's data")
                state = 0
            elif not line:  # state 3: the empty line that ends the trailers
                state, self.done = 4, True
                break
        self._state = state
        del buf[:pos]
        if not out:
            return b""
        return bytes(out[0]) if len(out) == 1 else b"".join(out)

    async def aclose(self) -> None:
        if self._released:
            return
        self._released = True
        self._pool._finished(self._conn, reuse=self.done and self._keep and not self._conn.buffer)


def _chunk_size(line: bytes) -> int:
    """A chunk-size line with extensions (`1a;name=value`)."""
    try:
        size = int(line.split(b";", 1)[0].strip(), 16)
    except ValueError as exc:
        raise httpx.RemoteProtocolError(f"bad chunk size {line[:40]!r}") from exc
    if size < 0:
        raise httpx.RemoteProtocolError(f"bad chunk size {line[:40]!r}")
    return size


class LeanAnswer:
    """A lean transport's response, its body not yet read: the status, the head as
    received, and what the providers look up in it. `response()` is the `httpx.Response`."""

    __slots__ = (
        "_chunks",
        "_response",
        "body",
        "coded",
        "content_type",
        "extensions",
        "headers",
        "lean",
        "sets_cookie",
        "status_code",
    )

    def __init__(
        self,
        status_code: int,
        headers: list[tuple[bytes, bytes]],
        extensions: dict[str, Any],
        body: LeanBody,
        content_type: str,
        coded: bool,
        sets_cookie: bool,
    ) -> None:
        self.status_code, self.headers, self.extensions, self.body = status_code, headers, extensions, body
        self.content_type, self.coded, self.sets_cookie = content_type, coded, sets_cookie
        # Read straight from the connection unless a content coding must be decoded.
        self.lean: LeanBody | None = None if coded else body
        self._response: httpx.Response | None = None
        self._chunks: AsyncIterator[bytes] | None = None

    def response(self) -> httpx.Response:
        """The `httpx.Response` of this answer (made once; it reads and closes the body)."""
        if self._response is None:
            self._response = httpx.Response(
                self.status_code, headers=self.headers, stream=self.body, extensions=self.extensions
            )
        return self._response

    def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (decoded), one iterator per answer."""
        if self._chunks is None:
            self._chunks = self.body.__aiter__() if self.lean is not None else self.response().aiter_bytes()
        return self._chunks

    async def aread(self) -> bytes:
        return await self.response().aread()

    async def aclose(self) -> None:
        if self._response is not None:
            await self._response.aclose()
        else:
            await self.body.aclose()


def lean_body(response: httpx.Response) -> LeanBody | None:
    """The response's body read straight from its connection (`LeanBody.read`), when it is
    one without a content coding; else None (read `body_chunks`)."""
    stream = response.stream
    if type(stream) is LeanBody and "content-encoding" not in response.headers:
        return stream
    return None


def body_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """`response.aiter_bytes()`. A lean body without a content coding is read straight from
    its connection: httpx's iterator adds a decoder chain, a chunker and state checks per
    chunk that do nothing for it."""
    body = lean_body(response)
    return body.__aiter__() if body is not None else response.aiter_bytes()
