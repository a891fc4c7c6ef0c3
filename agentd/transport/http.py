"""HTTP routes: `POST /rpc`, `/healthz`, `/readyz` (R-P1)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from agentd.infra import CHALLENGE, AuthError, AuthUnavailable, LimitKind, RetryReason, retry_later
from agentd.protocol import ErrorCode, RpcError, Served, error_response
from agentd.transport.rpc import read_message
from agentd.transport.state import CallContext
from agentd.transport.web import router as web_router

http_router = APIRouter()
http_router.include_router(web_router)  # `/` and the page's assets

# The body is read raw (a batch, bad JSON and oversized bodies get JSON-RPC errors, not
# FastAPI's 422), so the OpenAPI description of it is spelled out here.
_RPC_MESSAGE = {
    "type": "object",
    "required": ["jsonrpc", "method"],
    "properties": {
        "jsonrpc": {"const": "2.0"},
        "id": {"type": ["integer", "string"], "description": "absent for a notification"},
        "method": {
            "type": "string",
            "examples": [
                Served.SESSION_NEW.value,
                Served.SESSION_PROMPT.value,
                Served.SESSION_LIST.value,
            ],
        },
        "params": {"type": "object"},
    },
}
_RPC_RESPONSE = {
    "type": "object",
    "required": ["jsonrpc"],
    "properties": {
        "jsonrpc": {"const": "2.0"},
        "id": {"type": ["integer", "string", "null"]},
        "result": {},
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}},
        },
    },
}
RPC_OPENAPI: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "One JSON-RPC 2.0 request or notification, or a batch (a non-empty list of them)",
        "content": {
            "application/json": {
                "schema": {"oneOf": [_RPC_MESSAGE, {"type": "array", "minItems": 1, "items": _RPC_MESSAGE}]},
                "example": {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": Served.SESSION_NEW.value,
                    "params": {"cwd": "/home/me/project", "mcpServers": []},
                },
            }
        },
    },
    "responses": {
        "200": {
            "description": "The response (a list of them for a batch); errors are JSON-RPC errors",
            "content": {
                "application/json": {
                    "schema": {"oneOf": [_RPC_RESPONSE, {"type": "array", "items": _RPC_RESPONSE}]}
                }
            },
        },
        "204": {"description": "Only notifications were sent: no body"},
        "401": {"description": "A token is needed (AGENTD_AUTH=token): JSON-RPC error -32000"},
        "413": {"description": "The body is larger than AGENTD_MAX_FRAME_BYTES"},
    },
}


@http_router.post(
    "/rpc",
    summary="JSON-RPC 2.0 over HTTP (one request or a batch)",
    response_class=Response,
    openapi_extra=RPC_OPENAPI,
)
async def rpc(request: Request) -> Response:
    state = request.app.state.agentd
    try:
        identity = await state.auth.identify(request.headers, request.query_params)
    except AuthError as exc:
        err = RpcError(ErrorCode.AUTH_REQUIRED, str(exc))
        return JSONResponse(error_response(None, err), status_code=401, headers=CHALLENGE)
    body = await request.body()
    if len(body) > state.settings.max_frame_bytes:
        err = RpcError(ErrorCode.INVALID_REQUEST, "request body too large")
        return JSONResponse(error_response(None, err), status_code=413)
    raw = read_message(body)
    if isinstance(raw, RpcError):  # not JSON, or an empty batch
        return JSONResponse(error_response(None, raw))
    remote = request.client.host if request.client else None
    ctx = CallContext(
        state=state,
        principal=identity.principal,
        remote=remote,
        teams=identity.teams,
        token_hash=identity.token_hash,
    )
    resp = await state.dispatcher.answer(raw, ctx)
    if resp is None:  # only notifications
        return Response(status_code=204)
    return JSONResponse(resp)


async def auth_unavailable(request: Request, exc: Exception) -> Response:
    """The app's handler for a token lookup that found no database connection free (issue
    28 item 7): 503 with `Retry-After` on every HTTP route — a JSON-RPC `-32019` body on
    `/rpc` —, never a 500."""
    assert isinstance(exc, AuthUnavailable)
    if request.url.path == "/rpc":
        err = retry_later(LimitKind.DB_POOL, RetryReason.OVERLOADED, str(exc), retry_after=exc.retry_after)
        body: Any = error_response(None, err)
    else:
        body = {"error": "overloaded", "detail": str(exc), "retryAfter": exc.retry_after}
    return JSONResponse(body, status_code=503, headers=exc.headers)


@http_router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    state = request.app.state.agentd
    try:
        await state.principal_for(request.headers, request.query_params)  # a token, when auth is on
    except AuthError as exc:
        return JSONResponse({"error": "unauthorized", "detail": str(exc)}, status_code=401, headers=CHALLENGE)
    return Response(state.metrics.render(), media_type=state.metrics.content_type)


@http_router.get("/healthz", summary="Liveness")
async def healthz() -> JSONResponse:
    # A Response, not a dict: FastAPI's serializer would first import `pydantic.v1` (1.3 MiB
    # resident for good) to rule out a v1 model.
    return JSONResponse({"status": "ok"})


@http_router.get(
    "/readyz",
    summary="Readiness: database reachable, migrations current, session leases renewed (R-C1)",
)
async def readyz(request: Request) -> JSONResponse:
    """Also names the replica and reports its leases (agentd/session/replicas/leases.py, `health`):
    a replica whose lease renewals fail is not ready — it could not keep a session."""
    state = request.app.state.agentd
    leases = state.manager.leases.health()
    replica: dict[str, Any] = {"replica": leases.replica_id, "leases": leases.as_json()}
    if state.manager.closing:
        return JSONResponse(
            {"status": "draining", **replica, "detail": "the server is shutting down"}, status_code=503
        )
    store = state.store
    try:
        await asyncio.wait_for(store.ping(), timeout=5)
        current, head = await store.migration_status()
    except Exception as exc:
        return JSONResponse(
            {"status": "unavailable", "database": f"unreachable: {exc}", **replica}, status_code=503
        )
    body = {"database": "ok", "migration": current, "head": head, **replica}
    if current != head:
        return JSONResponse(
            {"status": "unavailable", **body, "detail": "migrations not current"}, status_code=503
        )
    if not leases.healthy:
        return JSONResponse({"status": "unavailable", **body, "detail": leases.detail}, status_code=503)
    # The group commit retrying a database it cannot reach: acknowledgements wait (issue 26).
    failing = state.writer.database_health()
    if failing:
        return JSONResponse(
            {"status": "unavailable", **body, "database": "failing", "detail": failing}, status_code=503
        )
    return JSONResponse({"status": "ok", **body})
