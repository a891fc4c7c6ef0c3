"""The `Origin` check (R-X4): a web page may talk to agentd only if its origin is listed.

Browsers attach `Origin` to every WebSocket handshake and cross-site POST, and neither is
stopped by CORS: without this check any page the user visits could open
`ws://127.0.0.1:8765/acp` (or POST a `text/plain` body to `/rpc`) and run commands in
their workspaces. Clients that are not browsers send no `Origin` and pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send


def normalize_origin(origin: str) -> str:
    """`scheme://host[:port]`, lower-cased, default ports dropped."""
    parts = urlsplit(origin.strip())
    if not parts.scheme or not parts.hostname:
        return origin.strip().lower()  # e.g. "null" (sandboxed frames, file://)
    default = {"http": 80, "https": 443, "ws": 80, "wss": 443}.get(parts.scheme.lower())
    port = f":{parts.port}" if parts.port and parts.port != default else ""
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme.lower()}://{host.lower()}{port}"


def origin_allowed(origin: str | None, allowed: Iterable[str]) -> bool:
    if origin is None:
        return True  # not a browser
    listed = {normalize_origin(a) for a in allowed}
    return "*" in listed or normalize_origin(origin) in listed


class OriginGuard:
    """ASGI middleware: refuse HTTP requests and WebSocket handshakes from unlisted origins."""

    def __init__(self, app: ASGIApp, allowed: list[str]) -> None:
        self.app = app
        self.allowed = list(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            origin = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"origin"), None)
            if not origin_allowed(origin, self.allowed):
                await self._refuse(scope, send, origin or "")
                return
        await self.app(scope, receive, send)

    async def _refuse(self, scope: Scope, send: Send, origin: str) -> None:
        body = orjson.dumps(
            {
                "error": "origin_not_allowed",
                "detail": f"origin {origin!r} is not in AGENTD_ALLOWED_ORIGINS",
            }
        )
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 403, "headers": headers})
            await send({"type": "http.response.body", "body": body})
        elif "websocket.http.response" in scope.get("extensions", {}):
            await send({"type": "websocket.http.response.start", "status": 403, "headers": headers})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008})
