"""The sandbox's egress proxy over its real Unix socket (issue 28, item 1): it connects
only where the policy allows, refuses readably, stays bounded, and cleans up."""

from __future__ import annotations

import asyncio
import socket
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentd.tools.errors import ToolError
from agentd.tools.shell.egress import HEAD_LIMIT, REFUSED_HEADER, EgressProxy
from agentd.tools.shell.egress_policy import EgressPolicy
from agentd.tools.shell.launch import ShellLauncher
from agentd.tools.shell.sandbox import SandboxMode, SandboxPolicy
from tests.support.polling import until


@pytest.fixture
async def origin() -> AsyncIterator[int]:
    """A loopback HTTP server answering `hello <request line>`."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        body = b"hello " + head.split(b"\r\n")[0]
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


async def ask(proxy: EgressProxy, request: bytes) -> bytes:
    reader, writer = await asyncio.open_unix_connection(str(proxy.path))
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return answer


@pytest.mark.parametrize(
    "target",
    [
        "127.0.0.1:{port}",
        "localhost:{port}",
        "[::1]:{port}",
        "[::ffff:127.0.0.1]:{port}",
        "0.0.0.0:{port}",
        "2130706433:{port}",  # 127.0.0.1 as one number: resolved, then checked
        "169.254.169.254:80",
        "10.0.0.1:80",
    ],
)
async def test_local_and_private_destinations_are_refused_with_a_readable_403(
    origin: int, target: str
) -> None:
    proxy = EgressProxy.open(EgressPolicy(agentd_ports=frozenset({origin})))
    try:
        where = target.format(port=origin)
        for request in (
            f"CONNECT {where} HTTP/1.1\r\n\r\n",
            f"GET http://{where}/rpc HTTP/1.1\r\nHost: x\r\n\r\n",
        ):
            answer = await ask(proxy, request.encode())
            assert answer.startswith(b"HTTP/1.1 403"), answer
            assert f"{REFUSED_HEADER}: refused".encode() in answer and b"not allowed" in answer
    finally:
        proxy.close()


async def test_an_allowed_destination_is_reached_by_connect_and_by_plain_http(origin: int) -> None:
    proxy = EgressProxy.open(EgressPolicy(allowed=frozenset({("127.0.0.1", origin)})))
    try:
        plain = await ask(
            proxy,
            f"GET http://127.0.0.1:{origin}/x?y=1 HTTP/1.1\r\nHost: h\r\n"
            "Proxy-Connection: keep-alive\r\n\r\n".encode(),
        )
        assert plain.startswith(b"HTTP/1.1 200") and plain.endswith(b"hello GET /x?y=1 HTTP/1.1")
        reader, writer = await asyncio.open_unix_connection(str(proxy.path))
        writer.write(f"CONNECT 127.0.0.1:{origin} HTTP/1.1\r\n\r\n".encode())
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        writer.write(b"GET /tunnel HTTP/1.1\r\n\r\n")
        assert (await asyncio.wait_for(reader.read(), 10)).endswith(b"hello GET /tunnel HTTP/1.1")
        writer.close()
    finally:
        proxy.close()


async def test_bad_requests_get_4xx_and_nothing_is_connected(origin: int) -> None:
    proxy = EgressProxy.open(EgressPolicy(allowed=frozenset({("127.0.0.1", origin)})))
    try:
        assert (await ask(proxy, b"POST /rpc HTTP/1.1\r\nHost: x\r\n\r\n")).startswith(b"HTTP/1.1 400")
        assert (await ask(proxy, b"CONNECT nowhere HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 400")
        assert (await ask(proxy, b"GET ftp://x/ HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 400")
        huge = b"GET http://127.0.0.1/ HTTP/1.1\r\nX: " + b"a" * (HEAD_LIMIT * 2) + b"\r\n\r\n"
        assert (await ask(proxy, huge)).startswith(b"HTTP/1.1 431")
    finally:
        proxy.close()


async def test_close_ends_open_tunnels_and_removes_the_socket(origin: int) -> None:
    proxy = EgressProxy.open(EgressPolicy(allowed=frozenset({("127.0.0.1", origin)})))
    reader, writer = await asyncio.open_unix_connection(str(proxy.path))
    writer.write(f"CONNECT 127.0.0.1:{origin} HTTP/1.1\r\n\r\n".encode())
    await reader.readuntil(b"\r\n\r\n")
    proxy.close()
    assert await asyncio.wait_for(reader.read(), 10) == b""  # the tunnel was ended
    writer.close()
    await until(lambda: not proxy.path.parent.exists() or None, what="the socket's folder to go")
    with pytest.raises(OSError):
        socket.socket(socket.AF_UNIX).connect(str(proxy.path))


async def test_a_proxy_that_cannot_be_set_up_refuses_the_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Fault: no room for the proxy's socket. The command is refused with a readable tool
    # error — never started with a network it was not given, nor left half set up.
    def full(*_: object, **__: object) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "mkdtemp", full)
    shell = ShellLauncher(SandboxMode.BWRAP, SandboxPolicy(python=sys.executable))
    with pytest.raises(ToolError, match=r"cannot set up the sandbox's network: .*No space left"):
        shell.prepare("true", tmp_path, "tag")
    offline = ShellLauncher(SandboxMode.BWRAP, SandboxPolicy(network=False))
    assert offline.prepare("true", tmp_path, "tag").egress is None  # no network: no proxy needed
