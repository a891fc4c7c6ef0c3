"""`agentd chat`'s connection: the chat is the "editor" of the same relay `agentd acp
--connect` uses (agentd/transport/bridge.py), so a dropped WebSocket is reconnected with
backoff, the session re-attached from the last seq seen, prompts and enqueues re-sent
under their requestId and a re-asked permission question joins the one on screen — the
chat sees one unbroken session, with no line twice and none missing."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

from websockets.exceptions import InvalidHandshake

from agentd.transport import Bridge

Handler = Callable[[dict[str, Any]], Awaitable[None] | None]


class ChatError(Exception):
    pass


class Link:
    """JSON-RPC over a `Bridge`: `call` for requests, the handlers for what the server sends."""

    def __init__(self, url: str, token: str | None, on_message: Handler) -> None:
        self.url = url
        self.on_message = on_message
        self.bridge = Bridge(url, token, self, give_up_first=True)
        self._inbox: asyncio.Queue[str | None] = asyncio.Queue()
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._task: asyncio.Task[int] | None = None

    # The bridge's editor side (its `Channel`).
    async def receive_text(self) -> str:
        text = await self._inbox.get()
        if text is None:
            raise EOFError  # the chat is leaving: the bridge stops
        return text

    async def send_text(self, text: str) -> None:
        msg = json.loads(text)
        if "method" not in msg:
            fut = self._pending.pop(msg.get("id"), None)
            if fut is not None and not fut.done():
                fut.set_result(msg)
            return
        result = self.on_message(msg)
        if result is not None:
            await result

    async def start(self) -> None:
        """Connect; ChatError when the server cannot be reached (or refuses us) at all."""
        self._task = asyncio.create_task(self.bridge.run())
        assert self.bridge.first_link is not None
        try:
            await self.bridge.first_link
        except (OSError, InvalidHandshake, TimeoutError) as exc:
            await self.close()
            raise ChatError(f"cannot connect to {self.url}: {exc}") from None

    async def close(self) -> None:
        self._inbox.put_nowait(None)
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ChatError("the chat is closing"))

    def _put(self, message: dict[str, Any]) -> None:
        self._inbox.put_nowait(json.dumps({"jsonrpc": "2.0", **message}))

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        req_id = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[req_id] = fut
        self._put({"id": req_id, "method": method, "params": params})
        msg = await fut
        if "error" in msg:
            raise ChatError(f"{method}: {msg['error'].get('message')}")
        result: dict[str, Any] = msg.get("result") or {}
        return result

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._put({"method": method, "params": params})

    def respond(self, req_id: Any, result: dict[str, Any]) -> None:
        self._put({"id": req_id, "result": result})
