"""The lean HTTP/1.1 transport (agentd/providers/http/lean.py) against a real local server
that answers with scripted bytes: every body framing (chunked split anywhere, with
extensions and trailers; Content-Length; up to the close), interim 1xx answers, the
request as sent, and each failure as the httpx exception the providers translate."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator

import httpx
import pytest

from agentd.core.errors import ErrorKind, HarnessError
from agentd.providers.http import pool as http_pool
from agentd.providers.http.common import default_ssl_context, open_stream
from agentd.providers.http.lean import LeanTransport
from agentd.providers.http.sse import SSEReader

SSE = b"data: one\n\ndata: two\n\n"


class Scripted:
    """Answers each request on a connection with the next script: a list of byte strings
    written one at a time (each followed by a loop turn, so they arrive in pieces), or
    None to hang up at that point. `stall` waits forever (until the test ends)."""

    def __init__(self, *scripts: list[bytes | None]) -> None:
        self.scripts = list(scripts)
        self.requests: list[bytes] = []
        self.accepted = 0
        self.stall = asyncio.Event()
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            while self.scripts:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                self.requests.append(head + await reader.readexactly(length))
                for piece in self.scripts.pop(0):
                    if piece is None:
                        return
                    if piece == b"STALL":
                        await self.stall.wait()
                        continue
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


@contextlib.asynccontextmanager
async def serving(server: Scripted) -> AsyncIterator[Scripted]:
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.url = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}/v1/chat?x=1"
    try:
        yield server
    finally:
        server.stall.set()
        srv.close()


def make_client(read_timeout: float = 30.0) -> httpx.AsyncClient:
    return http_pool.client(httpx.Timeout(30.0, read=read_timeout), default_ssl_context())


async def post(client: httpx.AsyncClient, url: str, body: bytes = b'{"a": 1}') -> tuple[int, bytes]:
    async with client.stream("POST", url, content=body, headers={"X-Test": "yes"}) as resp:
        return resp.status_code, b"".join([part async for part in resp.aiter_raw()])


def split(data: bytes) -> list[bytes | None]:
    """`data` one byte per write: every boundary a parser could trip over."""
    return [data[i : i + 1] for i in range(len(data))]


CHUNKED = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    b"b;ext=1\r\ndata: one\n\n\r\n"
    b"B\r\ndata: two\n\n\r\n"
    b"0\r\nx-trailer: t\r\n\r\n"
)


async def test_a_chunked_body_split_anywhere_is_decoded_and_the_connection_reused() -> None:
    async with serving(Scripted(split(CHUNKED), [CHUNKED])) as server:
        client = make_client()
        try:
            assert await post(client, server.url) == (200, SSE)
            assert await post(client, server.url) == (200, SSE)
            assert server.accepted == 1  # read to the end: kept alive and reused
            first = server.requests[0]
            assert first.startswith(b"POST /v1/chat?x=1 HTTP/1.1\r\n")
            assert b"\r\nX-Test: yes\r\n" in first and b"\r\nContent-Length: 8\r\n" in first
            assert first.endswith(b'\r\n\r\n{"a": 1}')
        finally:
            await client.aclose()


async def test_content_length_and_interim_answers() -> None:
    answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\ncontent-length: 5\r\n\r\nnope!"
    async with serving(Scripted(split(answer), [answer])) as server:
        client = make_client()
        try:
            assert await post(client, server.url) == (404, b"nope!")
            assert await post(client, server.url) == (404, b"nope!")
            assert server.accepted == 1
        finally:
            await client.aclose()


async def test_a_body_up_to_the_close_is_read_whole_and_the_connection_not_kept() -> None:
    answer: list[bytes | None] = [b"HTTP/1.1 200 OK\r\n\r\n", b"all ", b"of it", None]
    async with serving(Scripted(answer, list(answer))) as server:
        client = make_client()
        try:
            assert await post(client, server.url) == (200, b"all of it")
            assert await post(client, server.url) == (200, b"all of it")
            assert server.accepted == 2
            assert pool_of(client).idle_connections() == 0
        finally:
            await client.aclose()


async def test_connection_close_is_honoured() -> None:
    answer = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok"
    async with serving(Scripted([answer], [answer])) as server:
        client = make_client()
        try:
            assert await post(client, server.url) == (200, b"ok")
            assert await post(client, server.url) == (200, b"ok")
            assert server.accepted == 2
        finally:
            await client.aclose()


async def test_a_stream_cut_mid_body_is_a_protocol_error_and_the_connection_dropped() -> None:
    cut: list[bytes | None] = [CHUNKED[:90], None]
    async with serving(Scripted(cut, [CHUNKED])) as server:
        client = make_client()
        try:
            with pytest.raises(httpx.RemoteProtocolError):
                await post(client, server.url)
            assert await post(client, server.url) == (200, SSE)
            assert server.accepted == 2
        finally:
            await client.aclose()


async def test_a_silent_server_is_a_read_timeout() -> None:
    async with serving(Scripted([CHUNKED[:90], b"STALL"], [CHUNKED])) as server:
        client = make_client(read_timeout=0.2)
        try:
            with pytest.raises(httpx.ReadTimeout):
                await post(client, server.url)
            assert await post(client, server.url) == (200, SSE)
            assert server.accepted == 2  # the timed-out connection was not reused
        finally:
            await client.aclose()


async def test_a_server_that_stops_reading_the_request_is_a_write_timeout() -> None:
    # It accepts and never reads: the socket buffers fill, the transport pauses writing,
    # and the wait for room is bounded by the write timeout (the connection's one timer).
    accepted = asyncio.Event()
    held: list[asyncio.StreamWriter] = []

    async def handle(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        accepted.set()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}/v1/chat"
    client = http_pool.client(httpx.Timeout(30.0, write=0.2), default_ssl_context())
    try:
        with pytest.raises(httpx.WriteTimeout):
            await post(client, url, body=b"x" * (64 * 1024 * 1024))
        assert accepted.is_set()
    finally:
        await client.aclose()
        for writer in held:
            writer.close()
        srv.close()


async def test_a_half_read_answer_closes_its_connection() -> None:
    async with serving(Scripted([CHUNKED[:90], b"STALL"], [CHUNKED])) as server:
        client = make_client()
        try:
            async with client.stream("POST", server.url, content=b"{}") as resp:
                assert resp.status_code == 200  # closed without reading the body
            assert pool_of(client).active == 0
            assert await post(client, server.url) == (200, SSE)
            assert server.accepted == 2
        finally:
            await client.aclose()


async def test_garbage_is_a_protocol_error() -> None:
    async with serving(Scripted([b"SMTP ready\r\n\r\n"])) as server:
        client = make_client()
        try:
            with pytest.raises(httpx.RemoteProtocolError):
                await post(client, server.url)
            assert pool_of(client).active == 0
        finally:
            await client.aclose()


async def test_nobody_listening_is_a_connect_error() -> None:
    srv = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    srv.close()
    await srv.wait_closed()
    client = make_client()
    try:
        with pytest.raises(httpx.ConnectError):
            await post(client, f"http://127.0.0.1:{port}/")
        assert pool_of(client).active == 0
    finally:
        await client.aclose()


async def test_waiting_for_a_free_connection_is_bounded_by_the_pool_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http_pool, "LIMITS", httpx.Limits(max_connections=1, max_keepalive_connections=1))
    async with serving(Scripted([CHUNKED[:90], b"STALL"])) as server:
        client = http_pool.client(httpx.Timeout(30.0, pool=0.2), default_ssl_context())
        try:
            async with client.stream("POST", server.url, content=b"{}") as resp:
                assert resp.status_code == 200  # holds the only connection
                with pytest.raises(httpx.PoolTimeout):
                    await post(client, server.url)
            assert pool_of(client).active == 0
        finally:
            await client.aclose()


async def test_a_header_with_a_line_break_is_refused_before_sending() -> None:
    async with serving(Scripted([CHUNKED])) as server:
        client = make_client()
        try:
            request = client.build_request("POST", server.url, content=b"{}")
            request.headers["X-Evil"] = "a\r\nInjected: 1"
            with pytest.raises(httpx.LocalProtocolError):
                await client.send(request)
            assert server.requests == [] and pool_of(client).active == 0
        finally:
            await client.aclose()


async def test_the_providers_fast_paths_send_what_httpx_would_and_keep_cookies() -> None:
    """`post_request` + `send_streaming`, and the kept head (`lean_head` + `send_head`, what
    the providers call), against `build_request` + `send`: the same request on the wire; a
    cookie the server sets goes back next time (the kept head then steps aside)."""
    cookie = b"HTTP/1.1 200 OK\r\nset-cookie: cf=1; Path=/\r\ncontent-length: 2\r\n\r\nok"
    plain = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
    async with serving(Scripted([plain], [plain], [plain], [plain], [cookie], [plain])) as server:
        client = make_client()
        timeout = httpx.Timeout(30.0)
        headers = {"Authorization": "Bearer k", "Content-Type": "application/json"}
        try:
            url = httpx.URL(server.url)
            for way in ("httpx", "request", "head", "head", "head", "after-cookie"):
                head = http_pool.lean_head(client, url, headers)
                assert (head is None) == (way == "after-cookie")  # a cookie to send: general way
                if way == "head":
                    assert head is not None
                    response = await http_pool.send_head(client, head, b"{}", timeout)
                elif way == "httpx":
                    request = client.build_request(
                        "POST", url, content=b"{}", headers=headers, timeout=timeout
                    )
                    response = await client.send(request, stream=True)
                else:
                    request = http_pool.post_request(client, url, b"{}", headers, timeout)
                    response = await http_pool.send_streaming(client, request)
                assert await response.aread() == b"ok"
                await response.aclose()
            slow, fast, kept, kept_again, _, after_cookie = server.requests
            assert slow == fast == kept == kept_again
            assert b"\r\nCookie: cf=1\r\n" in after_cookie and b"Cookie" not in kept
            assert server.accepted == 1 and pool_of(client).active == 0
        finally:
            await client.aclose()


async def test_the_kept_head_refuses_a_bad_header_before_sending_and_steps_aside_for_other_clients() -> None:
    async with serving(Scripted([CHUNKED])) as server:
        client = make_client()
        try:
            with pytest.raises(httpx.LocalProtocolError):
                http_pool.lean_head(client, httpx.URL(server.url), {"X-Evil": "a\r\nInjected: 1"})
            assert server.requests == [] and pool_of(client).active == 0
        finally:
            await client.aclose()
    async with httpx.AsyncClient(transport=httpx.MockTransport(lambda _: httpx.Response(200))) as other:
        assert http_pool.lean_head(other, httpx.URL("http://127.0.0.1:9/v1"), {}) is None
    redirecting = make_client()
    redirecting.follow_redirects = True
    try:
        assert http_pool.lean_head(redirecting, httpx.URL("http://127.0.0.1:9/v1"), {}) is None
    finally:
        await redirecting.aclose()


async def test_a_body_in_pieces_goes_out_as_the_joined_body_would() -> None:
    """The providers hand their encoded body over in pieces (large ones written as they
    are, small ones joined): the server receives the very request the joined bytes make,
    on this transport and (joined for it) on any other."""
    plain = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
    pieces = [b'{"m":[', b"1," * 40000, b"2,", b"", b"3," * 3000, b"4" * 5000, b"]}"]
    joined = b"".join(pieces)
    async with serving(Scripted([plain], [plain], [plain], [plain])) as server:
        client = make_client()
        timeout = httpx.Timeout(30.0)
        headers = {"Authorization": "Bearer k", "Content-Type": "application/json"}
        try:
            url = httpx.URL(server.url)
            for content in (joined, list(pieces)):
                request = http_pool.post_request(client, url, content, headers, timeout)
                response = await http_pool.send_streaming(client, request)
                assert await response.aread() == b"ok"
                await response.aclose()
            head = http_pool.lean_head(client, url, headers)
            assert head is not None
            for content in (joined, list(pieces)):
                response = await http_pool.send_head(client, head, content, timeout)
                assert await response.aread() == b"ok"
                await response.aclose()
            as_bytes, as_pieces, kept_bytes, kept_pieces = server.requests
            assert as_pieces == as_bytes == kept_bytes == kept_pieces
            assert as_bytes.endswith(b"\r\n\r\n" + joined)
            assert server.accepted == 1 and pool_of(client).active == 0
        finally:
            await client.aclose()
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=b"ok")

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as other:
        url = httpx.URL("http://127.0.0.1:9/v1")
        for content in (joined, list(pieces)):
            request = http_pool.post_request(other, url, content, {}, httpx.Timeout(5.0))
            await (await http_pool.send_streaming(other, request)).aread()
    assert seen[0].content == seen[1].content == joined
    assert seen[0].headers.raw == seen[1].headers.raw


async def answer_events(client: httpx.AsyncClient, url: str) -> list[tuple[str, bytes]]:
    """The events of one answer read as the providers read it (`open_stream`, `SSEReader`)."""
    answer, deadline = await open_stream(
        client, url, b"{}", {}, httpx.Timeout(30.0), base_url=url, first_token_timeout=None,
        classify=lambda status, body, headers: HarnessError(
            ErrorKind.RATE_LIMITED, f"{status} {body} retry-after={headers.get('Retry-After')}"
        ),
    )  # fmt: skip
    try:
        reader = SSEReader(answer, deadline, base_url=url, first_token_timeout=None, idle_timeout=None)
        events: list[tuple[str, bytes]] = []
        while (read := await reader.read()) is not None:
            events += read
        return events
    finally:
        await answer.aclose()


async def test_the_providers_answer_without_an_httpx_response_a_coded_body_or_an_error_with_one() -> None:
    """A 200 on the kept head is read straight from the connection; a body with a content
    coding is decoded (httpx's decoders) and an error status is classified with its headers
    and body, as through `httpx.Response` — on the same kept-alive connection."""
    coded = gzip.compress(SSE)
    gzipped = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nContent-Encoding: gzip\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(coded), coded)
    )
    limited = b'HTTP/1.1 429 Too Many\r\nRetry-After: 7\r\ncontent-length: 8\r\n\r\n{"a": 1}'
    async with serving(Scripted([CHUNKED], [gzipped], [limited], [CHUNKED])) as server:
        client = make_client()
        try:
            expected = [("", b"one"), ("", b"two")]
            assert await answer_events(client, server.url) == expected
            assert await answer_events(client, server.url) == expected
            with pytest.raises(HarnessError, match=r"429 \{'a': 1\} retry-after=7"):
                await answer_events(client, server.url)
            assert await answer_events(client, server.url) == expected
            assert server.accepted == 1 and pool_of(client).active == 0
        finally:
            await client.aclose()


async def test_the_first_token_deadline_bounds_the_wait_for_the_head_and_drops_the_connection() -> None:
    """The providers' first-token deadline is the exchange's own on the kept head (no
    timeout scope): a server silent after the request fails the call as a timeout, its
    connection not reused; the next call gets its answer on a new one."""
    async with serving(Scripted([b"STALL"], [CHUNKED])) as server:
        client = make_client()
        try:
            with pytest.raises(HarnessError, match=r"no first token within 0\.2s") as info:
                await open_stream(
                    client, server.url, b"{}", {}, httpx.Timeout(30.0), base_url=server.url,
                    first_token_timeout=0.2, classify=lambda *_: HarnessError(ErrorKind.INTERNAL, "status"),
                )  # fmt: skip
            assert info.value.kind is ErrorKind.TIMEOUT
            assert pool_of(client).active == 0 and pool_of(client).idle_connections() == 0
            server.stall.set()
            assert await answer_events(client, server.url) == [("", b"one"), ("", b"two")]
            assert server.accepted == 2
        finally:
            await client.aclose()


def pool_of(client: httpx.AsyncClient) -> LeanTransport:
    pool = client._transport
    assert isinstance(pool, LeanTransport)
    return pool


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (made with the openssl command line)."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a test certificate")
    home = tmp_path_factory.mktemp("tls")
    cert, key = str(home / "cert.pem"), str(home / "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


async def exchange_twice(
    tls: tuple[str, str] | None, made: list[ssl.SSLContext] | None = None
) -> tuple[list[tuple[int, bytes]], int, int]:
    """Two answers on one server (over TLS when given): (answers, connections, TLS failures).
    The client gets its TLS context from a factory, which appends each one it makes to `made`."""
    server = Scripted([CHUNKED], [CHUNKED])
    server_tls = client_tls = None
    if tls is not None:
        server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_tls.load_cert_chain(*tls)
        client_tls = ssl.create_default_context(cafile=tls[0])
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=server_tls)
    port = srv.sockets[0].getsockname()[1]
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}/v1/chat"
    made = [] if made is None else made

    def make_tls() -> ssl.SSLContext:
        made.append(client_tls or default_ssl_context())
        return made[-1]

    client = http_pool.client(httpx.Timeout(30.0), make_tls)
    try:
        answers = [await post(client, url), await post(client, url)]
        refused = 0
        if tls is not None:  # the client's default trust store does not know this certificate
            strict = http_pool.client(httpx.Timeout(30.0), default_ssl_context)
            try:
                await post(strict, url)
            except httpx.ConnectError:
                refused = 1
            finally:
                await strict.aclose()
        return answers, server.accepted, refused
    finally:
        await client.aclose()
        server.stall.set()
        srv.close()


async def test_tls_connections_are_verified_and_reused(tls_files: tuple[str, str]) -> None:
    made: list[ssl.SSLContext] = []
    answers, connections, refused = await exchange_twice(tls_files, made)
    assert answers == [(200, SSE)] * 2 and connections == 1 and refused == 1
    assert len(made) == 1  # made at the first https connection, kept


async def test_plain_http_never_makes_the_tls_context() -> None:
    """(The CA bundle is +1.8 MiB resident: a server whose model speaks http never loads it.)"""
    made: list[ssl.SSLContext] = []
    answers, connections, _ = await exchange_twice(None, made)
    assert answers == [(200, SSE)] * 2 and connections == 1 and made == []


@pytest.mark.parametrize("tls", [False, True])
def test_the_transport_works_on_uvloop_as_served(tls: bool, tls_files: tuple[str, str]) -> None:
    """`agentd serve` runs on uvloop, whose transports are no asyncio classes."""
    uvloop = pytest.importorskip("uvloop")
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        answers, connections, refused = runner.run(exchange_twice(tls_files if tls else None))
    assert answers == [(200, SSE)] * 2 and connections == 1 and refused == int(tls)
