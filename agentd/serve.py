"""uvicorn, with agentd's graceful shutdown (R-S5) run *before* connections close.

uvicorn closes every connection first and runs the application's shutdown last; by then
a client waiting on `session/prompt` could no longer be told how its turn ended. So the
drain — refuse new prompts, let running turns stop at their next budget gate or cancel
them within the grace period, answer every waiting request, flush the log — runs first,
while the sockets are still open.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

from agentd.infra import AuthMode, Settings, allocator_in_use, limit_arenas, switch_to_malloc, trim


def _import_uvicorn_without_reloader() -> None:
    """Import uvicorn without `watchfiles` (idle memory, issue 14: ~1.2 MiB, a Rust
    extension). uvicorn's package imports its `--reload` supervisor, which imports
    watchfiles when it is installed; agentd never reloads, and uvicorn falls back to its
    stat-based reloader when the import fails. The block is lifted at once, so anything
    that really wants watchfiles later still gets it."""
    if "uvicorn" in sys.modules or "watchfiles" in sys.modules:
        return
    sys.modules["watchfiles"] = None  # type: ignore[assignment]  # makes the import fail
    try:
        import uvicorn  # noqa: F401
    finally:
        if sys.modules.get("watchfiles", ...) is None:
            del sys.modules["watchfiles"]


_import_uvicorn_without_reloader()

import uvicorn  # noqa: E402  (after the function above chose how it loads)

log = logging.getLogger(__name__)

_TICK_S = 0.1  # uvicorn's main loop period (date header, max requests, a signal's exit)
_CLOSE_POLL_S = 0.005  # how often shutdown looks whether the connections have closed


class AgentdServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, app: Any, *, freeze_heap: bool = False) -> None:
        super().__init__(config)
        self._app = app
        self._exit_requested = asyncio.Event()
        self._freeze_heap = freeze_heap

    def request_exit(self) -> None:
        """Stop serving (a program that embeds the server stops it): the main loop sees it
        at once, not at uvicorn's next 0.1 s tick. A signal still sets `should_exit`."""
        self.should_exit = True
        self._exit_requested.set()

    async def main_loop(self) -> None:
        """uvicorn's main loop (a tick every 0.1 s), woken early by `request_exit`."""
        if self._freeze_heap:
            # Start-up leaves ~130k long-lived objects (modules, classes, settings, the
            # app) that every full collection walked again: ~0.4 ms of a trivial turn's
            # CPU (issue 32). Frozen, collections walk only what serving creates. Not
            # collected first (~110 ms of start-up); a cycle of start-up garbage stays.
            gc.freeze()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_TICK_S):
                    await self._exit_requested.wait()
            should_exit = await self.on_tick(counter)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if sockets is not None and self.started:
            # uvicorn names its address only when it bound the socket itself; `agentd serve`
            # binds it earlier (a port in use is reported before the slow start-up work).
            self._log_started_message(sockets)
        if self.started:
            bound = sockets[0].getsockname() if sockets else (self.config.host, self.config.port)
            log.info("open %s", page_url(str(bound[0]), int(bound[1])))

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        state = getattr(self._app.state, "agentd", None)
        if state is not None:
            await state.drain()
        # uvicorn's shutdown, whose fixed 0.1 s pause for the connections to react to it is
        # a wait (bounded by that pause) until they have closed.
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_TICK_S):
                while self.server_state.connections:  # noqa: ASYNC110 - uvicorn's plain set: no event
                    await asyncio.sleep(_CLOSE_POLL_S)
        grace = self.config.timeout_graceful_shutdown
        try:
            await asyncio.wait_for(self._wait_tasks_to_complete(), timeout=grace)
        except TimeoutError:
            log.error("graceful shutdown timed out: cancelling %d task(s)", len(self.server_state.tasks))
            for t in self.server_state.tasks:
                t.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
        if not self.force_exit:
            await self.lifespan.shutdown()


Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
LOOPBACK_NAMES = ["127.0.0.1", "localhost", "[::1]", "::1"]


class StartingApp:
    """The ASGI app `agentd serve` listens with while the real one loads (issue 32 item 2).

    From the moment the socket listens, `/healthz` (liveness: the process is up) answers 200
    and `/readyz` 503 `starting`; every other request, HTTP or WebSocket, is held — awaited,
    never refused — until `load` has made the real app (its imports run in a thread, so
    /healthz keeps answering) and its lifespan has started (store, migrations, sandbox,
    writer, manager), then passed to it. If that start-up fails, the held requests get 503,
    `failure` keeps the error and `on_failure` runs (the CLI stops the server, exits 3).
    """

    def __init__(self, settings: Settings, load: Callable[[], Awaitable[Any]]) -> None:
        from starlette.datastructures import State

        self._load = load
        self._settings = settings
        self._early_state = State()
        self._early_state.settings = settings  # server_for reads it before the app exists
        # The host rule of the real app (agentd/app.py) applies to the early /healthz too.
        hosts = [*(LOOPBACK_NAMES if settings.auth is AuthMode.NONE else []), *settings.allowed_hosts]
        self._healthz: Any = _healthz
        if hosts:
            from starlette.middleware.trustedhost import TrustedHostMiddleware

            self._healthz = TrustedHostMiddleware(_healthz, allowed_hosts=hosts)
        self._app: Any = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.failure: BaseException | None = None
        self.on_failure: Callable[[], None] = lambda: None

    @property
    def state(self) -> Any:
        """The real app's state once it is made (AgentdServer's shutdown drains through it)."""
        return self._app.state if self._app is not None else self._early_state

    @property
    def ready(self) -> bool:
        return self._ready.is_set() and self.failure is None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if not self._ready.is_set() and scope["type"] == "http":
            if scope["path"] == "/healthz":
                await self._healthz(scope, receive, send)
                return
            if scope["path"] == "/readyz":
                await _json(send, 503, {"status": "starting", "detail": "the server is still starting"})
                return
        await self._ready.wait()
        if self.failure is None:
            await self._app(scope, receive, send)
        elif scope["type"] == "http":
            await _json(send, 503, {"status": "unavailable", "detail": "the server failed to start"})
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1011})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._task = asyncio.create_task(self._run(), name="agentd-start")
                await send({"type": "lifespan.startup.complete"})  # serve /healthz now
            elif message["type"] == "lifespan.shutdown":
                self._stop.set()
                if self._task is not None:
                    await self._task  # a start-up under way finishes first, then stops cleanly
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _run(self) -> None:
        if self._settings.memory_trim_s > 0:
            limit_arenas()  # before the loading thread allocates (idle memory), as the app's lifespan does
        try:
            app = await self._load()
            async with app.router.lifespan_context(app):
                self._app = app
                self._ready.set()
                log.info("ready: serving every request")
                if self._settings.memory_trim_s > 0:
                    trim()  # what the loading thread's malloc arena holds free (idle: ~1 MiB)
                    if self._settings.malloc_after_start:
                        switch_to_malloc()  # the start-up's objects stay in pymalloc's arenas
                log.info("new objects from: %s", allocator_in_use())
                await self._stop.wait()
        except Exception as exc:
            if self._ready.is_set():
                log.exception("the application failed after its start-up")
                return
            log.error("start-up failed: %s", exc, exc_info=exc)
            self.failure = exc
            self._ready.set()
            self.on_failure()


async def _json(send: Send, status: int, body: dict[str, str]) -> None:
    import json

    data = json.dumps(body, separators=(",", ":")).encode()  # as Starlette's JSONResponse
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


async def _healthz(scope: Scope, receive: Receive, send: Send) -> None:
    await _json(send, 200, {"status": "ok"})  # the real route's answer (agentd/transport/http.py)


def page_url(host: str, port: int) -> str:
    """Where a browser on this machine finds the web page: a wildcard bind is reached on
    the loopback address."""
    if host in ("0.0.0.0", "", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/"


# A WebSocket frame up to this many times `max_frame_bytes` is read whole and reaches
# agentd's own size check, which answers -32600 and keeps the connection; a larger one is
# not buffered at all: the socket is closed with 1009 (message too big).
WS_CEILING_FACTOR = 4


def ws_ceiling(max_frame_bytes: int) -> int:
    return WS_CEILING_FACTOR * max_frame_bytes


def server_for(
    app: Any,
    *,
    host: str,
    port: int,
    log_level: str = "info",
    max_frame_bytes: int | None = None,
    freeze_heap: bool = False,
) -> AgentdServer:
    """`max_frame_bytes` defaults to the app's settings (`create_app` keeps them on app.state).
    `freeze_heap`: the process is this server's alone (`agentd serve`): its start-up objects
    are frozen out of the garbage collector's walks (an embedding program's are its own)."""
    settings = getattr(app.state, "settings", None)
    if max_frame_bytes is None:
        default = Settings.model_fields["max_frame_bytes"].default
        max_frame_bytes = settings.max_frame_bytes if settings is not None else default
    compression = (
        settings.ws_compression if settings is not None else Settings.model_fields["ws_compression"].default
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        log_config=None,  # agentd configures logging (agentd/infra/logs.py); uvicorn's loggers propagate
        lifespan="on",
        ws="websockets-sansio",
        ws_max_size=ws_ceiling(max_frame_bytes),
        ws_per_message_deflate=compression,
    )
    return AgentdServer(config, app, freeze_heap=freeze_heap)


@contextlib.asynccontextmanager
async def running_app(app: Any, listen: tuple[str, int] | None) -> AsyncIterator[Any]:
    """The app's state with its lifespan running; with `listen`, also served over HTTP and
    WebSocket (a web page or `agentd chat` can watch the editor's sessions)."""
    if listen is None:
        async with app.router.lifespan_context(app):
            yield app.state.agentd
            # Answer what is waiting and flush the log before leaving (served over HTTP too,
            # the server's own shutdown drains).
            await app.state.agentd.drain()
        return
    server = server_for(app, host=listen[0], port=listen[1], log_level="warning")
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError(f"could not listen on {listen[0]}:{listen[1]}")
            await asyncio.sleep(0.01)  # uvicorn offers no start-up event to await
        log.info("also listening on http://%s:%d", listen[0], server.servers[0].sockets[0].getsockname()[1])
        yield app.state.agentd
    finally:
        server.request_exit()
        with contextlib.suppress(asyncio.CancelledError):
            await task
