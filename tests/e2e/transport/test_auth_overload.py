"""Issue 28 item 7: a token lookup that finds no database connection free answers 503 with
`Retry-After` on every route that authenticates — never a 500, never a 401 (the token is
good) — and everything works again once the pool has room."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from agentd.infra.auth import create_token
from agentd.infra.config import AuthMode
from tests.support.client import ws_url
from tests.support.server import scripted

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}


async def test_an_exhausted_pool_during_authentication_is_a_503_with_retry_after(
    server_factory, db_url: str, workspace: Path
) -> None:
    async with server_factory(
        scripted({"text": "ok"}, loop=True),
        database_url=db_url,
        auth=AuthMode.TOKEN,
        db_pool_size=2,
        db_pool_overflow=0,
        db_pool_timeout_s=0.2,
    ) as server:
        store = server.app.state.agentd.store
        token, _ = await create_token(store, "alice")
        auth = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30, headers=auth) as http:
            held = [await store.engine.connect() for _ in range(2)]  # every pooled connection busy
            try:
                answers = {
                    "POST /rpc": await http.post("/rpc", json=LIST),
                    "GET /metrics": await http.get("/metrics"),
                    "GET /openapi.json": await http.get("/openapi.json"),
                    "POST /acp": await http.post("/acp", json=INIT),
                    "GET /sessions/x/events": await http.get("/sessions/x/events"),
                    "POST /auth/check": await http.post("/auth/check"),
                }
                for route, answer in answers.items():
                    assert answer.status_code == 503, (route, answer.status_code, answer.text)
                    assert int(answer.headers["retry-after"]) >= 1, route
                    assert "overloaded" in answer.text, route
                rpc = answers["POST /rpc"].json()["error"]
                assert rpc["code"] == -32019 and rpc["data"]["retryable"] is True
                assert rpc["data"]["reason"] == "overloaded"
                with pytest.raises(InvalidStatus) as refused:
                    await websockets.connect(ws_url(server.base_url), additional_headers=auth)
                assert refused.value.response.status_code == 503
                assert int(refused.value.response.headers["Retry-After"]) >= 1
                # Health probes never touch the pool.
                assert (await http.get("/healthz")).status_code == 200
            finally:
                for conn in held:
                    await conn.close()
            # The same token works again at once: it was never refused as bad.
            assert (await http.post("/rpc", json=LIST)).json()["result"]["sessions"] == []
            assert (await http.get("/metrics")).status_code == 200
            ws = await websockets.connect(ws_url(server.base_url), additional_headers=auth)
            await ws.close()
