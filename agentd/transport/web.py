"""agentd's own web page: `/` and its ES modules under `/static/<version>/` (issue 17).

The files are read once, at the first request, from `agentd/web` (packaged in the wheel).
`<version>` is a digest of every asset, so an asset URL never changes meaning: assets are
cached for a year (`immutable`) and a new release is a new URL; the page itself is
revalidated on every load. A request for another version still gets the current file,
uncached, so a page loaded before an upgrade keeps working.

The page holds no data and authenticates its own WebSocket; its Content-Security-Policy
allows only this origin's scripts, styles and socket, so text a model writes can never run.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from agentd.infra import AuthError, AuthMode

router = APIRouter()

WEB_DIR = Path(__file__).resolve().parent.parent / "web"
STATIC_DIR = WEB_DIR / "static"
SERVED_SUFFIXES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}

CSP = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",  # CSP 3: 'self' covers ws:// and wss:// to this host
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # `?token=` must not leak through a link
    "Cross-Origin-Opener-Policy": "same-origin",
}
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: str
    etag: str


@dataclass(frozen=True)
class Site:
    version: str
    index: Asset
    assets: dict[str, Asset]


def _asset(body: bytes, media_type: str) -> Asset:
    return Asset(body, media_type, '"' + hashlib.sha256(body).hexdigest()[:32] + '"')


@functools.cache
def site() -> Site:
    assets: dict[str, Asset] = {}
    for path in sorted(STATIC_DIR.rglob("*")):
        media_type = SERVED_SUFFIXES.get(path.suffix)
        if media_type is None or not path.is_file():
            continue
        assets[path.relative_to(STATIC_DIR).as_posix()] = _asset(path.read_bytes(), media_type)
    digest = hashlib.sha256()
    for name, asset in assets.items():
        digest.update(name.encode() + b"\0" + asset.etag.encode())
    version = digest.hexdigest()[:16]
    html = (WEB_DIR / "index.html").read_text().replace("{{static}}", f"/static/{version}")
    return Site(version, _asset(html.encode(), "text/html; charset=utf-8"), assets)


def _respond(request: Request, asset: Asset, cache: str, extra: dict[str, str] | None = None) -> Response:
    headers = {"ETag": asset.etag, "Cache-Control": cache, **SECURITY_HEADERS, **(extra or {})}
    if asset.etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)


@router.get(
    "/",
    summary="agentd's web page: watch sessions, prompt, manage the queue, answer permissions",
    response_class=Response,
    responses={200: {"description": "The page (HTML)", "content": {"text/html": {}}}},
)
async def index(request: Request) -> Response:
    return _respond(request, site().index, REVALIDATE, {"Content-Security-Policy": CSP})


async def static(request: Request) -> Response:
    # A plain Starlette route: FastAPI's parameter analysis would load `pydantic.v1` at import.
    version, name = request.path_params["version"], request.path_params["name"]
    current = site()
    asset = current.assets.get(name)
    if asset is None:
        return Response("not found", status_code=404, media_type="text/plain", headers=SECURITY_HEADERS)
    return _respond(request, asset, IMMUTABLE if version == current.version else REVALIDATE)


router.add_route("/static/{version}/{name:path}", static, methods=["GET"], include_in_schema=False)


async def auth_check(request: Request) -> Response:
    """The page's sign-in: whether this server wants a token and whether the one in the
    `Authorization` header (never the URL) is good. Always 200, with a readable `detail`,
    so a wrong token is an answer on the sign-in screen, not a failed request."""
    state = request.app.state.agentd
    required = state.auth.mode is not AuthMode.NONE
    headers = {"Cache-Control": "no-store", **SECURITY_HEADERS}
    try:
        identity = await state.auth.identify(request.headers, {})
    except AuthError as exc:
        return JSONResponse({"required": required, "ok": False, "detail": str(exc)}, headers=headers)
    return JSONResponse({"required": required, "ok": True, "principal": identity.principal}, headers=headers)


router.add_route("/auth/check", auth_check, methods=["POST"], include_in_schema=False)

__all__ = ["CSP", "router", "site"]
