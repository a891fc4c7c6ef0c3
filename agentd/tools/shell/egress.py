"""The sandbox's only way out (issue 28, item 1): an HTTP proxy on a Unix socket.

A sandboxed command runs in a network namespace of its own (bwrap `--unshare-net`), so
it cannot reach the host's loopback — agentd's API, a database, any local daemon. With
`AGENTD_SANDBOX_NETWORK=on` each command gets one of these proxies: its socket is
bind-mounted into the sandbox, where a small bridge (`sandbox_bridge.py`) offers it as
`http://127.0.0.1:<port>` in `HTTP_PROXY`/`HTTPS_PROXY`. It speaks `CONNECT host:port`
(HTTPS, any TLS or TCP protocol a tool tunnels) and absolute-form plain HTTP requests,
resolves the name itself and connects only to an address `EgressPolicy` allows.

Bounded: the request head (16 KiB, 30 s), name resolution and connecting (10 s each),
connections at once per command (64). A refusal is a `403` with
`X-Agentd-Egress: refused` and a one-line reason; nothing else is sent anywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import shutil
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from agentd.tools.shell.egress_policy import EgressPolicy, IpAddress, Refusal, split_authority

log = logging.getLogger(__name__)

HEAD_LIMIT = 16 * 1024
HEAD_TIMEOUT_S = 30.0
RESOLVE_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 64
COPY_CHUNK = 64 * 1024
REFUSED_HEADER = "X-Agentd-Egress"  # on every answer the proxy itself gives
_HOP_HEADERS = {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "upgrade"}


class _Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass
class EgressProxy:
    policy: EgressPolicy
    path: Path
    _sock: socket.socket
    _task: asyncio.Task[None] | None = None
    _conns: set[asyncio.Task[None]] = field(default_factory=set)

    @classmethod
    def open(cls, policy: EgressPolicy) -> EgressProxy:
        """Listening at once (the socket exists for bwrap to bind), served on the running
        loop; `close()` ends it and its connections."""
        folder = Path(tempfile.mkdtemp(prefix="agentd-egress-"))  # 0700: the server's user only
        path = folder / "egress.sock"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(path))
            sock.listen(MAX_CONNECTIONS)
            sock.setblocking(False)
            proxy = cls(policy, path, sock)
            proxy._task = asyncio.get_running_loop().create_task(proxy._serve(), name="sandbox-egress")
            proxy._task.add_done_callback(proxy._cleanup)  # however it ends, started or not
        except BaseException:
            sock.close()
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return proxy

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()  # the server closes its socket; `_cleanup` the rest
            self._task = None
        for conn in list(self._conns):
            conn.cancel()

    def _cleanup(self, _task: asyncio.Task[None]) -> None:
        self._sock.close()  # a no-op when the server closed it
        shutil.rmtree(self.path.parent, ignore_errors=True)

    async def _serve(self) -> None:
        server = await asyncio.start_unix_server(self._accept, sock=self._sock, limit=HEAD_LIMIT)
        async with server:
            await server.serve_forever()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        try:
            if len(self._conns) > MAX_CONNECTIONS:
                await _answer(writer, 503, "too many connections through the sandbox's proxy")
                return
            await self._proxy(reader, writer)
        except _Refused as refused:
            await _answer(writer, refused.status, refused.reason)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass  # the command or the far end went away: nothing to tell anyone
        finally:
            self._conns.discard(task)
            writer.close()

    async def _proxy(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with asyncio.timeout(HEAD_TIMEOUT_S):
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.LimitOverrunError:
                raise _Refused(431, "request head too large") from None
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            raise _Refused(400, "not an HTTP proxy request")
        method, target, version = parts
        if method.upper() == "CONNECT":
            where = split_authority(target, None)
            forward: bytes | None = None
        else:
            url = urlsplit(target)
            if url.scheme.lower() != "http" or not url.netloc:
                raise _Refused(400, "only CONNECT and absolute http:// requests go through this proxy")
            where = split_authority(url.netloc.rpartition("@")[2], 80)
            path = url.path or "/"
            path += f"?{url.query}" if url.query else ""
            forward = _origin_form(method, path, version, lines[1:])
        if where is None:
            raise _Refused(400, f"bad destination {target!r}")
        host, port = where
        up_reader, up_writer = await self._connect(host, port)
        try:
            if forward is None:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                up_writer.write(forward)
            await asyncio.gather(_copy(reader, up_writer), _copy(up_reader, writer), return_exceptions=True)
        finally:
            up_writer.close()

    async def _connect(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        shown = f"{host}:{port}"
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(RESOLVE_TIMEOUT_S):
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, TimeoutError):
            raise _Refused(502, f"cannot resolve {host}") from None
        addresses = list(dict.fromkeys(_ip(str(info[4][0])) for info in infos))
        for ip in addresses:  # every address a name has must pass: no picking the harmless one
            if (why := self.policy.refusal(ip, port)) is not None:
                raise self._refuse(shown, ip, why)
        last: Exception | None = None
        for ip in addresses:
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    up_reader, up_writer = await asyncio.open_connection(str(ip), port, limit=COPY_CHUNK)
            except (OSError, TimeoutError) as exc:
                last = exc
                continue
            sock = up_writer.get_extra_info("socket")
            why = self.policy.refusal_connected(_ip(sock.getpeername()[0]), _ip(sock.getsockname()[0]), port)
            if why is not None:
                up_writer.close()  # nothing was sent: the far end saw a connection open and close
                raise self._refuse(shown, ip, why)
            return up_reader, up_writer
        raise _Refused(502, f"cannot connect to {shown}: {last}")

    def _refuse(self, shown: str, ip: IpAddress, why: Refusal) -> _Refused:
        log.info("sandbox egress refused: %s (%s): %s", shown, ip, why.value)
        return _Refused(403, f"agentd sandbox: connecting to {shown} ({ip}) is not allowed: {why.value}")


def _ip(text: str) -> IpAddress:
    return ipaddress.ip_address(text.split("%", 1)[0])  # a v6 scope id is not part of the address


def _origin_form(method: str, path: str, version: str, headers: list[str]) -> bytes:
    """The request as the origin server wants it: its path, no hop-by-hop headers, and one
    request per connection (a next one could name another host)."""
    kept = [h for h in headers if h and h.split(":", 1)[0].strip().lower() not in _HOP_HEADERS]
    return "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close", "", ""]).encode("latin-1")


async def _copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while data := await src.read(COPY_CHUNK):
            dst.write(data)
            await dst.drain()
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if dst.can_write_eof():
                dst.write_eof()


async def _answer(writer: asyncio.StreamWriter, status: int, reason: str) -> None:
    body = (reason + "\n").encode()
    head = (
        f"HTTP/1.1 {status} {_PHRASES.get(status, 'Error')}\r\n{REFUSED_HEADER}: refused\r\n"
        f"Content-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError, RuntimeError):
        writer.write(head.encode() + body)
        async with asyncio.timeout(5):
            await writer.drain()


_PHRASES = {400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large", 502: "Bad Gateway"}
_PHRASES[503] = "Service Unavailable"
