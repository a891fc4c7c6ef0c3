"""The providers' HTTP client: httpx on a connection pool whose bookkeeping does not grow
with the number of connections (issue 14, items 1 and 2), and cookies parsed only when a
response sets one.

httpcore 1.0's pool re-examines every connection on every request and every response
close (`_assign_requests_to_connections`: `is_closed`, `has_expired` — a `poll()` of each
idle socket —, `is_idle` of every connection once per idle connection, and the available
and idle lists again per queued request). With 200 sessions prompting at once that scan
was a third of the event loop's CPU. httpx's default limits made it worse: 20 kept-alive
connections (httpcore closes an idle one whenever the pool holds more than that, so a busy
server reconnected on most turns) and 100 connections at most (the 101st concurrent model
stream waited for a free one, up to the 600 s pool timeout).

`ScalingPool` keeps the same rules with O(1) work per connection handed out or back: the
connections idle since their last response wait on a stack per origin (the most recently
used is reused first, its expiry and socket checked then, as httpcore checks them); the
requests done since the previous call are found by one set difference over the requests
in flight. A full sweep of every connection (closed ones, expired idle ones) runs at most
once a second. Used only when httpx made the plain httpcore pool (no proxy) that this was
written against (httpcore 1.x); anything else keeps httpcore's own pool.
"""

from __future__ import annotations

import ssl
import time
from typing import TYPE_CHECKING, Any, cast

import httpcore
import httpx

if TYPE_CHECKING:
    from httpcore._async.connection_pool import AsyncPoolRequest
    from httpcore._async.interfaces import AsyncConnectionInterface

# Many sessions stream at once, each holding a connection for its whole answer: enough
# kept alive that a busy server does not reconnect per turn. An idle connection is dropped
# after 4 s, under the 5 s keep-alive timeout of common servers (uvicorn, Node): one reused
# just as the server closes it fails the request (a reset, httpx's ReadError).
LIMITS = httpx.Limits(max_connections=1000, max_keepalive_connections=256, keepalive_expiry=4.0)
SWEEP_EVERY_S = 1.0

_Key = tuple[bytes, bytes, int]


def client(timeout: httpx.Timeout, verify: ssl.SSLContext) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` as the providers made before, on a `ScalingPool`."""
    transport = httpx.AsyncHTTPTransport(verify=verify, limits=LIMITS)
    pool = getattr(transport, "_pool", None)
    if type(pool) is httpcore.AsyncConnectionPool and httpcore.__version__.startswith("1."):
        pool.__class__ = ScalingPool  # same state, the cheaper bookkeeping (no proxy here)
        cast(ScalingPool, pool)._adopt()
    http = httpx.AsyncClient(timeout=timeout, verify=verify, limits=LIMITS, transport=transport)
    http._cookies = _Cookies()  # (the public setter would copy into a plain `Cookies`)
    return http


class _Cookies(httpx.Cookies):
    """httpx runs every response through `http.cookiejar` (a urllib request built, the
    headers parsed), ~4 % of a trivial turn's loop CPU: only a response that sets a cookie
    is worth that (model APIs behind a CDN do, and get them back as before)."""

    def extract_cookies(self, response: httpx.Response) -> None:
        if "set-cookie" in response.headers:
            super().extract_cookies(response)


class ScalingPool(httpcore.AsyncConnectionPool):
    """httpcore's pool with `_assign_requests_to_connections` in O(1) per connection handed
    out or back, plus one C-level set difference over the requests in flight when one is
    done (HTTP/1.1: a connection serves one request at a time).

    httpcore calls it right after each change of `_requests` (a request added, one
    removed, or one whose connection turned out unavailable), so comparing counts tells
    which change it was without looking at every request."""

    _idle: dict[_Key, list[AsyncConnectionInterface]]  # per origin, most recently idle last
    _idle_count: int
    _busy: dict[AsyncPoolRequest, AsyncConnectionInterface]  # requests handed a connection
    _waiting: int  # requests left without one (at the connection limit)
    _next_sweep: float

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._adopt()

    def _adopt(self) -> None:
        self._idle = {}
        self._idle_count = 0
        self._busy = {}
        self._waiting = 0
        self._next_sweep = 0.0

    def _assign_requests_to_connections(self) -> list[AsyncConnectionInterface]:
        closing: list[AsyncConnectionInterface] = []
        requests, busy = self._requests, self._busy
        expected = len(busy) + self._waiting
        if len(requests) < expected:  # done (response closed, or failed): connection back
            live = set(requests)
            for done in [r for r in busy if r not in live]:
                self._release(busy.pop(done), closing)
        elif len(requests) == expected:  # a handed connection was unavailable after all
            for again in [r for r, c in busy.items() if r.connection is not c]:
                self._release(busy.pop(again), closing)
        now = time.monotonic()
        if now >= self._next_sweep:
            self._next_sweep = now + SWEEP_EVERY_S
            self._sweep(closing)
        self._waiting = 0
        if len(requests) > len(busy):
            if len(requests) == len(busy) + 1 and requests[-1].connection is None:
                waiting = [requests[-1]]  # the usual case: one new request
            else:
                waiting = [r for r in requests if r.connection is None]
            for i, pool_request in enumerate(waiting):
                connection = self._acquire(pool_request.request.url.origin, closing)
                if connection is None:  # at the connection limit: they wait for one back
                    self._waiting = len(waiting) - i
                    break
                busy[pool_request] = connection
                pool_request.assign_to_connection(connection)
        return closing

    def _acquire(
        self, origin: httpcore.Origin, closing: list[AsyncConnectionInterface]
    ) -> AsyncConnectionInterface | None:
        stack = self._idle.get((origin.scheme, origin.host, origin.port))
        while stack:
            connection = stack.pop()
            self._idle_count -= 1
            if connection.is_closed():
                self._forget(connection)
            elif connection.has_expired():  # past keep-alive, or the server hung up
                self._forget(connection)
                closing.append(connection)
            elif connection.is_available():
                return connection
        if len(self._connections) >= self._max_connections:
            victim = self._oldest_idle()  # another origin's: make room, as httpcore does
            if victim is None:
                return None
            self._forget(victim)
            closing.append(victim)
        connection = self.create_connection(origin)
        self._connections.append(connection)
        return connection

    def _release(self, connection: AsyncConnectionInterface, closing: list[AsyncConnectionInterface]) -> None:
        if connection.is_closed():
            self._forget(connection)
        elif connection.is_idle():
            self._idle.setdefault(_key(connection), []).append(connection)
            self._idle_count += 1
            if self._idle_count > self._max_keepalive_connections:
                victim = self._oldest_idle()
                if victim is not None:
                    self._forget(victim)
                    closing.append(victim)
        # else: neither closed nor idle (a failed request mid-way): the sweep decides

    def _oldest_idle(self) -> AsyncConnectionInterface | None:
        for stack in self._idle.values():
            if stack:
                self._idle_count -= 1
                return stack.pop(0)
        return None

    def _forget(self, connection: AsyncConnectionInterface) -> None:
        if connection in self._connections:
            self._connections.remove(connection)

    def _sweep(self, closing: list[AsyncConnectionInterface]) -> None:
        """httpcore's clean-up over every connection, at most once a second: closed ones go,
        expired idle ones are closed, the idle stacks are rebuilt from what is left."""
        busy = {id(c) for c in self._busy.values()}
        idle: dict[_Key, list[AsyncConnectionInterface]] = {}
        count = 0
        for connection in list(self._connections):
            if connection.is_closed():
                self._connections.remove(connection)
            elif id(connection) in busy:
                continue
            elif connection.has_expired():
                self._connections.remove(connection)
                closing.append(connection)
            elif connection.is_idle():
                idle.setdefault(_key(connection), []).append(connection)
                count += 1
        self._idle, self._idle_count = idle, count
        while self._idle_count > self._max_keepalive_connections:
            victim = self._oldest_idle()
            if victim is None:
                break
            self._forget(victim)
            closing.append(victim)


def _key(connection: AsyncConnectionInterface) -> _Key:
    origin: httpcore.Origin = connection._origin  # type: ignore[attr-defined]
    return (origin.scheme, origin.host, origin.port)
