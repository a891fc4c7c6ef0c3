"""A small forward HTTP proxy on a free loopback port that counts what passed through it:
CONNECT tunnels (https) and absolute-form requests (plain http), as corporate proxies do.

A plain request is forwarded with its target in origin form and `Connection: close`, so
each one passes (and is counted) on a connection of its own."""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit

_MAX_HEAD = 64 * 1024


class ForwardProxy:
    def __init__(self) -> None:
        self.port = 0
        self.tunnels: list[str] = []  # CONNECT targets, host:port
        self.requests: list[str] = []  # absolute URLs of plain requests
        self.refuse_connect = False  # answer CONNECT with 403 (a fault test)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            if len(head) > _MAX_HEAD:
                return
            method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
            if method == "CONNECT":
                await self._connect(target, reader, writer)
            else:
                await self._forward(head, target, reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            pass
        finally:
            writer.close()
            self._tasks.discard(task)

    async def _connect(self, target: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.tunnels.append(target)
        if self.refuse_connect:
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            return
        host, port = target.rsplit(":", 1)
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await _pipe_both(reader, writer, up_reader, up_writer)

    async def _forward(
        self, head: bytes, target: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        url = urlsplit(target)
        if url.scheme != "http" or url.hostname is None:
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            return
        self.requests.append(target)
        lines = head.rstrip(b"\r\n").split(b"\r\n")
        method = lines[0].split(b" ", 1)[0]
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        kept = [
            line
            for line in lines[1:]
            if not line.lower().startswith((b"connection:", b"proxy-authorization:", b"proxy-connection:"))
        ]
        rewritten = b"\r\n".join([method + b" " + path.encode() + b" HTTP/1.1", *kept, b"Connection: close"])
        up_reader, up_writer = await asyncio.open_connection(url.hostname, url.port or 80)
        up_writer.write(rewritten + b"\r\n\r\n")
        await _pipe_both(reader, writer, up_reader, up_writer)


async def _pipe_both(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    try:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(_pipe(reader, up_writer))
            tasks.create_task(_pipe(up_reader, writer))
    finally:
        up_writer.close()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
        if sink.can_write_eof():
            sink.write_eof()
