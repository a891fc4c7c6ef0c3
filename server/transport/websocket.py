"""`GET /acp`: the WebSocket endpoint (R-P1)."""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.websockets import WebSocket

from server.auth import CHALLENGE, AuthError, chosen_subprotocol
from server.transport.connection import Connection


async def acp_endpoint(ws: WebSocket) -> None:
    state = ws.app.state.agentd
    try:
        principal = await state.principal_for(ws.headers, ws.query_params)
    except AuthError as err:
        # Refused at the handshake with a readable HTTP 401 (R-X1), never accepted.
        body = {"error": "unauthorized", "detail": str(err)}
        await ws.send_denial_response(JSONResponse(body, status_code=401, headers=CHALLENGE))
        return
    await ws.accept(subprotocol=chosen_subprotocol(ws.headers))
    conn = Connection(ws, state, state.dispatcher, principal=principal)
    await conn.serve()
