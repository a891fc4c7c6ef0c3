"""`GET /acp`: the WebSocket endpoint (R-P1)."""

from __future__ import annotations

from starlette.websockets import WebSocket

from server.transport.connection import Connection


async def acp_endpoint(ws: WebSocket) -> None:
    state = ws.app.state.agentd
    await ws.accept()
    conn = Connection(ws, state, state.dispatcher, principal=state.principal_for(ws.headers))
    await conn.serve()
