"""The providers' connection pool (agentd/providers/http/pool.py, http_lean.py) against a real
local HTTP/1.1 server: it reuses connections, respects its limits and survives closed, dropped
and cancelled ones."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from agentd.providers.http import pool as http_pool
from agentd.providers.http.common import default_ssl_context
from agentd.providers.http.lean import LeanTransport
from tests.support.polling import until


class Server:
    """Answers every POST with a tiny body; counts TCP connections accepted. `hold` (when
    set) keeps answers back until released; `close_after`: one request per connection
    (Connection: close); `hang_up`: the server drops each connection after its answer,
    without saying so (the client finds it closed when it reuses it)."""

    def __init__(self, *, close_after: bool = False, hang_up: bool = False, cookie: bytes = b"") -> None:
        self.cookie = cookie  # sent as Set-Cookie with every answer
        self.heads: list[bytes] = []
        self.accepted = 0
        self.closed = 0
        self.close_after, self.hang_up = close_after, hang_up
        self.hold: asyncio.Event | None = None
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.heads.append(head.lower())
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                if self.hold is not None:
                    await self.hold.wait()
                body = b"data: hi\n\n"
                extra = b"connection: close\r\n" if self.close_after else b""
                extra += b"set-cookie: %s; Path=/\r\n" % self.cookie if self.cookie else b""
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%s\r\n%s" % (len(body), extra, body))
                await writer.drain()
                if self.close_after or self.hang_up:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            self.closed += 1


@contextlib.asynccontextmanager
async def serving(server: Server) -> AsyncIterator[Server]:
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.url = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}/v1/chat"
    try:
        yield server
    finally:
        srv.close()


async def post(client: httpx.AsyncClient, url: str) -> bytes:
    async with client.stream("POST", url, content=b"{}") as resp:
        return await resp.aread()


def make_client() -> httpx.AsyncClient:
    return http_pool.client(httpx.Timeout(30.0), default_ssl_context())


def pool_of(client: httpx.AsyncClient) -> LeanTransport:
    pool = client._transport
    assert isinstance(pool, LeanTransport)
    return pool


async def test_kept_alive_connections_are_reused_most_recent_first() -> None:
    async with serving(Server()) as server:
        client = make_client()
        try:
            server.hold = asyncio.Event()
            wide = [asyncio.create_task(post(client, server.url)) for _ in range(120)]
            await until(lambda: server.accepted == 120)  # all in flight at once: 120 connections
            server.hold.set()
            assert set(await asyncio.gather(*wide)) == {b"data: hi\n\n"}
            pool = pool_of(client)
            assert (pool.idle_connections(), pool.active) == (120, 0)  # all kept alive
            for _ in range(50):  # one at a time, with 120 idle connections in the pool
                assert await post(client, server.url) == b"data: hi\n\n"
            assert server.accepted == 120  # every request reused a kept-alive connection
            assert pool.connects == 120
        finally:
            await client.aclose()


async def test_the_connection_limit_queues_requests_until_one_comes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http_pool, "LIMITS", httpx.Limits(max_connections=2, max_keepalive_connections=2))
    async with serving(Server()) as server:
        client = make_client()
        try:
            results = await asyncio.gather(*(post(client, server.url) for _ in range(12)))
            assert results == [b"data: hi\n\n"] * 12
            assert server.accepted == 2
            assert pool_of(client).active == 0
        finally:
            await client.aclose()


async def test_closed_connections_leave_the_pool() -> None:
    async with serving(Server(close_after=True)) as server:
        client = make_client()
        try:
            for _ in range(3):
                await asyncio.gather(*(post(client, server.url) for _ in range(5)))
            assert server.accepted == 15  # the server allowed one request per connection
            assert pool_of(client).idle_connections() == 0
        finally:
            await client.aclose()


async def test_a_connection_the_server_dropped_is_not_reused() -> None:
    async with serving(Server(hang_up=True)) as server:
        client = make_client()
        try:
            for i in range(4):
                assert await post(client, server.url) == b"data: hi\n\n"
                await until(lambda i=i: server.closed == i + 1)  # the hang-up was sent
            assert server.accepted == 4
            assert pool_of(client).idle_connections() <= 1
        finally:
            await client.aclose()


async def test_cancelled_requests_give_their_connections_back() -> None:
    async with serving(Server()) as server:
        client = make_client()
        try:
            server.hold = asyncio.Event()
            tasks = [asyncio.create_task(post(client, server.url)) for _ in range(10)]
            await until(lambda: server.accepted == 10)
            for t in tasks[:5]:
                t.cancel()
            server.hold.set()
            done = await asyncio.gather(*tasks, return_exceptions=True)
            assert done[5:] == [b"data: hi\n\n"] * 5
            assert all(isinstance(r, asyncio.CancelledError) for r in done[:5])
            assert pool_of(client).active == 0
            # A cancelled answer's connection is closed (half read); the others serve again.
            again = await asyncio.gather(*(post(client, server.url) for _ in range(5)))
            assert again == [b"data: hi\n\n"] * 5
            assert server.accepted == 10
        finally:
            await client.aclose()


async def test_cookies_are_kept_when_set_and_not_parsed_when_not(monkeypatch: pytest.MonkeyPatch) -> None:
    import http.cookiejar

    parsed: list[Any] = []
    real = http.cookiejar.CookieJar.extract_cookies
    monkeypatch.setattr(
        http.cookiejar.CookieJar, "extract_cookies", lambda self, *a: (parsed.append(a), real(self, *a))
    )
    async with serving(Server()) as plain, serving(Server(cookie=b"cf_bm=abc")) as cdn:
        client = make_client()
        try:
            for _ in range(3):
                await post(client, plain.url)
            assert parsed == []  # no Set-Cookie: nothing for the cookie jar to do
            await post(client, cdn.url)
            await post(client, cdn.url)
            assert len(parsed) == 2
            assert b"cookie: cf_bm=abc" in cdn.heads[1]  # the cookie went back, as before
        finally:
            await client.aclose()
