"""One client on `GET /acp`: JSON-RPC 2.0 in both directions over WebSocket text frames.

Every incoming request is handled in its own task (a reader that awaited a prompt
inline would deadlock on the cancel or permission reply that must follow it). Outgoing
frames go through a bounded queue drained by one writer task, so producers never await
a slow socket. Replays (agentd/session/eventlog/replayer.py) and responses are the exception: they
await room instead (agentd/transport/outgoing.py), so they are paced by the client and
never dropped.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, cast

import orjson
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from agentd.core import defer_flush
from agentd.protocol import (
    AGENTD_PREFIX,
    CANCEL_REQUEST,
    ClientCapabilities,
    ErrorCode,
    OptIn,
    RpcError,
    error_response,
    request,
)
from agentd.transport.conn_parts import _CLOSE, _WAKE, Channel, FrameSocket, _ClearsAnswers, _unmarked
from agentd.transport.guards import within_depth
from agentd.transport.outgoing import OutgoingQueue, merge_chunks
from agentd.transport.render import encode_message
from agentd.transport.rpc import Dispatcher, read_message, response_problem
from agentd.transport.state import CallContext

if TYPE_CHECKING:
    from agentd.transport.state import AppState

log = logging.getLogger(__name__)

_ID_KINDS = frozenset({int, str, bool})  # what `isinstance(id, (int, str))` takes from JSON
# Frames a writer sends in a row before letting the other writers run: a session's burst
# then reaches its N clients within ~N × 16 sends of each other, not one whole burst apart.
WRITER_SLICE = 16
# A request's reply written in its handler's step when the writer task waits with nothing
# queued (`_handle_one`): one wake-up of the writer fewer per request. Off: every reply
# goes through the queue (tests run both).
DIRECT_REPLY = True
# A publish's frames for a client whose batched writer waits idle go out in the publishing
# step, in one write (`send_held` then `flush_held`, called by the session's hub): one
# wake-up of the writer task — one loop pass — fewer per publish (issue 32: ~5 a trivial
# turn). Frames are still queued first, so the bound, the order and a paused socket are
# the queue's as before. Off: every frame wakes the writer (tests run both).
DIRECT_PUBLISH = True


class Connection:
    def __init__(
        self,
        ws: Channel,
        state: AppState,
        dispatcher: Dispatcher,
        principal: str,
        teams: frozenset[str] = frozenset(),
        token_hash: str | None = None,
        socket: FrameSocket | None = None,
        receive: Callable[[], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        self.id = f"conn_{uuid.uuid4().hex[:12]}"
        self.token_hash = token_hash  # the token it was opened with (revocation, issue 28 item 3)
        self.ws = ws
        self.socket = socket  # frames go straight to it, several at once (else `ws.send_text`)
        self._receive = receive  # the server's own ASGI `receive` (else `ws.receive_text`)
        self.state = state
        self.dispatcher = dispatcher
        self.principal = principal
        self.teams = teams
        self.initialized = False
        # What it may be sent, by update kind or `_agentd/` method, asked once per kind: the
        # hub asks for every frame (cleared when `initialize` sets what it asks for).
        self._supports: dict[str, bool] = {}
        self.client_capabilities = ClientCapabilities()
        self.opt_in = OptIn()  # what of agentd's own notifications it asked for (none: stock ACP)
        self.sessions: set[str] = set()  # attached session ids
        self._out = OutgoingQueue(state.settings.client_buffer_frames)
        # A notification already encoded once for every client of the session (the same
        # text `send_notification` would queue); False when full or closed: the queue's own
        # call, so the hub queues a frame in one call.
        self.send_encoded = self._out.offer  # type: ignore[method-assign, assignment]
        # `supports_update`'s answers by kind, cleared in place when `initialize` sets what
        # it asks: the hub reads it per frame (`Subscriber`) without a call.
        self.supports_cache = self._supports
        self._urgent: collections.deque[bytes] = collections.deque()
        self._pending: dict[int | str, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        # In-flight requests by id, and those the client cancelled (`$/cancel_request`).
        self._requests: dict[int | str, asyncio.Task[None]] = {}
        self._cancelled: set[int | str] = set()
        self.closed = False
        self._ctx: CallContext | None = None
        self._idle = False  # the batched writer waits, holding no frame (`DIRECT_REPLY`)
        self._loop: asyncio.AbstractEventLoop | None = None  # set by `serve`
        # The hub's pair for a publish (`DIRECT_PUBLISH`): queue without waking the writer,
        # then send what was queued (or wake the writer) once the publish is done.
        if DIRECT_PUBLISH and socket is not None:
            self.send_held: Callable[[bytes], bool] | None = self._out.hold
            self.flush_held: Callable[[], None] | None = self._flush_held
        else:
            self.send_held = self.flush_held = None

    # ------------------------------------------------------------------ outgoing

    def send_message(self, message: dict[str, Any]) -> bool:
        if self.closed:
            return False
        try:
            self._out.put_nowait(orjson.dumps(message))
            return True
        except asyncio.QueueFull:
            return False

    if TYPE_CHECKING:
        client_capabilities: ClientCapabilities
        opt_in: OptIn
    else:
        # Set by `initialize`, which clears the per-kind answers; read per turn (a plain
        # attribute read: the descriptor has no `__get__`).
        client_capabilities = _ClearsAnswers()
        opt_in = _ClearsAnswers()

    def supports_update(self, session_update: str) -> bool:
        """A `session/update` kind (gated by ACP's client capabilities), or an `_agentd/`
        notification (only if the client opted in at `initialize`)."""
        known = self._supports.get(session_update)
        if known is None:
            if session_update.startswith(AGENTD_PREFIX):
                known = self.opt_in.wants(session_update)
            else:
                known = self.client_capabilities.supports_update(session_update)
            self._supports[session_update] = known
        return known

    def send_notification(self, method: str, params: dict[str, Any]) -> bool:
        if method.startswith(AGENTD_PREFIX) and not self.opt_in.wants(method):
            return True  # not for a stock client: dropped on purpose, not for lack of room
        if self.closed:
            return False
        try:
            self._out.put_nowait(encode_message(method, params))
            return True
        except asyncio.QueueFull:
            return False

    def send_encoded(self, text: bytes) -> bool:
        """(The class's face: every instance sends through its queue's `offer` itself.)"""
        return self._out.offer(text)

    def send_urgent(self, method: str, params: dict[str, Any]) -> None:
        """Goes out ahead of the (full) outgoing buffer: a `resync_required` must reach a
        client that fell behind even though nothing else fits any more."""
        if method.startswith(AGENTD_PREFIX) and not self.opt_in.wants(method):
            return
        if not self.closed:
            self._urgent.append(encode_message(method, params))
            if self._out.empty():
                # The writer may be waiting for a frame: without one it would not look at
                # the urgent frame until some other traffic came (a resync of an idle
                # client — lease lost, log unreachable — would never go out).
                self._out.put_nowait(_WAKE)

    async def send_replay(self, method: str, params: dict[str, Any]) -> bool:
        """A replay frame: awaits room in the replay window (paced by the socket), in
        order with everything else queued; False once closed."""
        if self.closed:
            return False
        if method.startswith(AGENTD_PREFIX) and not self.opt_in.wants(method):
            return True
        await self._out.put_replay(encode_message(method, params))
        return True

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request to the client and wait for its result (raises RpcError).
        Callers bound the wait themselves (`asyncio.timeout`)."""
        if self.closed:
            raise RpcError(ErrorCode.CONNECTION_CLOSED, "connection closed")
        req_id = f"agentd-{next(self._ids)}"
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[req_id] = fut
        try:
            if not self.send_message(request(req_id, method, params)):
                raise RpcError(ErrorCode.CONNECTION_CLOSED, "client buffer full")
            return await fut
        finally:
            self._pending.pop(req_id, None)

    def _writer(self) -> Coroutine[Any, Any, None]:
        """The writer task's coroutine itself (not one awaiting it: every resumption of a
        coroutine in between is one more Python call per write)."""
        return self._send_each() if self.socket is None else self._write_batched(self.socket)

    async def _send_each(self) -> None:
        """The library path: one `send_text` per frame."""
        burst = 0  # frames sent since this task last let others run
        while True:
            if self._urgent:
                frame = self._urgent.popleft()
            elif self._out.empty():
                burst = 0  # the get below waits: the other writers run meanwhile
                frame = await self._out.get()
            else:
                frame = self._out.get_nowait()
            if frame is _CLOSE:
                return
            if frame is _WAKE:
                continue
            # (decoded here: the queue holds the bytes a socket takes, `_write_batched`)
            await self.ws.send_text(frame.decode())  # returns without waiting while the socket takes it
            burst += 1
            if burst >= WRITER_SLICE:
                # Let the other clients' writers send theirs: a session's burst of frames
                # then reaches all its clients together instead of one client after another.
                burst = 0
                await asyncio.sleep(0)

    async def _write_batched(self, socket: FrameSocket) -> None:
        """What is ready goes in one write, in order, up to `WRITER_SLICE` frames (never
        waiting for more: a lone frame leaves alone). For a client that fell behind (frames
        still queued after this write's, or its socket paused) consecutive text chunks
        go as one (`merge_chunks`, unless `ws_merge_chunks` is off)."""
        out = self._out
        queued, urgent, ready = out.queued, self._urgent, socket.ready
        take, write = out.take, socket.write
        merge = self.state.settings.ws_merge_chunks
        burst = 0  # frames sent since this task last let others run
        while True:
            if not queued and not urgent:
                burst = 0  # waiting: the other writers run meanwhile
                self._idle = True
                await out.waiter()
                self._idle = False
            behind = False
            if not ready.is_set():
                # Paused: one frame held here, as `send_text` would hold it — the queue's
                # bound still counts everything else. Then what is ready goes with it.
                held = urgent.popleft() if urgent else out.get_nowait()
                if held is _CLOSE:
                    return
                await ready.wait()
                frames, closing = self._ready([] if held is _WAKE else [held])
                behind = True
            elif urgent:
                frames, closing = self._ready([])
            else:
                frames, closing = take(WRITER_SLICE), False
                if _CLOSE in frames or _WAKE in frames:  # (rare: a test's end, an urgent wake-up)
                    frames, closing = _unmarked(frames)
            burst += len(frames)
            if merge and (behind or queued) and len(frames) > 1:
                frames = merge_chunks(frames)
            if frames:
                write(frames)
            if closing:
                return
            if burst >= WRITER_SLICE:
                # Let the other clients' writers send theirs: a session's burst of frames
                # then reaches all its clients together instead of one client after another.
                burst = 0
                await asyncio.sleep(0)

    def _flush_held(self) -> None:
        """After a publish queued its frames with `send_held`: with the writer waiting idle
        (nothing held, nothing urgent), the socket taking data and no replay or end marker
        queued, they go out now in one write — what the writer would do on waking, without
        waking it; else the writer is woken for them, as `offer` would have."""
        out = self._out
        queued = out.queued
        if not queued or defer_flush(self._flush_held):
            return
        if self._idle and not self._urgent and len(queued) <= WRITER_SLICE and not out.replays:
            socket = self.socket
            assert socket is not None  # (only a connection with a socket holds: `send_held`)
            if socket.ready.is_set() and _WAKE not in queued and _CLOSE not in queued:
                frames = list(queued)
                try:
                    socket.write(frames)
                except ConnectionError:
                    pass  # closing (nothing written): the writer meets the same end
                else:
                    out.take(len(frames))
                    return
        out.wake()

    def _ready(self, frames: list[bytes]) -> tuple[list[bytes], bool]:
        """`frames` and those queued behind it, urgent first, up to `WRITER_SLICE`; and
        whether the queue's end (`_CLOSE`) was reached."""
        urgent = self._urgent
        while urgent and len(frames) < WRITER_SLICE:
            frames.append(urgent.popleft())
        more, closing = _unmarked(self._out.take(WRITER_SLICE - len(frames)))
        frames += more
        return frames, closing

    # ------------------------------------------------------------------ incoming

    async def serve(self) -> None:
        # (kept: 3.11's `get_running_loop()` — in `asyncio.create_task` — is a getpid() call)
        loop = self._loop = asyncio.get_running_loop()
        writer = loop.create_task(self._writer())
        # Frames are read in a task of their own: awaiting the next one there resumes only
        # the reader's few frames, not the whole ASGI stack of middleware and routing the
        # endpoint runs in (a dozen coroutine resumptions per frame received).
        reader = loop.create_task(self._read(writer))
        try:
            await reader
        finally:
            reader.cancel()
            await self._close(writer)

    async def _read(self, writer: asyncio.Task[None]) -> None:
        if self._receive is not None:
            return await self._read_direct(self._receive, writer)
        while True:
            try:
                text = await self.ws.receive_text()
            except (WebSocketDisconnect, RuntimeError):
                return
            except KeyError:  # a binary frame: not JSON-RPC
                self.send_message(
                    error_response(
                        None, RpcError(ErrorCode.INVALID_REQUEST, "binary frames are not supported")
                    )
                )
                continue
            self._on_frame(text)
            if writer.done():
                return

    async def _read_direct(
        self, receive: Callable[[], Awaitable[dict[str, Any]]], writer: asyncio.Task[None]
    ) -> None:
        """`_read` on the server's own `receive`: Starlette's `receive_text` checks written out
        (three coroutine frames and a check call fewer per frame received). Same outcomes: a
        text frame is handled, a binary one refused, the end (disconnect, or this side closed)
        ends the reading; the WebSocket's states are kept as Starlette keeps them."""
        ws = cast(WebSocket, self.ws)
        while ws.application_state is WebSocketState.CONNECTED:
            message = await receive()
            kind = message["type"]
            if kind != "websocket.receive":  # the end (Starlette refuses any other message too)
                if kind == "websocket.disconnect":
                    ws.client_state = WebSocketState.DISCONNECTED
                return
            if "text" not in message:  # a binary frame: not JSON-RPC
                err = RpcError(ErrorCode.INVALID_REQUEST, "binary frames are not supported")
                self.send_message(error_response(None, err))
                continue
            self._on_frame(message["text"])
            if writer.done():
                return

    def _on_frame(self, text: str) -> None:
        limit = self.state.settings.max_frame_bytes
        if len(text) > limit // 4 and len(text.encode()) > limit:
            err = RpcError(ErrorCode.INVALID_REQUEST, f"frame larger than {limit} bytes")
            self.send_message(error_response(None, err))
            return
        try:
            raw = orjson.loads(text)  # (`read_message`'s parse, inline)
        except orjson.JSONDecodeError:
            raw = None
        kind = type(raw)  # decoded from JSON: compared by type, keys tested with `in`
        if raw is None or (kind is list and not raw):  # not JSON, or an empty batch
            problem = read_message(text)  # (its answer; JSON's `null` is a message like any)
            if type(problem) is RpcError:
                self.send_message(error_response(None, problem))
                return
        elif kind is list:
            self._spawn(self._handle_batch(raw))
            return
        req_id: Any = None
        if kind is dict:
            if "method" not in raw:
                if "result" in raw or "error" in raw:
                    self._on_response(raw)
                    return
            elif "id" in raw:
                req_id = raw["id"]
            elif raw["method"] == CANCEL_REQUEST:
                self._cancel_request(raw["params"] if "params" in raw else None)
                return
        id_kind = type(req_id)
        # A frame with fewer brackets than the depth limit needs no depth walk (`within_depth`).
        shallow = kind is dict and within_depth(text, self.state.settings.max_json_depth)
        # (`_spawn`, written out: one call less per request)
        coro = self._handle_one(raw, req_id if id_kind in _ID_KINDS else None, shallow)
        loop = self._loop
        task = loop.create_task(coro) if loop is not None else asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if id_kind is int or id_kind is str:  # (a bool is no request id)
            self._requests[req_id] = task

    def _cancel_request(self, params: Any) -> None:
        """`$/cancel_request {requestId}`: the request is abandoned and answered -32800. A
        prompt's turn goes on (it belongs to the session, which other clients may watch):
        `session/cancel` stops a turn."""
        req_id = params.get("requestId") if isinstance(params, dict) else None
        task = self._requests.get(req_id) if isinstance(req_id, (int, str)) else None
        if task is None or task.done():
            return  # finished already, or never seen: nothing to do (it is a notification)
        self._cancelled.add(req_id)  # type: ignore[arg-type]
        task.cancel()

    def _on_response(self, raw: dict[str, Any]) -> None:
        problem = response_problem(raw)
        if problem is not None:
            # A malformed response is the client's bug, not a reason to drop it: say so
            # (JSON-RPC's Invalid Request) and keep serving the connection.
            log.info("%s: malformed response: %s", self.id, problem)
            self.send_message(error_response(None, RpcError(ErrorCode.INVALID_REQUEST, problem)))
            pending = raw.get("id")
            fut = self._pending.get(pending) if isinstance(pending, (int, str)) else None
            if fut is not None and not fut.done():
                fut.set_exception(RpcError(ErrorCode.INVALID_REQUEST, f"the client answered: {problem}"))
            return
        fut = self._pending.get(raw.get("id"))  # type: ignore[arg-type]
        if fut is None or fut.done():
            log.info("%s: response to unknown request id %r", self.id, raw.get("id"))
            return
        if raw.get("error") is not None:
            err = raw["error"]
            fut.set_exception(RpcError(int(err["code"]), str(err.get("message", "error")), err.get("data")))
        else:
            fut.set_result(raw.get("result"))

    def _spawn(self, coro: Any) -> asyncio.Task[None]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _handle_batch(self, items: list[Any]) -> None:
        out = await self.dispatcher.handle_batch(items, self._context())
        if out and not self.closed:
            await self._out.put(orjson.dumps(out))

    async def _handle_one(self, raw: Any, req_id: int | str | None = None, shallow: bool = False) -> None:
        try:
            ctx = self._ctx or self._context()  # (made once: no call per request after the first)
            resp = await self.dispatcher.handle(raw, ctx, shallow=shallow)
        except asyncio.CancelledError:
            if req_id is None or req_id not in self._cancelled or self.closed:
                raise
            self._cancelled.discard(req_id)
            err = RpcError(ErrorCode.REQUEST_CANCELLED, "Request cancelled ($/cancel_request)")
            resp = error_response(req_id, err)
        finally:
            if req_id is not None and self._requests.get(req_id) is asyncio.current_task(self._loop):
                del self._requests[req_id]
        if resp is not None and not self.closed:
            text = orjson.dumps(resp)
            socket = self.socket
            # The writer waits holding nothing and nothing is queued: the reply goes in this
            # step, as the writer would send it alone (no wake-up of the writer task).
            if self._idle and DIRECT_REPLY and not self._out.queued and not self._urgent:
                assert socket is not None  # (only the batched writer is ever idle)
                if socket.ready.is_set():  # (paused: queued, for the writer's held-frame wait)
                    try:
                        socket.write([text])
                        return
                    except ConnectionError:
                        pass  # closing: queued instead, where the writer meets the same end
            # A response is never dropped: it awaits room (it may follow a long replay).
            await self._out.put(text)

    def _context(self) -> CallContext:
        """The context of this connection's calls: one for all of them (nothing in it changes
        per request, and its rate key is then worked out once)."""
        ctx = self._ctx
        if ctx is None:
            ctx = self._ctx = CallContext(
                state=self.state,
                principal=self.principal,
                connection=self,
                teams=self.teams,
                token_hash=self.token_hash,
            )
        return ctx

    async def _close(self, writer: asyncio.Task[None]) -> None:
        self.closed = True
        self._out.close()
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(RpcError(ErrorCode.CONNECTION_CLOSED, "connection closed"))
        for task in list(self._tasks):
            task.cancel()
        for session_id in list(self.sessions):
            await self.state.detach(session_id, self.id)
        writer.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await writer
