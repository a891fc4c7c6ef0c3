"""The `Origin` check (R-X4): a web page may talk to agentd only if its origin is listed.

Browsers attach `Origin` to every WebSocket handshake and cross-site POST, and neither is
stopped by CORS: without this check any page the user visits could open
`ws://127.0.0.1:8765/acp` (or POST a `text/plain` body to `/rpc`) and run commands in
their workspaces. Clients that are not browsers send no `Origin` and pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.responses import JSONResponse
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


def origin_allowed(origin: str | None, allowed: Iterable[str], host: str | None = None) -> bool:
    """No Origin (not a browser), a listed one, or the server's own pages (the Origin's
    host is the Host the request was sent to — which TrustedHostMiddleware pins to the
    loopback names when there is no auth, so a DNS-rebinding page cannot pass)."""
    if origin is None:
        return True
    listed = {normalize_origin(a) for a in allowed}
    if "*" in listed or normalize_origin(origin) in listed:
        return True
    own = urlsplit(origin.strip())
    return host is not None and own.scheme in ("http", "https") and own.netloc.lower() == host.lower()


class OriginGuard:
    """ASGI middleware: refuse HTTP requests and WebSocket handshakes from unlisted origins."""

    def __init__(self, app: ASGIApp, allowed: list[str]) -> None:
        self.app = app
        self.allowed = list(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = dict(scope["headers"])
            origin = headers.get(b"origin")
            host = headers.get(b"host")
            if not origin_allowed(
                origin.decode("latin-1") if origin is not None else None,
                self.allowed,
                host.decode("latin-1") if host is not None else None,
            ):
                shown = origin.decode("latin-1") if origin else ""
                body = {
                    "error": "origin_not_allowed",
                    "detail": f"origin {shown!r} is not in AGENTD_ALLOWED_ORIGINS",
                }
                # A WebSocket handshake gets the same 403 (Starlette sends it as a denial).
                await JSONResponse(body, status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)
