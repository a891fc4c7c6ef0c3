"""`agentd acp --connect URL`: the editor's stdio relayed to a shared agentd server.

The editor talks to this process exactly as to a local `agentd acp`. When the WebSocket to
the server drops (network, server restart) the bridge tells the editor, reconnects with
backoff, initializes again, re-attaches every session from the last seq it forwarded and
re-sends the prompts still waiting for their answer under their `requestId` (the server
joins a prompt still running, or answers with the recorded outcome of one that ended) —
so the editor sees no gap and no duplicate (bookkeeping in `relay.py`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import uuid
from typing import Any, Protocol

import orjson
import websockets
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from agentd.protocol import (
    AGENTD_CLIENT,
    AGENTD_PREFIX,
    ErrorCode,
    Notification,
    OptIn,
    Served,
    notification,
    outgoing,
)
from agentd.transport.relay import RelayState, Verdict

log = logging.getLogger(__name__)

BACKOFF_FIRST_S = 0.2
BACKOFF_MAX_S = 10.0
MAX_HELD = 1000  # editor messages held while the link is down
INTERNAL_PREFIX = "agentd-bridge-internal-"
NOT_SENT = -1  # the generation of an editor request still held


class Channel(Protocol):
    async def receive_text(self) -> str: ...
    async def send_text(self, text: str) -> None: ...


class LinkDown(Exception):
    pass


class Bridge:
    def __init__(self, url: str, token: str | None, editor: Channel, *, give_up_first: bool = False) -> None:
        self.url = url
        # `agentd chat`: a server it cannot reach at all is an error, not something to wait for.
        self.first_link: asyncio.Future[None] | None = None
        if give_up_first:
            self.first_link = asyncio.get_running_loop().create_future()
        self.headers = {"Authorization": f"Bearer {token}"} if token else None
        self.editor = editor
        self.state = RelayState()
        self.ws: Any = None
        self.up = asyncio.Event()
        self.init_params: dict[str, Any] | None = None
        self.notices = False  # the editor renders `notice` updates
        self.editor_opt_in = OptIn()  # the `_agentd/` notifications the editor asked for
        # Editor requests waiting for the server's answer: id → (message, generation sent).
        self.pending: dict[Any, tuple[dict[str, Any], int]] = {}
        # Editor messages waiting for the link: (text, request id or None).
        self.held: collections.deque[tuple[str, Any]] = collections.deque()
        self._internal: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self.closing = False

    # ---------------------------------------------------------------- to the editor

    async def to_editor(self, message: dict[str, Any]) -> None:
        await self.editor.send_text(orjson.dumps(message).decode())

    async def tell(self, title: str, severity: str) -> None:
        """A line in every tracked session's transcript (a `notice` where the editor shows them)."""
        for session_id in list(self.state.last_seq):
            if self.notices:
                update: dict[str, Any] = {"sessionUpdate": "notice", "severity": severity, "title": title}
            else:
                update = {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": f"\n[{title}]\n"},
                    "messageId": f"bridge_{uuid.uuid4().hex[:12]}",
                }
            frame = outgoing.session_update(session_id, update, None)
            await self.to_editor(notification(frame.method, frame.params))

    async def fail(self, req_id: Any, message: str) -> None:
        err = {"code": int(ErrorCode.CONNECTION_CLOSED), "message": message}
        await self.to_editor({"jsonrpc": "2.0", "id": req_id, "error": err})

    # ---------------------------------------------------------------- editor → server

    async def from_editor(self, text: str) -> None:
        try:
            msg = orjson.loads(text)
        except orjson.JSONDecodeError:
            msg = None
        req_id = None
        if isinstance(msg, dict):
            if "method" not in msg and "id" in msg:  # the editor answers a server request
                await self._editor_answer(msg)
                return
            text = self._prepare(msg) or text
            req_id = msg.get("id") if "method" in msg else None
        await self._send(text, req_id)

    def _prepare(self, msg: dict[str, Any]) -> str | None:
        """Note what a request means for the relay; returns the text to send if changed."""
        method, params = msg.get("method"), msg.get("params")
        params = params if isinstance(params, dict) else {}
        session_id = params.get("sessionId")
        changed = False
        if method == Served.INITIALIZE:
            # The editor gets agentd's own notifications only if it asked; the bridge itself
            # asks for all of them (it follows snapshots and resyncs) and filters.
            raw_meta = params.get("_meta")
            meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
            self.editor_opt_in = OptIn.of(meta)
            params = {**params, "_meta": {**meta, **AGENTD_CLIENT}}
            msg["params"] = params
            changed = True
            self.init_params = params
            caps = params.get("clientCapabilities") or {}
            session_caps = caps.get("session") if isinstance(caps, dict) else None
            self.notices = isinstance(session_caps, dict) and session_caps.get("notices") is not None
        elif method == Served.SESSION_LOAD and isinstance(session_id, str):
            self.state.reload(session_id)
        elif method in (Served.SESSION_PROMPT, Served.ENQUEUE) and isinstance(session_id, str):
            meta = params.setdefault("_meta", {})
            agentd = meta.setdefault("agentd", {}) if isinstance(meta, dict) else None
            if isinstance(agentd, dict) and not agentd.get("requestId"):
                # A retry after a reconnect must not run the prompt twice.
                agentd["requestId"] = f"bridge_{uuid.uuid4().hex}"
                msg["params"] = params
                changed = True
        if isinstance(session_id, str) and method != Served.SESSION_NEW:
            self.state.track(session_id)
        if method is not None and "id" in msg:
            self.pending[msg["id"]] = (msg, NOT_SENT)
        return orjson.dumps(msg).decode() if changed else None

    async def _editor_answer(self, msg: dict[str, Any]) -> None:
        result = msg.get("result") if isinstance(msg.get("result"), dict) else None
        request = self.state.editor_answer(msg["id"], result)
        if request is None or request.generation != self.state.generation:
            return  # asked on a connection that is gone: the server asks again on re-attach
        await self._send(orjson.dumps({**msg, "id": request.server_id}).decode(), None)

    async def _send(self, text: str, req_id: Any) -> None:
        """Now if the link is up, else after the reconnect (in order)."""
        if self.up.is_set():
            try:
                await self.ws.send(text)
                self._sent(req_id)
                return
            except ConnectionClosed:
                pass
        if len(self.held) >= MAX_HELD:
            if req_id is not None:
                self.pending.pop(req_id, None)
                await self.fail(req_id, "the connection to the agentd server is down")
            return
        self.held.append((text, req_id))

    def _sent(self, req_id: Any) -> None:
        if req_id is not None and req_id in self.pending:
            self.pending[req_id] = (self.pending[req_id][0], self.state.generation)

    # ---------------------------------------------------------------- server → editor

    async def from_server(self, text: str) -> None:
        msg = orjson.loads(text)
        if not isinstance(msg, dict):
            return
        method = msg.get("method")
        if method is None:
            await self._server_answer(msg)
        elif "id" in msg:
            editor_id, answer = self.state.server_request(msg["id"], method, msg.get("params"))
            if answer is not None:
                reply = {"jsonrpc": "2.0", "id": msg["id"], "result": answer}
                await self.ws.send(orjson.dumps(reply).decode())
            elif editor_id:
                await self.to_editor({**msg, "id": editor_id})
        else:
            if method == Notification.RESYNC_REQUIRED:
                self._spawn_attach(str((msg.get("params") or {}).get("sessionId", "")))
            verdict, params = self.state.notification(method, msg.get("params") or {})
            wanted = not str(method).startswith(AGENTD_PREFIX) or self.editor_opt_in.wants(str(method))
            if verdict is Verdict.FORWARD and wanted:
                await self.to_editor({**msg, "params": params})

    async def _server_answer(self, msg: dict[str, Any]) -> None:
        req_id = msg.get("id")
        if isinstance(req_id, str) and req_id.startswith(INTERNAL_PREFIX):
            fut = self._internal.pop(req_id, None)
            if fut is not None and not fut.done():
                fut.set_result(msg)
            return
        sent = self.pending.pop(req_id, None)
        if sent is not None and sent[0].get("method") == Served.SESSION_NEW:
            session_id = (msg.get("result") or {}).get("sessionId")
            if isinstance(session_id, str):
                self.state.track(session_id)
        await self.to_editor(msg)

    # ---------------------------------------------------------------- the link

    async def call_internal(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        req_id = f"{INTERNAL_PREFIX}{next(self._ids)}"
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._internal[req_id] = fut
        request = {"jsonrpc": "2.0", "id": req_id, "method": method, "params": params}
        await self.ws.send(orjson.dumps(request).decode())  # a text frame, as JSON-RPC needs
        async with asyncio.timeout(60):
            return await fut

    def _spawn_attach(self, session_id: str) -> None:
        async def attach() -> None:
            with contextlib.suppress(Exception):
                after = self.state.last_seq.get(session_id, 0)
                params = {"sessionId": session_id, "afterSeq": after}
                await self.call_internal(Served.ATTACH, params)

        if session_id:
            asyncio.get_running_loop().create_task(attach())

    async def _resume(self) -> None:
        """After a reconnect: the same client again, every session from where it was."""
        self.state.reconnected()
        if self.init_params is not None:
            await self.call_internal(Served.INITIALIZE, self.init_params)
        for session_id, after in list(self.state.last_seq.items()):
            answer = await self.call_internal(Served.ATTACH, {"sessionId": session_id, "afterSeq": after})
            if "error" in answer:
                log.warning("could not re-attach %s: %s", session_id, answer["error"])
        for req_id, (msg, generation) in list(self.pending.items()):
            if generation in (self.state.generation, NOT_SENT):
                continue  # held ones go out with the rest of the held messages
            if msg.get("method") in (Served.SESSION_PROMPT, Served.ENQUEUE):
                # Same requestId: a prompt joins or gets its outcome, an enqueue its position.
                self.pending[req_id] = (msg, self.state.generation)
                await self.ws.send(orjson.dumps(msg).decode())
            else:
                del self.pending[req_id]
                await self.fail(req_id, "the connection to the agentd server was lost; retry")

    async def run_link(self) -> None:
        delay = BACKOFF_FIRST_S
        connected_before = False
        while not self.closing:
            try:
                self.ws = await websockets.connect(
                    self.url, additional_headers=self.headers, max_size=None, open_timeout=10
                )
            except (OSError, InvalidHandshake, TimeoutError) as exc:
                if self.first_link is not None and not self.first_link.done():
                    self.first_link.set_exception(exc)
                    return
                log.info("cannot reach %s (%s); retrying in %.1fs", self.url, exc, delay)
                await asyncio.sleep(delay)  # backoff between attempts
                delay = min(delay * 2, BACKOFF_MAX_S)
                continue
            delay = BACKOFF_FIRST_S
            if self.first_link is not None and not self.first_link.done():
                self.first_link.set_result(None)
            reader = asyncio.create_task(self._read(self.ws))
            try:
                if connected_before:
                    await self._resume()
                    await self.tell("agentd: reconnected to the server", "info")
                connected_before = True
                while self.held and not reader.done():
                    text, req_id = self.held[0]
                    await self.ws.send(text)
                    self.held.popleft()
                    self._sent(req_id)
                self.up.set()
                await reader
            except (ConnectionClosed, TimeoutError, OSError, LinkDown) as exc:
                log.info("link error: %s", exc)
            finally:
                self.up.clear()
                reader.cancel()
                for fut in self._internal.values():
                    if not fut.done():
                        fut.set_exception(LinkDown())
                self._internal.clear()
                with contextlib.suppress(Exception):
                    await self.ws.close()
            if not self.closing:
                await self.tell("agentd: lost the connection to the server; reconnecting…", "warning")

    async def _read(self, ws: Any) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for text in ws:
                await self.from_server(text if isinstance(text, str) else text.decode())

    async def run(self) -> int:
        link = asyncio.create_task(self.run_link())
        try:
            while True:
                try:
                    text = await self.editor.receive_text()
                except Exception:  # end of input: the editor is gone
                    break
                await self.from_editor(text)
        finally:
            self.closing = True
            link.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await link
        return 0


def check_url(url: str) -> str | None:
    """A readable problem with a --connect URL, or None."""
    try:
        from websockets.uri import parse_uri

        parse_uri(url)
    except InvalidURI as exc:
        return f"--connect: {exc} (expected ws://host:port/acp or wss://…)"
    return None
