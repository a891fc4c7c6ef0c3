"""`GET /acp`: the WebSocket endpoint (R-P1)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, cast

from starlette.responses import JSONResponse
from starlette.websockets import WebSocket

from agentd.infra import CHALLENGE, AuthError, AuthUnavailable, chosen_subprotocol
from agentd.transport.guards import connection_key
from agentd.transport.revocation import CloseCode, CloseReason
from agentd.transport.socket_write import socket_for

_UVICORN_SANSIO = "uvicorn.protocols.websockets.websockets_sansio_impl"


def direct_receive(ws: WebSocket) -> Callable[[], Awaitable[dict[str, Any]]] | None:
    """uvicorn's own `receive` when the endpoint got it unwrapped (a bound method of its
    `websockets-sansio` protocol, whose messages `Connection._read_direct` knows); None
    otherwise (another server, or a middleware wrapped it): Starlette's `receive_text`."""
    receive = getattr(ws, "_receive", None)
    owner = getattr(receive, "__self__", None)
    if owner is None or type(owner).__module__ != _UVICORN_SANSIO:
        return None
    return cast(Callable[[], Awaitable[dict[str, Any]]], receive)


async def acp_endpoint(ws: WebSocket) -> None:
    state = ws.app.state.agentd
    try:
        identity = await state.auth.identify(ws.headers, ws.query_params)
    except AuthError as err:
        # Refused at the handshake with a readable HTTP 401 (R-X1), never accepted.
        body = {"error": "unauthorized", "detail": str(err)}
        await ws.send_denial_response(JSONResponse(body, status_code=401, headers=CHALLENGE))
        return
    except AuthUnavailable as err:  # no database connection free: retry, the token may be good
        busy = {"error": "overloaded", "detail": str(err), "retryAfter": err.retry_after}
        await ws.send_denial_response(JSONResponse(busy, status_code=503, headers=err.headers))
        return
    await ws.accept(subprotocol=chosen_subprotocol(ws.headers))
    # Here, not at the top: the connection (and the wire models it uses) loads with the
    # first client, not in an idle server (issue 32 item 3).
    from agentd.transport.connection import Connection

    conn = Connection(
        ws,
        state,
        state.dispatcher,
        principal=identity.principal,
        teams=identity.teams,
        token_hash=identity.token_hash,
        socket=socket_for(ws.scope),  # under uvicorn: frames straight to the socket, batched
        receive=direct_receive(ws) if state.settings.ws_direct_read else None,
    )

    async def close_revoked() -> None:
        # The reader then sees the client's close and ends the connection as usual.
        with contextlib.suppress(RuntimeError):  # already closing
            await ws.close(code=CloseCode.TOKEN_REVOKED, reason=CloseReason.TOKEN_REVOKED)

    forget = state.live_tokens.register(identity.token_hash, close_revoked)
    try:
        await conn.serve()
    finally:
        forget()
        state.rate_limiter.forget(connection_key(conn.id))
