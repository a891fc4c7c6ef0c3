"""A small JSON-RPC-over-WebSocket test client (real socket, `websockets` library).

It records every frame the server sent (for schema validation), routes responses to
their callers, and answers server→client requests through a pluggable handler.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import websockets

from agentd.protocol.agentd import AGENTD_CLIENT

RequestHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]


class RpcFailed(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.error = error
        self.code = error.get("code")


def retry_after(error: dict[str, Any]) -> float | None:
    """The seconds a refusal asks the client to wait before trying again (`data.retryAfter`:
    an overloaded database, a rate limit, a stopping session), None for a final error."""
    data = error.get("data")
    wait = data.get("retryAfter") if isinstance(data, dict) else None
    return float(wait) if isinstance(wait, int | float) else None


def is_retryable(error: dict[str, Any]) -> bool:
    """Whether a refusal says to send the request again (`data.retryable`: e.g. a session
    whose reload the database refused, which the next request loads again)."""
    data = error.get("data")
    return isinstance(data, dict) and data.get("retryable") is True


def error_kind(exc: BaseException) -> str:
    """A failure said as its kind, for counting: `-32019 db_pool`, `timeout`, an exception's type."""
    if isinstance(exc, RpcFailed):
        data = exc.error.get("data")
        detail = (data.get("limit") or data.get("reason")) if isinstance(data, dict) else None
        return f"{exc.code} {detail}" if detail else str(exc.code)
    if isinstance(exc, TimeoutError):
        return "timeout"
    return type(exc).__name__


class AnswerError(Exception):
    """Raised by an `on_request` handler: the client answers the server's request with it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class WsClient:
    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.frames: list[dict[str, Any]] = []  # everything the server sent, in order
        self.sent_methods: dict[Any, str] = {}  # our request id → method (for validation)
        self.notifications: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.server_requests: list[dict[str, Any]] = []
        self.on_request: RequestHandler | None = None
        self._waiters: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._unmatched: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._answering: set[asyncio.Task[None]] = set()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(
        cls, base_url: str, *, initialize: bool = True, token: str | None = None,
        open_timeout: float = 10.0, **caps: Any,
    ) -> WsClient:  # fmt: skip
        """A client on `/acp`, initialized unless told not to; `token` authenticates it
        (the `?token=` a browser uses); `caps` are its client capabilities. `open_timeout`:
        the wait for the opening handshake (a burst of connections queues for longer)."""
        url = base_url.replace("http://", "ws://") + "/acp" + (f"?token={token}" if token else "")
        ws = await websockets.connect(url, max_size=None, open_timeout=open_timeout)
        client = cls(ws)
        if initialize:
            await client.call(
                "initialize", {"protocolVersion": 1, "clientCapabilities": caps or {}, "_meta": AGENTD_CLIENT}
            )
        return client

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()

    async def _read(self) -> None:
        try:
            async for text in self.ws:
                msg = json.loads(text)
                self.frames.append(msg)
                if isinstance(msg, list):
                    await self._unmatched.put(msg)  # type: ignore[arg-type]
                elif "method" in msg and "id" in msg:
                    self.server_requests.append(msg)
                    task = asyncio.create_task(self._answer(msg))
                    self._answering.add(task)
                    task.add_done_callback(self._answering.discard)
                elif "method" in msg:
                    await self.notifications.put(msg)
                elif msg.get("id") in self._waiters:
                    waiter = self._waiters.pop(msg["id"])
                    if not waiter.done():  # the caller may have given up (timeout, cancel)
                        waiter.set_result(msg)
                else:
                    await self._unmatched.put(msg)
        except websockets.ConnectionClosed:
            pass

    async def _answer(self, msg: dict[str, Any]) -> None:
        if self.on_request is None:
            return  # leave it pending (a client that never answers)
        try:
            result = await self.on_request(msg)
        except AnswerError as err:  # the client answers with a JSON-RPC error
            error = {"code": err.code, "message": err.message}
            await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": error}))
            return
        if result is not None:
            await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}))

    async def request(self, method: str, params: dict[str, Any] | None = None, *, id: Any = None) -> dict:
        """Send a request and return the whole response message."""
        req_id = next(self.ids) if id is None else id
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiters[req_id] = fut
        self.sent_methods[req_id] = method
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": req_id, "method": method}
        if params is not None:
            msg["params"] = params
        await self.ws.send(json.dumps(msg))
        return await asyncio.wait_for(fut, 60)

    async def call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        resp = await self.request(method, params, **kw)
        if "error" in resp:
            raise RpcFailed(resp["error"])
        return resp["result"]

    async def call_retrying(
        self, method: str, params: dict[str, Any] | None = None, *, attempts: int = 30,
        retried: Counter[str] | None = None,
    ) -> Any:  # fmt: skip
        """`call`, trying again after the wait a refusal names (`retryAfter`, capped at 5 s),
        at most `attempts` times; each retry is counted by kind in `retried`."""
        for attempt in range(attempts):
            try:
                return await self.call(method, params)
            except RpcFailed as exc:
                wait = retry_after(exc.error)
                if wait is None or attempt == attempts - 1:
                    raise
                if retried is not None:
                    retried[error_kind(exc)] += 1
                await asyncio.sleep(min(wait, 5.0))
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "method": method, "params": params}))

    async def send_raw(self, text: str) -> None:
        await self.ws.send(text)

    # `within` bounds a hang; it is not a timing assertion.
    async def next_unmatched(self, within: float = 10) -> Any:
        """The next response nobody waited for (replies to raw frames, batches)."""
        return await asyncio.wait_for(self._unmatched.get(), within)

    async def next_notification(self, within: float = 10) -> dict[str, Any]:
        return await asyncio.wait_for(self.notifications.get(), within)

    async def wait_notification(
        self, predicate: Callable[[dict[str, Any]], bool], within: float = 15
    ) -> dict[str, Any]:
        async def scan() -> dict[str, Any]:
            while True:
                msg = await self.notifications.get()
                if predicate(msg):
                    return msg

        return await asyncio.wait_for(scan(), within)

    def updates(self, session_id: str | None = None, *, commands: bool = False) -> list[dict[str, Any]]:
        """Every `session/update` payload received so far, in order. The session-level
        `available_commands_update` is left out unless `commands` is true."""
        return [
            f["params"]["update"]
            for f in self.frames
            if isinstance(f, dict)
            and f.get("method") == "session/update"
            and (session_id is None or f["params"]["sessionId"] == session_id)
            and (commands or f["params"]["update"].get("sessionUpdate") != "available_commands_update")
        ]


def allow(option: str = "allow_once") -> RequestHandler:
    async def handler(msg: dict[str, Any]) -> dict[str, Any]:
        return {"outcome": {"outcome": "selected", "optionId": option}}

    return handler


def text_prompt(session_id: str, text: str, **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    if meta:
        params["_meta"] = {"agentd": meta}
    return params


def agent_text(updates: list[dict[str, Any]]) -> str:
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://") + "/acp"


async def ws_client(base: str, **connect_kw: Any) -> WsClient:
    ws = await websockets.connect(ws_url(base), max_size=None, **connect_kw)
    client = WsClient(ws)
    await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}, "_meta": AGENTD_CLIENT})
    return client
