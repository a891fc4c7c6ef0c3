"""A real uvicorn server on a free loopback port, in a background thread — the shared
lifecycle of the fake provider servers (usable with `with` and `async with`)."""

from __future__ import annotations

import asyncio
import collections
import json
import socket
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

import uvicorn
from starlette.requests import Request

R = TypeVar("R")


class ThreadedServer:
    """Subclasses set `self.app` (an ASGI app) before `start()`."""

    thread_name = "fake-server"
    app: Any
    # (certificate file, key file): serve https instead of http (see tests/support/tls.py).
    tls: tuple[str, str] | None = None

    def __init__(self) -> None:
        self.port: int = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self._clients: set[tuple[str, int]] = set()
        self._clients_lock = threading.Lock()

    @property
    def connections(self) -> int:
        """Distinct TCP connections that carried a request (keyed by the client's address
        and port: a reused connection keeps its port, a new one gets another)."""
        with self._clients_lock:
            return len(self._clients)

    def _counting(self, app: Any) -> Any:
        async def counted(scope: Any, receive: Any, send: Any) -> None:
            client = scope.get("client")
            if scope["type"] == "http" and client:
                with self._clients_lock:
                    self._clients.add((str(client[0]), int(client[1])))
            await app(scope, receive, send)

        return counted

    def start(self) -> None:
        """Bind a free port and serve in a background thread; returns once it accepts."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self._socket = sock
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._counting(self.app),
            lifespan="off",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=2,
            ssl_certfile=self.tls[0] if self.tls else None,
            ssl_keyfile=self.tls[1] if self.tls else None,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name=self.thread_name, daemon=True
        )
        self._thread.start()
        give_up = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > give_up:
                raise RuntimeError(f"{type(self).__name__} did not start")
            time.sleep(0.005)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        # start/stop block briefly (thread start, join): keep them off the caller's loop.
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any


class ScriptedServer(ThreadedServer, Generic[R]):
    """A fake provider: scripted responses served in order, one per accepted request; when
    they run out, `default` (if any). Every request is recorded (`requests`)."""

    def __init__(self, responses: list[R] | None = None, *, default: R | None = None) -> None:
        self._queue: collections.deque[R] = collections.deque(responses or [])
        self._lock = threading.Lock()
        self.default = default
        self.requests: list[RecordedRequest] = []
        super().__init__()

    def enqueue(self, *responses: R) -> None:
        with self._lock:
            self._queue.extend(responses)

    @property
    def pending(self) -> int:
        """Scripted responses not yet served."""
        with self._lock:
            return len(self._queue)

    def _next(self) -> R | None:
        with self._lock:
            return self._queue.popleft() if self._queue else self.default

    async def _record(self, request: Request) -> Any:
        """Read, parse (JSON, else the text) and record the request; returns its body."""
        raw = await request.body()
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode(errors="replace")
        self.requests.append(RecordedRequest(request.url.path, dict(request.headers.items()), body))
        return body
