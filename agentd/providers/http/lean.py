"""The providers' HTTP/1.1 transport: httpx's client API on asyncio's own protocol layer
(issue 14, items 1 and 2).

A trivial turn's model call went through httpx → httpcore → h11 → anyio: a third of the
event loop's CPU per turn went to that stack (per request: h11's header validation and
event objects, anyio cancel scopes and locks, httpcore's pool and per-read timeouts; per
body chunk: a cancel scope, an h11 event, a `sniffio` look-up). `LeanTransport` speaks the
same HTTP/1.1 to the model API with one `asyncio.Protocol` per connection (`http_conn`):
the response head is parsed from the bytes received, the body (Content-Length, chunked, or
up to the close) is decoded from the connection's buffer (lean_body.py), and every read waits
on one future, its deadline watched by the connection's one timer (read_deadline). httpx stays
the client (redirect rules, auth, cookies, content decoding, `httpx` exceptions), so the
providers and their error mapping do not change. The providers' own calls (`exchange`, from
`http_pool.send_head`) get the answer as parsed, `LeanAnswer`, its `httpx.Response` made only
when one is needed (issue 32), and bound the exchange by their first-token deadline.

Connections are kept alive per origin (scheme, host, port), the most recently used reused
first; one that is closed, expired (idle longer than `keepalive_expiry`), or that received
anything while idle is dropped instead. A connection goes back to the pool only when its
response was read to the end and neither side asked to close it; a half-read, failed or
cancelled exchange closes it. At most `max_connections` exchanges run at once; more wait
(up to the pool timeout) for one to finish. The environment's proxies are honoured
(`http_proxy`): a CONNECT tunnel for https, the absolute URL as target for http.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx

from agentd.providers.http.body import BodyPieces, batches
from agentd.providers.http.conn import Connection, Key
from agentd.providers.http.lean_body import LeanAnswer, LeanBody
from agentd.providers.http.proxy import Proxies, Proxy, ProxyConfigError

_MAX_HEAD = 256 * 1024  # response status line + headers

T = TypeVar("T")


def _timeouts(request: httpx.Request) -> dict[str, float | None]:
    found = request.extensions.get("timeout")
    return found if isinstance(found, dict) else {}


class LeanTransport(httpx.AsyncBaseTransport):
    def __init__(
        self,
        verify: ssl.SSLContext | Callable[[], ssl.SSLContext],
        limits: httpx.Limits,
        proxies: Proxies | None = None,
    ) -> None:
        # A factory is called at the first https connection: a server whose model speaks
        # plain http (a local one) never loads the CA bundle (+1.8 MiB resident: issue 32
        # item 3, bench/RESULTS.md "hmods").
        self._ssl: ssl.SSLContext | None = verify if isinstance(verify, ssl.SSLContext) else None
        self._make_ssl = None if isinstance(verify, ssl.SSLContext) else verify
        self._proxies = proxies if proxies else None
        self._max_keepalive = limits.max_keepalive_connections or 0
        self._expiry = limits.keepalive_expiry if limits.keepalive_expiry is not None else 5.0
        self._slots = asyncio.Semaphore(limits.max_connections or 1_000_000)
        self._idle: dict[Key, list[Connection]] = {}
        self.idle_count = 0
        self.active = 0  # exchanges holding a connection (for tests and metrics)
        self.connects = 0
        # Closes the kept-alive connections idle past the expiry (`close_expired`), which
        # `_reuse` alone would drop only when its origin is called again: after a load, up to
        # `max_keepalive` of them (their protocol objects, buffers, timers) stayed for the
        # server's life and pinned the memory the load had used (issue 32 item 3).
        self._sweep: asyncio.TimerHandle | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        key, proxy, head = self.request_head(request)
        stream = request.stream
        body: bytes | list[bytes]
        if isinstance(stream, BodyPieces):
            body = stream.pieces
        else:
            body = request.content if _has_bytes(request) else await _read_body(request)
        answer = await self.exchange(
            key, proxy, head, body, _timeouts(request), head_only=request.method == "HEAD"
        )
        return answer.response()

    def request_head(self, request: httpx.Request) -> tuple[Key, Proxy | None, bytes]:
        """The origin, its proxy and the head `handle_async_request` would write for
        `request` (the providers keep it per endpoint: `http_pool.post_streaming`)."""
        url = request.url
        key = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        proxy = self._proxy(key)
        # Plain http through a proxy: the proxy reads the origin from the request line.
        return key, proxy, _request_head(request, proxy if key[0] == "http" else None)

    async def exchange(
        self,
        key: Key,
        proxy: Proxy | None,
        head: bytes,
        body: bytes | list[bytes],
        timeouts: dict[str, float | None],
        *,
        head_only: bool = False,
        until: float | None = None,
        expired: Callable[[], BaseException] | None = None,
    ) -> LeanAnswer:
        """Write `head` and `body` (in pieces: written as they are when large) on a
        connection to `key` and read the response head: the answer, its body still to read
        (its `response()` has no `request`: `handle_async_request`'s caller sets it).

        `until` (loop time), if given with `expired`, bounds the whole exchange up to the
        head (a provider's first-token deadline): then `expired()` is raised. On the usual
        path — a free slot, a kept connection, a write with room — only the head is waited
        for, under the connection's own timer (read_deadline): no timeout scope per call."""
        if until is None:
            expired = None
        elif expired is None:
            until = None
        if self._slots.locked():
            await _bounded(_acquire(self._slots, timeouts.get("pool")), until, expired)
        else:
            await self._slots.acquire()  # a free slot: returns at once
        conn: Connection | None = None
        try:
            # A small body in pieces goes out in one write with the head, as bytes would.
            if isinstance(body, list):
                if sum(map(len, body)) >= 65536:
                    pieces: list[bytes] | None = body
                else:
                    pieces, body = None, b"".join(body)
            else:
                pieces = None
            conn = self._reuse(key)
            if conn is None:
                conn = await _bounded(self._connect(key, timeouts.get("connect"), proxy), until, expired)
            self.active += 1
            write_s = timeouts.get("write")
            if pieces is not None:
                for out in batches(head, pieces):
                    await conn.write(out, write_s, until, expired)
            else:
                assert isinstance(body, bytes)
                await conn.write(head + body if len(body) < 65536 else head, write_s, until, expired)
                if len(body) >= 65536:
                    await conn.write(body, write_s, until, expired)
            # The head's wait here, its parse a plain call once it is in (no coroutine layer).
            read_s, buf = timeouts.get("read"), conn.buffer
            while b"\r\n\r\n" not in buf or (answer := _take_head(conn, head_only, read_s, self)) is None:
                if b"\r\n\r\n" not in buf and len(buf) > _MAX_HEAD:
                    raise httpx.RemoteProtocolError("the response head is too large")
                await conn.wait_data(read_s, until, expired)
        except BaseException:
            if conn is not None:
                self._finished(conn, reuse=False)
            else:
                self._slots.release()
            raise
        return answer

    def _reuse(self, key: Key) -> Connection | None:
        stack = self._idle.get(key)
        now = time.monotonic()
        while stack:
            conn = stack.pop()
            self.idle_count -= 1
            if conn.reusable(now, self._expiry):
                return conn
            conn.close()
        return None

    def _proxy(self, key: Key) -> Proxy | None:
        if self._proxies is None:
            return None
        try:
            return self._proxies.for_origin(key[0], key[1])
        except ProxyConfigError as exc:
            raise httpx.ProxyError(str(exc)) from exc

    async def _connect(self, key: Key, limit_s: float | None, proxy: Proxy | None = None) -> Connection:
        scheme, host, port = key
        if scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}")
        tls = self._tls() if scheme == "https" else None
        loop = asyncio.get_running_loop()
        conn: Connection | None = None
        try:
            async with asyncio.timeout(limit_s):
                if proxy is None:
                    _, conn = await loop.create_connection(
                        lambda: Connection(key), host, port, ssl=tls, server_hostname=host if tls else None
                    )
                else:
                    _, conn = await loop.create_connection(lambda: Connection(key), proxy.host, proxy.port)
                    if tls is not None:
                        await _tunnel(conn, host, port, proxy)
                        assert conn.transport is not None
                        # TLS with the origin inside the tunnel: the proxy sees only bytes.
                        conn.transport = await loop.start_tls(conn.transport, conn, tls, server_hostname=host)
        except TimeoutError as exc:
            if conn is not None:
                conn.close()
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from exc
        except (OSError, ssl.SSLError) as exc:
            if conn is not None:
                conn.close()
            via = f" through the proxy {proxy.url}" if proxy is not None else ""
            raise httpx.ConnectError(f"{type(exc).__name__}: {exc}{via}") from exc
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        self.connects += 1
        return conn

    def _tls(self) -> ssl.SSLContext:
        tls = self._ssl
        if tls is None:
            assert self._make_ssl is not None
            tls = self._ssl = self._make_ssl()
        return tls

    def _finished(self, conn: Connection, *, reuse: bool) -> None:
        """The exchange on `conn` is over: keep the connection alive, or close it."""
        self.active -= 1
        self._slots.release()
        if not reuse or conn.closed or conn.eof:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        self._idle.setdefault(conn.key, []).append(conn)
        self.idle_count += 1
        while self.idle_count > self._max_keepalive:
            self._drop_oldest_idle()
        if self._sweep is None:  # one timer for the pool, not one per connection
            self._sweep = conn._loop.call_later(self._expiry, self._swept)

    def _swept(self) -> None:
        self._sweep = None
        next_at = self.close_expired(time.monotonic())
        if next_at is not None:
            self._sweep = asyncio.get_running_loop().call_later(
                max(0.0, next_at - time.monotonic()), self._swept
            )

    def close_expired(self, now: float) -> float | None:
        """Close the kept-alive connections idle for `keepalive_expiry` or more at `now`
        (monotonic), or closed by the server meanwhile; the time the next one expires, or
        None when none is left. Each stack's oldest are at its bottom (`_reuse` takes the top)."""
        next_at: float | None = None
        for key, stack in list(self._idle.items()):
            gone = 0
            while gone < len(stack) and (stack[gone].closed or now - stack[gone].idle_since >= self._expiry):
                gone += 1
            for conn in stack[:gone]:
                conn.close()
            if gone:
                del stack[:gone]
                self.idle_count -= gone
            if not stack:
                del self._idle[key]  # a per-origin entry would outlive its connections
            elif next_at is None or stack[0].idle_since + self._expiry < next_at:
                next_at = stack[0].idle_since + self._expiry
        return next_at

    def _drop_oldest_idle(self) -> None:
        oldest: list[Connection] | None = None
        for stack in self._idle.values():
            if stack and (oldest is None or stack[0].idle_since < oldest[0].idle_since):
                oldest = stack
        if oldest is None:
            self.idle_count = 0
            return
        oldest.pop(0).close()
        self.idle_count -= 1

    def idle_connections(self) -> int:
        """Kept-alive connections that are still open (for tests)."""
        return sum(1 for stack in self._idle.values() for c in stack if not c.closed)

    async def aclose(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for stack in self._idle.values():
            for conn in stack:
                conn.close()
        self._idle.clear()
        self.idle_count = 0


async def _bounded(step: Awaitable[T], until: float | None, expired: Callable[[], BaseException] | None) -> T:
    """Await a step of the exchange that may wait (a pool slot, a connection) before
    `until`, else raise `expired()` (its own timeouts raise as they did)."""
    if until is None or expired is None:
        return await step
    scope = asyncio.timeout_at(until)
    try:
        async with scope:
            return await step
    except TimeoutError as exc:
        if scope.expired():
            raise expired() from exc
        raise


async def _acquire(slots: asyncio.Semaphore, limit_s: float | None) -> None:
    try:
        async with asyncio.timeout(limit_s):
            await slots.acquire()
    except TimeoutError as exc:
        raise httpx.PoolTimeout("no connection became free in time") from exc


def _has_bytes(request: httpx.Request) -> bool:
    return hasattr(request, "_content")


async def _read_body(request: httpx.Request) -> bytes:
    """A streamed request body, whole (the providers send bytes; this is the general case)."""
    stream = request.stream
    if not isinstance(stream, httpx.AsyncByteStream):
        raise httpx.LocalProtocolError("a synchronous request body on an async transport")
    parts = [part async for part in stream]
    data = b"".join(parts)
    if request.headers.get("transfer-encoding", "").lower() == "chunked":
        return (b"%x\r\n%s\r\n" % (len(data), data) if data else b"") + b"0\r\n\r\n"
    return data


async def _tunnel(conn: Connection, host: str, port: int, proxy: Proxy) -> None:
    """Ask the proxy for a tunnel to host:port (CONNECT); raises httpx.ProxyError unless
    it answers 2xx. The caller bounds the wait."""
    target = b"%s:%d" % (_authority_host(host), port)
    lines = [b"CONNECT " + target + b" HTTP/1.1", b"Host: " + target]
    if proxy.authorization is not None:
        lines.append(b"Proxy-Authorization: " + proxy.authorization)
    await conn.write(b"\r\n".join(lines) + b"\r\n\r\n", None)
    end = conn.buffer.find(b"\r\n\r\n")
    while end < 0:
        if len(conn.buffer) > _MAX_HEAD:
            raise httpx.ProxyError(f"the proxy {proxy.url} sent an oversized answer to CONNECT")
        try:
            await conn.wait_data(None)
        except httpx.TransportError as exc:
            raise httpx.ProxyError(f"the proxy {proxy.url} closed the connection on CONNECT") from exc
        end = conn.buffer.find(b"\r\n\r\n")
    status_line = bytes(conn.buffer[: conn.buffer.find(b"\r\n")])
    del conn.buffer[: end + 4]
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or not parts[1].isdigit() or not 200 <= int(parts[1]) < 300:
        raise httpx.ProxyError(
            f"the proxy {proxy.url} refused CONNECT {target.decode()}: "
            + status_line[:80].decode(errors="replace")
        )
    if conn.buffer:  # the origin speaks only after our TLS hello
        raise httpx.ProxyError(f"the proxy {proxy.url} sent bytes after its CONNECT answer")


def _authority_host(host: str) -> bytes:
    return (f"[{host}]" if ":" in host else host).encode("ascii")


def _request_head(request: httpx.Request, proxy: Proxy | None = None) -> bytes:
    url = request.url
    target = url.raw_path
    if proxy is not None:  # absolute-form (RFC 9112 3.2.2), as a proxy expects
        port = b":%d" % url.port if url.port is not None else b""
        target = url.scheme.encode("ascii") + b"://" + _authority_host(url.host) + port + target
    lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), target)]
    if proxy is not None and proxy.authorization is not None:
        lines.append(b"Proxy-Authorization: " + proxy.authorization)
    for name, value in request.headers.raw:
        if b"\n" in value or b"\r" in value or b"\n" in name or b"\r" in name or b":" in name:
            raise httpx.LocalProtocolError(f"illegal header {name!r}")
        lines.append(name + b": " + value)
    lines.append(b"\r\n")
    return b"\r\n".join(lines)


def _take_head(
    conn: Connection, head_only: bool, read_timeout: float | None, pool: LeanTransport
) -> LeanAnswer | None:
    """The answer of the first head in the connection's buffer (cut from it, whole);
    None after a 1xx interim answer (skipped: the caller waits for the next head)."""
    end = conn.buffer.find(b"\r\n\r\n")
    head = bytes(conn.buffer[:end])
    del conn.buffer[: end + 4]
    status, reason, version, headers = _parse_head(head)
    if 100 <= status < 200 and status != 101:
        return None
    keep = version == b"HTTP/1.1"
    framing: int | None = None
    chunked = coded = sets_cookie = False
    content_type = b""
    kinds = _NAME_KINDS
    for name, value in headers:
        # The header's kind by its name as sent (no `lower()` per header: issue 32).
        kind = kinds[name] if name in kinds else _name_kind(name)
        if not kind:
            continue
        if kind == _CONTENT_TYPE:
            content_type = value
        elif kind == _CONTENT_LENGTH and not chunked:
            try:
                framing = int(value)
            except ValueError as exc:
                raise httpx.RemoteProtocolError(f"bad Content-Length {value[:40]!r}") from exc
            if framing < 0:
                raise httpx.RemoteProtocolError(f"bad Content-Length {value[:40]!r}")
        elif kind == _TRANSFER_ENCODING and b"chunked" in value.lower():
            framing, chunked = -1, True
        elif kind == _CONNECTION:
            tokens = value.lower()
            keep = b"close" not in tokens and (keep or b"keep-alive" in tokens)
        elif kind == _CONTENT_ENCODING:
            coded = True
        elif kind == _SET_COOKIE:
            sets_cookie = True
    if head_only or status in (204, 304):
        framing = 0
    body = LeanBody(pool, conn, framing, keep and framing is not None, read_timeout)
    extensions: dict[str, Any] = {"http_version": version, "reason_phrase": reason}
    try:  # (httpx decodes a header value as ASCII, else UTF-8, else Latin-1: so does this one.)
        text = content_type.decode("ascii")
    except UnicodeDecodeError:
        text = _header_text(content_type)
    return LeanAnswer(status, headers, extensions, body, text, coded, sets_cookie)


# The headers `_take_head` looks at, by kind; 0: any other.
_CONTENT_TYPE, _CONTENT_LENGTH, _TRANSFER_ENCODING, _CONNECTION, _CONTENT_ENCODING, _SET_COOKIE = range(1, 7)
_KINDS = {
    b"content-type": _CONTENT_TYPE,
    b"content-length": _CONTENT_LENGTH,
    b"transfer-encoding": _TRANSFER_ENCODING,
    b"connection": _CONNECTION,
    b"content-encoding": _CONTENT_ENCODING,
    b"set-cookie": _SET_COOKIE,
}
# Each header name as received → its kind, learnt at its first sight (a server sends the
# same few names on every answer). Bounded: cleared when full.
_NAME_KINDS: dict[bytes, int] = {}
_MAX_NAMES = 512


def _name_kind(name: bytes) -> int:
    if len(_NAME_KINDS) >= _MAX_NAMES:
        _NAME_KINDS.clear()
    kind = _NAME_KINDS[name] = _KINDS.get(name.lower(), 0)
    return kind


def _header_text(value: bytes) -> str:
    try:
        return value.decode("ascii")
    except UnicodeDecodeError:
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value.decode("iso-8859-1")


# One header line after its CRLF: a name without whitespace at its ends or a colon, the
# value with the blanks around it cut (what `bytes.strip` cuts from a line without CR or LF).
_HEADER = re.compile(rb"\r\n([^\s:](?:[^:\r\n]*[^\s:])?):[^\S\r\n]*([^\r\n]*?)[^\S\r\n]*(?=\r\n|\Z)")


def _parse_head(head: bytes) -> tuple[int, bytes, bytes, list[tuple[bytes, bytes]]]:
    eol = head.find(b"\r\n")
    status_line = head[:eol] if eol >= 0 else head
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise httpx.RemoteProtocolError(f"not an HTTP/1.x response: {status_line[:80]!r}")
    # All the header lines in one regex pass (issue 32: a split, a partition and two strips
    # per line before); when a line does not match (a CR or LF inside it, no colon, blanks
    # around the name), the line-by-line parse below decides, as it always did.
    headers: list[tuple[bytes, bytes]] = _HEADER.findall(head, eol) if eol >= 0 else []
    if len(headers) != head.count(b"\r\n"):
        headers = _header_lines(head.split(b"\r\n")[1:])
    return int(parts[1]), parts[2] if len(parts) > 2 else b"", parts[0], headers


def _header_lines(lines: list[bytes]) -> list[tuple[bytes, bytes]]:
    headers: list[tuple[bytes, bytes]] = []
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise httpx.RemoteProtocolError(f"malformed header line {line[:80]!r}")
        headers.append((name, value.strip()))
    return headers
