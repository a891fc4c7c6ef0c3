"""`/openapi.json`, `/docs`, `/redoc`: the API description, behind a token when auth is
on (R-X1) — it maps every route of a server an outsider has no business probing. FastAPI's
own routes cannot be guarded, so the app turns them off and these replace them.

A browser opening `/docs?token=...` cannot send a header from the page it gets, so the
page fetches the schema with the same `?token=` (redacted from the access log).
"""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import JSONResponse, Response

from agentd.infra import CHALLENGE, AuthError

docs_router = APIRouter(include_in_schema=False)


async def _refused(request: Request) -> Response | None:
    """A 401 with a readable body, or None when the caller may see the description."""
    try:
        await request.app.state.agentd.principal_for(request.headers, request.query_params)
    except AuthError as exc:
        return JSONResponse({"error": "unauthorized", "detail": str(exc)}, status_code=401, headers=CHALLENGE)
    return None


def _schema_url(request: Request) -> str:
    token = request.query_params.get("token")
    return "/openapi.json" + (f"?{urlencode({'token': token})}" if token else "")


@docs_router.get("/openapi.json")
async def openapi(request: Request) -> Response:
    return await _refused(request) or JSONResponse(request.app.openapi())


@docs_router.get("/docs")
async def swagger(request: Request) -> Response:
    return await _refused(request) or get_swagger_ui_html(
        openapi_url=_schema_url(request), title=f"{request.app.title} - docs"
    )


@docs_router.get("/redoc")
async def redoc(request: Request) -> Response:
    return await _refused(request) or get_redoc_html(
        openapi_url=_schema_url(request), title=f"{request.app.title} - ReDoc"
    )
