"""ACP's Streamable HTTP transport on `/acp` (the one the official SDKs ship next to stdio
and WebSocket): `POST /acp` carries client→server messages, `GET /acp` (Accept:
text/event-stream) carries server→client messages as Server-Sent Events.

- `POST` of `initialize` (no connection header) opens a connection: `200` with the result
  as the body and its id in `Acp-Connection-Id`.
- Later `POST`s name the connection in that header and get `202 Accepted`; their answers,
  the session's notifications and the server's own requests (`session/request_permission`)
  arrive on the connection's event stream. The client answers those with a `POST` too.
- `GET` with the connection header is that stream (one at a time; a `GET` that also names
  an `Acp-Session-Id` is accepted and kept open with heartbeats, everything arrives on the
  connection's stream); `DELETE` closes the connection.
- Revoking the token that opened a connection (issue 28 item 3) ends it within
  `AGENTD_TOKEN_RECHECK_S`: its event streams get `_agentd/token_revoked` as their last
  message — nothing queued behind it is delivered — and end; the connection closes.

Behind it is the same `Connection` as on the WebSocket: `HttpChannel` gives it the two
calls it uses. Same semantics, bounded queues, and a connection nobody uses for
`IDLE_CLOSE_S` is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.websockets import WebSocketDisconnect

from agentd.infra import CHALLENGE, AuthError, Identity
from agentd.protocol import Served, notification, outgoing
from agentd.transport.revocation import CloseReason

if TYPE_CHECKING:
    from agentd.transport.connection import Connection

streamable_router = APIRouter()

CONNECTION_HEADER = "Acp-Connection-Id"
SESSION_HEADER = "Acp-Session-Id"
IDLE_CLOSE_S = 300.0  # no stream open and no request for this long: the connection closes
INBOX_FRAMES = 1000  # client messages waiting to be read by the connection
OUTBOX_FRAMES = 1000  # server messages waiting for the event stream (then the writer waits)
_CLOSED = object()


class HttpChannel:
    """The Connection's message channel over POSTs (in) and one SSE stream (out)."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[Any] = asyncio.Queue(maxsize=INBOX_FRAMES)
        self.outbox: asyncio.Queue[str] = asyncio.Queue(maxsize=OUTBOX_FRAMES)
        self.waiting: dict[Any, asyncio.Future[str]] = {}  # initialize id → its answer

    async def receive_text(self) -> str:
        item = await self.inbox.get()
        if item is _CLOSED:
            raise WebSocketDisconnect(code=1000)
        return str(item)

    async def send_text(self, text: str) -> None:
        if self.waiting:
            msg = orjson.loads(text)
            answer = isinstance(msg, dict) and "method" not in msg
            fut = self.waiting.pop(msg.get("id"), None) if answer else None
            if fut is not None:
                if not fut.done():
                    fut.set_result(text)
                return
        await self.outbox.put(text)  # backpressure: the writer waits for the stream


@dataclass
class HttpConnection:
    id: str
    principal: str
    channel: HttpChannel
    conn: Connection
    task: asyncio.Task[None]
    streaming: int = 0  # open event streams
    last_seen: float = field(default_factory=lambda: asyncio.get_running_loop().time())
    revoked: asyncio.Event = field(default_factory=asyncio.Event)  # its token was revoked

    def touch(self) -> None:
        self.last_seen = asyncio.get_running_loop().time()

    def close(self) -> None:
        with contextlib.suppress(asyncio.QueueFull):
            self.channel.inbox.put_nowait(_CLOSED)


class HttpConnections:
    """The open Streamable HTTP connections of one server."""

    def __init__(self) -> None:
        self.by_id: dict[str, HttpConnection] = {}
        self._sweeper: asyncio.Task[None] | None = None

    def open(self, state: Any, identity: Identity) -> HttpConnection:
        from agentd.transport.connection import Connection  # with the first client (idle RSS)

        channel = HttpChannel()
        conn = Connection(
            channel,
            state,
            state.dispatcher,
            principal=identity.principal,
            teams=identity.teams,
            token_hash=identity.token_hash,
        )
        cid = f"acp_{uuid.uuid4().hex}"
        task = asyncio.create_task(conn.serve(), name=f"http-acp-{cid}")
        entry = HttpConnection(cid, identity.principal, channel, conn, task)
        self.by_id[cid] = entry

        async def end_revoked() -> None:
            entry.revoked.set()  # its streams say why and end (acp_stream)
            entry.close()

        forget = state.live_tokens.register(identity.token_hash, end_revoked)

        def closed(_t: asyncio.Task[None]) -> None:
            self.by_id.pop(cid, None)
            forget()

        task.add_done_callback(closed)
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep(), name="http-acp-sweeper")
        return entry

    def find(self, cid: str | None, principal: str) -> HttpConnection | None:
        entry = self.by_id.get(cid or "")
        # Someone else's connection looks exactly like a missing one.
        return entry if entry is not None and entry.principal == principal else None

    async def _sweep(self) -> None:
        while self.by_id:
            await asyncio.sleep(IDLE_CLOSE_S / 10)
            now = asyncio.get_running_loop().time()
            for entry in list(self.by_id.values()):
                if entry.streaming == 0 and now - entry.last_seen > IDLE_CLOSE_S:
                    entry.close()


def _connections(state: Any) -> HttpConnections:
    found = getattr(state, "http_connections", None)
    if found is None:
        found = HttpConnections()
        state.http_connections = found
    return found


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _identity(request: Request) -> Identity | JSONResponse:
    try:
        state = request.app.state.agentd
        identity: Identity = await state.auth.identify(request.headers, request.query_params)
        return identity
    except AuthError as err:
        return JSONResponse({"error": "unauthorized", "detail": str(err)}, status_code=401, headers=CHALLENGE)


@streamable_router.post(
    "/acp", summary="ACP Streamable HTTP: a client message (initialize opens a connection)"
)
async def acp_post(request: Request) -> Response:
    state = request.app.state.agentd
    identity = await _identity(request)
    if isinstance(identity, JSONResponse):
        return identity
    principal = identity.principal
    body = await request.body()
    if len(body) > state.settings.max_frame_bytes:
        return _error(413, f"message larger than {state.settings.max_frame_bytes} bytes")
    registry = _connections(state)
    cid = request.headers.get(CONNECTION_HEADER)
    if cid is None:
        try:
            msg = orjson.loads(body)
        except orjson.JSONDecodeError:
            return _error(400, "the first message must be a JSON-RPC initialize request")
        if not (isinstance(msg, dict) and msg.get("method") == Served.INITIALIZE and "id" in msg):
            return _error(400, f"no {CONNECTION_HEADER}: the first message must be an initialize request")
        opened = registry.open(state, identity)
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        opened.channel.waiting[msg["id"]] = answer
        await opened.channel.inbox.put(body.decode())
        try:
            async with asyncio.timeout(30):
                text = await answer
        except TimeoutError:
            opened.close()
            return _error(504, "initialize was not answered")
        reply = orjson.loads(text)
        if "error" in reply:
            opened.close()
            return JSONResponse(reply, status_code=200)
        return Response(text, media_type="application/json", headers={CONNECTION_HEADER: opened.id})
    entry = registry.find(cid, principal)
    if entry is None:
        return _error(404, f"no connection {cid} (closed, expired, or never opened)")
    entry.touch()
    try:
        entry.channel.inbox.put_nowait(body.decode(errors="replace"))
    except asyncio.QueueFull:
        return _error(429, "too many messages waiting on this connection; retry shortly")
    return Response(status_code=202)


@streamable_router.get("/acp", summary="ACP Streamable HTTP: the connection's server→client event stream")
async def acp_stream(request: Request) -> Response:
    state = request.app.state.agentd
    identity = await _identity(request)
    if isinstance(identity, JSONResponse):
        return identity
    entry = _connections(state).find(request.headers.get(CONNECTION_HEADER), identity.principal)
    if entry is None:
        return _error(404, "no such connection: POST an initialize request first")
    session_scoped = request.headers.get(SESSION_HEADER) is not None
    heartbeat = state.settings.sse_heartbeat_s
    revoked_frame = b"data: " + orjson.dumps(_revoked_message()) + b"\n\n"

    async def frames() -> AsyncIterator[bytes]:
        entry.streaming += 1
        try:
            while not entry.task.done() and not entry.revoked.is_set():
                if session_scoped:
                    # Everything arrives on the connection's stream; this one only stays open.
                    await _first(asyncio.shield(entry.task), entry.revoked.wait(), within=heartbeat)
                    if not entry.revoked.is_set():
                        yield b": keepalive\n\n"
                    continue
                if not entry.channel.outbox.empty():  # the common case under load: no waiting
                    yield b"data: " + entry.channel.outbox.get_nowait().encode() + b"\n\n"
                    continue
                got = await _first(entry.channel.outbox.get(), entry.revoked.wait(), within=heartbeat)
                if entry.revoked.is_set():
                    if isinstance(got, str):  # taken from the queue: not delivered after all
                        with contextlib.suppress(asyncio.QueueFull):
                            entry.channel.outbox.put_nowait(got)
                    break
                yield b": keepalive\n\n" if got is None else b"data: " + str(got).encode() + b"\n\n"
            if entry.revoked.is_set():
                yield revoked_frame  # the last message: why the stream ends
        finally:
            entry.streaming -= 1
            entry.touch()

    return StreamingResponse(
        frames(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _revoked_message() -> dict[str, Any]:
    frame = outgoing.token_revoked(CloseReason.TOKEN_REVOKED.value)
    return notification(frame.method, frame.params)


async def _first(main: Any, stop: Any, *, within: float) -> Any:
    """`main`'s result, or None when `stop` finished first or `within` seconds passed;
    whichever did not finish is cancelled (`main` is shielded by the caller when it must
    survive)."""
    main_task = asyncio.ensure_future(main)
    stop_task = asyncio.ensure_future(stop)
    try:
        done, _ = await asyncio.wait(
            {main_task, stop_task}, timeout=within, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        stop_task.cancel()
        if not main_task.done():
            main_task.cancel()
    if main_task in done and not main_task.cancelled() and main_task.exception() is None:
        return main_task.result()
    return None


@streamable_router.delete("/acp", summary="ACP Streamable HTTP: close a connection")
async def acp_delete(request: Request) -> Response:
    identity = await _identity(request)
    if isinstance(identity, JSONResponse):
        return identity
    state = request.app.state.agentd
    entry = _connections(state).find(request.headers.get(CONNECTION_HEADER), identity.principal)
    if entry is None:
        return _error(404, "no such connection")
    entry.close()
    with contextlib.suppress(Exception):
        async with asyncio.timeout(10):
            await asyncio.shield(entry.task)
    return Response(status_code=204)


def close_all(state: Any) -> None:
    """At shutdown: every Streamable HTTP connection ends (its sessions stay)."""
    registry = getattr(state, "http_connections", None)
    if registry is not None:
        for entry in list(registry.by_id.values()):
            entry.close()
