"""One client on `GET /acp`: JSON-RPC 2.0 in both directions over WebSocket text frames.

Every incoming request is handled in its own task (agentd/transport/incoming.py). Outgoing
frames go through a bounded queue drained by one writer task (agentd/transport/frame_writer.py),
so producers never await a slow socket. Replays (agentd/session/eventlog/replayer.py) and
responses are the exception: they await room instead (agentd/transport/outgoing.py), so they
are paced by the client and never dropped. This room: the connection's state, what the
session side calls to send (notifications, urgent frames, replays, requests to the client),
and its life (serve, close).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson

from agentd.protocol import AGENTD_PREFIX, ClientCapabilities, ErrorCode, OptIn, RpcError, request
from agentd.transport.conn_parts import _WAKE, Channel, FrameSocket, _ClearsAnswers
from agentd.transport.frame_writer import FrameWriter
from agentd.transport.incoming import IncomingFrames
from agentd.transport.outgoing import OutgoingQueue
from agentd.transport.render import encode_message

if TYPE_CHECKING:
    from agentd.transport.rpc import Dispatcher
    from agentd.transport.state import AppState, CallContext

# A publish's frames for a client whose batched writer waits idle go out in the publishing
# step, in one write (`send_held` then `flush_held`, called by the session's hub): one
# wake-up of the writer task — one loop pass — fewer per publish (issue 32: ~5 a trivial
# turn). Frames are still queued first, so the bound, the order and a paused socket are
# the queue's as before. Off: every frame wakes the writer (tests run both).
DIRECT_PUBLISH = True


class Connection(FrameWriter, IncomingFrames):
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
