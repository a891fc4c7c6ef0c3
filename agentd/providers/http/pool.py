"""The providers' HTTP client: httpx's client on `http_lean.LeanTransport` (issue 14,
items 1 and 2), with limits for many sessions streaming at once, and cookies parsed only
when a response sets one.

httpcore 1.0's pool re-examined every connection on every request and response close, and
httpx's default limits kept only 20 connections alive (a busy server reconnected on most
turns) and allowed 100 at most (the 101st concurrent model stream waited up to the pool
timeout). `LeanTransport` keeps idle connections on a stack per origin (O(1) per request)
and runs up to `LIMITS.max_connections` exchanges at once.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any, cast
from weakref import WeakKeyDictionary

import httpx

from agentd.infra import HttpTransport
from agentd.providers.http.body import BodyPieces
from agentd.providers.http.conn import Key
from agentd.providers.http.lean import LeanTransport
from agentd.providers.http.lean_body import LeanAnswer
from agentd.providers.http.proxy import Proxies, Proxy

# Many sessions stream at once, each holding a connection for its whole answer: enough
# kept alive that a busy server does not reconnect per turn. An idle connection is dropped
# after 4 s, under the 5 s keep-alive timeout of common servers (uvicorn, Node): one reused
# just as the server closes it fails the request (a reset, httpx's ReadError).
LIMITS = httpx.Limits(max_connections=1000, max_keepalive_connections=256, keepalive_expiry=4.0)


# The transport a provider gets when it is not told (`AGENTD_HTTP_TRANSPORT` is passed
# explicitly by the factory; tests switch this to run the same provider tests on both).
DEFAULT_TRANSPORT = HttpTransport.LEAN


def client(
    timeout: httpx.Timeout,
    verify: ssl.SSLContext | Callable[[], ssl.SSLContext],
    transport: HttpTransport | None = None,
) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` on the lean HTTP/1.1 transport (`http_lean`), or on httpx's
    own; either way through the environment's proxies (HTTPS_PROXY, HTTP_PROXY, NO_PROXY).
    `verify` as a factory (`default_ssl_context`): the lean transport makes the context at
    its first https connection, httpx's own at once."""
    if (transport or DEFAULT_TRANSPORT) is HttpTransport.HTTPX:
        tls = verify if isinstance(verify, ssl.SSLContext) else verify()
        # No `transport=`: httpx then mounts its own per proxy from the environment (trust_env).
        http = httpx.AsyncClient(timeout=timeout, verify=tls, limits=LIMITS, trust_env=True)
    else:
        lean = LeanTransport(verify, LIMITS, Proxies.from_environment())
        # (Given a transport, httpx's client neither reads `verify` nor mounts proxies.)
        http = httpx.AsyncClient(timeout=timeout, limits=LIMITS, transport=lean)
    http._cookies = _Cookies()  # (the public setter would copy into a plain `Cookies`)
    return http


class _Cookies(httpx.Cookies):
    """httpx runs every response through `http.cookiejar` (a urllib request built, the
    headers parsed), ~4 % of a trivial turn's loop CPU: only a response that sets a cookie
    is worth that (model APIs behind a CDN do, and get them back as before)."""

    def extract_cookies(self, response: httpx.Response) -> None:
        if "set-cookie" in response.headers:
            super().extract_cookies(response)


# Per client, the headers its requests get (its defaults merged with a provider's own), by the
# provider's headers: `build_request` merged and re-validated them on every model call.
_MERGED: WeakKeyDictionary[httpx.AsyncClient, dict[tuple[tuple[str, str], ...], httpx.Headers]] = (
    WeakKeyDictionary()
)
_MERGED_PER_CLIENT = 16  # a provider's header sets (one per API key): bounded all the same


def post_request(
    client: httpx.AsyncClient,
    url: httpx.URL,
    content: bytes | list[bytes],
    headers: dict[str, str],
    timeout: httpx.Timeout,
) -> httpx.Request:
    """`client.build_request("POST", url, content=..., headers=..., timeout=...)`, with the
    merged headers kept per client. A client with cookies (or params, a base URL) goes the
    general way: the jar adds its Cookie header per request. `content` in pieces (the
    providers' encoded body) reaches this module's transport as they are (`BodyPieces`);
    any other transport gets them joined."""
    if isinstance(content, list) and type(client._transport) is not LeanTransport:
        content = b"".join(content)
    if client.cookies or client.params or str(client.base_url):
        if isinstance(content, list):
            content = b"".join(content)
        return client.build_request("POST", url, content=content, headers=headers, timeout=timeout)
    known = _MERGED.setdefault(client, {})
    key = tuple(headers.items())
    merged = known.get(key)
    if merged is None:
        if len(known) >= _MERGED_PER_CLIENT:
            known.clear()
        merged = known[key] = client._merge_headers(headers)  # type: ignore[assignment]
    extensions = {"timeout": timeout.as_dict()}
    if isinstance(content, list):
        body = BodyPieces(content)
        request = httpx.Request("POST", url, headers=merged, stream=body, extensions=extensions)
        # The headers `content=` would give (Host, Content-Length), in the same places.
        request._prepare({"Content-Length": str(body.length)})
        return request
    return httpx.Request("POST", url, content=content, headers=merged, extensions=extensions)


class _Head:
    """A provider endpoint's request head on a lean client, up to the Content-Length value:
    what `post_request` + `_request_head` rebuilt on every model call (an httpx `Request`,
    its `Headers` normalised twice, the head joined line by line)."""

    __slots__ = ("key", "merged", "prefix", "proxy", "timeout", "timeouts", "url")

    def __init__(
        self, key: Key, proxy: Proxy | None, prefix: bytes, url: httpx.URL, merged: httpx.Headers
    ) -> None:
        self.key, self.proxy, self.prefix, self.url, self.merged = key, proxy, prefix, url, merged
        # The last call's timeout and its `as_dict()` (a provider passes the same one on
        # every call: not converted per call).
        self.timeout: httpx.Timeout | None = None
        self.timeouts: dict[str, float | None] = {}


# Per lean client, by id(url) and the provider's headers (the URL object is kept and
# compared: ids are reused once an object is gone). None: that endpoint goes the general way.
_HEADS: WeakKeyDictionary[httpx.AsyncClient, dict[tuple[int, tuple[tuple[str, str], ...]], _Head | None]] = (
    WeakKeyDictionary()
)
_CONTENT_LENGTH_TAIL = b"\r\nContent-Length: 1\r\n\r\n"
_MISSING: Any = object()


def lean_head(client: httpx.AsyncClient, url: httpx.URL, headers: dict[str, str]) -> _Head | None:
    """The kept head for POSTing to `url` with `headers` (send with `send_head`), on this
    module's plain lean clients (no cookies, auth, hooks, redirects, params or base URL);
    None otherwise: `post_request` + `send_streaming`, the general way. Made once per
    endpoint by httpx's own rules (its merged headers, Host first, Content-Length last), so
    the bytes on the wire stay the same, without an httpx `Request` per model call. A bad
    header raises here, as `post_request` would."""
    transport = client._transport
    if type(transport) is not LeanTransport or not _plain(client):
        return None
    known = _HEADS.setdefault(client, {})
    key = (id(url), tuple(headers.items()))
    head = known.get(key, _MISSING)
    if head is _MISSING or (head is not None and head.url is not url):
        if len(known) >= _MERGED_PER_CLIENT:
            known.clear()
        head = known[key] = _head(client, transport, url, headers)
    return cast("_Head | None", head)


async def send_head(
    client: httpx.AsyncClient,
    head: _Head,
    content: bytes | list[bytes],
    http_timeout: httpx.Timeout,
    until: float | None = None,
    expired: Callable[[], BaseException] | None = None,
) -> LeanAnswer:
    """POST `content` behind `head` (`lean_head`) for a streamed answer, straight to the
    transport (its `response()` is the `httpx.Response`, made when needed), up to `until`
    (loop time; then `expired()` is raised: `LeanTransport.exchange`). A cookie the answer
    sets is kept (later calls then go the general way, which sends it back)."""
    transport = client._transport
    assert type(transport) is LeanTransport
    length = sum(map(len, content)) if isinstance(content, list) else len(content)
    if head.timeout is not http_timeout:
        head.timeout, head.timeouts = http_timeout, http_timeout.as_dict()
    answer = await transport.exchange(
        head.key,
        head.proxy,
        head.prefix + b"%d\r\n\r\n" % length,
        content,
        head.timeouts,
        until=until,
        expired=expired,
    )
    if answer.sets_cookie:
        response = answer.response()
        response.request = httpx.Request("POST", head.url, headers=head.merged)  # (the jar reads its URL)
        client.cookies.extract_cookies(response)
    return answer


def _plain(client: httpx.AsyncClient) -> bool:
    return not (
        client.is_closed
        or client.follow_redirects
        or client.auth is not None
        or client.cookies
        or client.params
        or str(client.base_url)
        or any(client.event_hooks.values())
    )


def _head(
    client: httpx.AsyncClient, transport: LeanTransport, url: httpx.URL, headers: dict[str, str]
) -> _Head | None:
    """The endpoint's head as httpx would build it (`post_request`'s request, a one-byte
    body), cut before the Content-Length value; None when it does not end with that header
    (headers of the provider's own framing: the general way then)."""
    merged: httpx.Headers = client._merge_headers(headers)  # type: ignore[assignment]
    request = httpx.Request("POST", url, headers=merged, content=b"0")
    key, proxy, head = transport.request_head(request)
    if not head.endswith(_CONTENT_LENGTH_TAIL) or head.count(b"\r\nContent-Length:") != 1:
        return None
    return _Head(key, proxy, head[: -len(b"1\r\n\r\n")], url, merged)


async def send_streaming(client: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
    """`client.send(request, stream=True)`. On this module's clients the transport is called
    directly: they have no auth, no event hooks and do not follow redirects, so what
    `send` adds per call (its auth and redirect generators, a bound stream, a timer) does
    nothing for them but cost ~0.1 ms; the cookies a response sets are kept as `send` would."""
    transport = client._transport
    if (
        type(transport) is not LeanTransport
        or client.is_closed
        or client.follow_redirects
        or client.auth is not None
        or any(client.event_hooks.values())
    ):
        return await client.send(request, stream=True)
    response = await transport.handle_async_request(request)
    response.request = request
    client.cookies.extract_cookies(response)  # (`_Cookies`: only when one is set)
    return response
