"""What a client sends a Connection (agentd/transport/connection.py): frames read in a task
of their own, each request handled in its own task (a reader awaiting a prompt inline would
deadlock on the cancel or permission reply that must follow it) and answered — in its
handler's step when the writer waits idle (`DIRECT_REPLY`), else through the queue — the
client's responses to agentd's own requests, and `$/cancel_request`. A mixin of
`Connection`: its methods are the connection's own (no call layer more per frame)."""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

import orjson
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from agentd.protocol import CANCEL_REQUEST, ErrorCode, RpcError, error_response
from agentd.transport.guards import within_depth
from agentd.transport.rpc import read_message, response_problem
from agentd.transport.state import CallContext

if TYPE_CHECKING:
    from agentd.transport.conn_parts import Channel, FrameSocket
    from agentd.transport.connection import Connection
    from agentd.transport.outgoing import OutgoingQueue
    from agentd.transport.rpc import Dispatcher
    from agentd.transport.state import AppState

log = logging.getLogger(__name__)

_ID_KINDS = frozenset({int, str, bool})  # what `isinstance(id, (int, str))` takes from JSON
# A request's reply written in its handler's step when the writer task waits with nothing
# queued (`_handle_one`): one wake-up of the writer fewer per request. Off: every reply
# goes through the queue (tests run both).
DIRECT_REPLY = True


class IncomingFrames:
    """The reading half of a Connection: what it reads of the connection is declared here."""

    if TYPE_CHECKING:
        id: str
        ws: Channel
        socket: FrameSocket | None
        state: AppState
        dispatcher: Dispatcher
        principal: str
        teams: frozenset[str]
        token_hash: str | None
        closed: bool
        _receive: Callable[[], Awaitable[dict[str, Any]]] | None
        _loop: asyncio.AbstractEventLoop | None
        _out: OutgoingQueue
        _urgent: collections.deque[bytes]
        _idle: bool
        _ctx: CallContext | None
        _pending: dict[int | str, asyncio.Future[Any]]
        _tasks: set[asyncio.Task[None]]
        _requests: dict[int | str, asyncio.Task[None]]
        _cancelled: set[int | str]

        def send_message(self, message: dict[str, Any]) -> bool: ...

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
        self._tasks.add(task)  # (left in `_handle_one`'s last step: no done-callback)
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
        # A task cancelled before its first step never runs `_handle_one`'s `finally`.
        task.add_done_callback(self._tasks.discard)
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
        task = asyncio.current_task(self._loop)
        try:
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
                if req_id is not None and self._requests.get(req_id) is task:
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
        finally:
            # Out of the set in its own last step, not by a done-callback: the callback
            # costs a loop pass after every reply (issue 32).
            self._tasks.discard(task)

    def _context(self) -> CallContext:
        """The context of this connection's calls: one for all of them (nothing in it changes
        per request, and its rate key is then worked out once)."""
        ctx = self._ctx
        if ctx is None:
            ctx = self._ctx = CallContext(
                state=self.state,
                principal=self.principal,
                connection=cast("Connection", self),
                teams=self.teams,
                token_hash=self.token_hash,
            )
        return ctx


__all__ = ["DIRECT_REPLY", "IncomingFrames"]
