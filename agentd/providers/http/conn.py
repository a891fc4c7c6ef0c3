"""One HTTP/1.1 connection of the lean transport (`http_lean`): an `asyncio.Protocol` holding
the bytes received so far, with one waiter at a time and one timer for its read deadlines."""

from __future__ import annotations

import asyncio
import select
from collections.abc import Callable
from typing import cast

import httpx

from agentd.providers.http.read_deadline import ReadDeadline

Key = tuple[str, str, int]  # origin: scheme, host, port


class Connection(asyncio.Protocol):
    """One TCP (or TLS) connection: the bytes received so far, and one waiter at a time."""

    def __init__(self, key: Key) -> None:
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.eof = False
        self.lost: BaseException | None = None
        self.closed = False
        self.idle_since = 0.0
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._drained: asyncio.Future[None] | None = None
        self._deadline = ReadDeadline()  # one timer for all reads (not one per read)
        # Made by the loop's protocol factory. Kept: 3.11's get_running_loop() costs a
        # getpid() system call, once per read otherwise.
        self._loop = asyncio.get_running_loop()

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # (uvloop's is no asyncio subclass)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = self.eof = True
        self.lost = exc
        self._wake()
        self._deadline.close()
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- used by the exchange
    async def wait_data(
        self,
        limit_s: float | None,
        until: float | None = None,
        expired: Callable[[], BaseException] | None = None,
    ) -> None:
        """Until more bytes, the end of the stream or the timeout: `limit_s` from now
        (httpx.ReadTimeout), or the caller's `until` (loop time; then `expired()` is raised)
        if that comes first."""
        if self.eof:
            raise self.cut()
        loop = self._loop
        waiter = self._waiter = loop.create_future()
        when, error = (loop.time() + limit_s, read_timeout_error) if limit_s is not None else (None, None)
        if until is not None and expired is not None and (when is None or until <= when):
            when, error = until, expired
        if when is None or error is None:
            await waiter
            return
        self._deadline.watch(loop, waiter, when, error)
        try:
            await waiter
        finally:
            self._deadline.release()

    async def write(
        self,
        data: bytes,
        limit_s: float | None,
        until: float | None = None,
        expired: Callable[[], BaseException] | None = None,
    ) -> None:
        """Write `data`; when the transport has no room, wait for it up to `limit_s` from
        now (httpx.WriteTimeout), or the caller's `until` (then `expired()`) if sooner."""
        if self.closed or self.transport is None:
            raise httpx.WriteError("the connection was closed")
        self.transport.write(data)
        if self._paused:
            loop = self._loop
            drained = self._drained = loop.create_future()
            when, error = (
                (loop.time() + limit_s, write_timeout_error) if limit_s is not None else (None, None)
            )
            if until is not None and expired is not None and (when is None or until <= when):
                when, error = until, expired
            if when is not None and error is not None:
                self._deadline.watch(loop, drained, when, error)
            try:
                await drained
            finally:
                self._deadline.release()
            if self.closed:
                raise httpx.WriteError("the connection was closed while writing")

    def cut(self) -> httpx.TransportError:
        if self.lost is not None and not isinstance(self.lost, EOFError):
            return httpx.ReadError(f"{type(self.lost).__name__}: {self.lost}")
        return httpx.RemoteProtocolError("the server closed the connection before the response ended")

    def reusable(self, now: float, expiry: float) -> bool:
        if self.closed or self.eof or self.buffer or now - self.idle_since >= expiry:
            return False
        # The server may have hung up (or sent anything) since, and the loop not have seen
        # it yet: an idle connection with something to read is not reused (as httpcore).
        sock = self.transport.get_extra_info("socket") if self.transport is not None else None
        if sock is None:
            return True
        poll = select.poll()
        poll.register(sock.fileno(), select.POLLIN)
        return not poll.poll(0)

    def close(self) -> None:
        self.closed = True
        self._deadline.close()
        if self.transport is not None:
            self.transport.close()


def read_timeout_error() -> BaseException:
    return httpx.ReadTimeout("timed out reading the response")


def write_timeout_error() -> BaseException:
    return httpx.WriteTimeout("timed out writing the request")
