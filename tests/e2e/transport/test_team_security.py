"""Team deployments (R-X1, R-X3, R-X4): revoking a token ends the streams it opened, the
token never reaches the server's logs or the handshake response, the API description
needs a token, and without auth each connection has its own rate-limit bucket."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import httpx
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from agentd.infra.auth import create_token
from agentd.infra.config import AuthMode
from agentd.store.db import Store
from agentd.transport.revocation import CloseCode
from agentd.transport.sse import TOKEN_REVOKED
from tests.support.client import RpcFailed, WsClient, ws_client, ws_url
from tests.support.clock import FakeClock
from tests.support.server import scripted

LIMIT_EXCEEDED = -32019


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# ------------------------------------------------------------------------------ revocation


async def test_revoking_a_token_closes_its_open_websockets_within_seconds(
    server_factory, workspace: Path, db_url: str
) -> None:
    async with server_factory(
        scripted({"text": "hi"}, loop=True), database_url=db_url, auth=AuthMode.TOKEN, token_recheck_s=0.1
    ) as server:
        store = server.app.state.agentd.store
        alice_token, alice_record = await create_token(store, "alice")
        bob_token, _ = await create_token(store, "bob")
        by_header = await ws_client(server.base_url, additional_headers=bearer(alice_token))
        by_proto = await ws_client(server.base_url, subprotocols=["acp", f"agentd.bearer.{alice_token}"])
        bob = await ws_client(server.base_url, additional_headers=bearer(bob_token))

        # Revoked the way `agentd token revoke` does it: another process's connection to
        # the database, not a call into the server.
        outside = await Store.open(db_url)
        try:
            assert await outside.revoke_token(alice_record.id)
        finally:
            await outside.close()

        async with asyncio.timeout(10):  # bounds the wait; the close comes by itself
            await by_header.ws.wait_closed()
            await by_proto.ws.wait_closed()
        for client in (by_header, by_proto):
            assert client.ws.close_code == CloseCode.TOKEN_REVOKED == 4401
            assert client.ws.close_reason == "token revoked"
        # Another principal's connection is untouched and still served.
        assert (await bob.call("session/list", {}))["sessions"] == []
        assert server.app.state.agentd.live_tokens.count() == 1  # bob's only
        await bob.close()


async def test_revoking_a_token_ends_its_sse_streams(server_factory, workspace: Path) -> None:
    async with server_factory(
        scripted({"text": "hi"}),
        auth=AuthMode.TOKEN,
        token_recheck_s=0.1,
        workspace_grants={"alice": [workspace]},
    ) as server:
        store = server.app.state.agentd.store
        token, record = await create_token(store, "alice")
        params = {"cwd": str(workspace), "mcpServers": []}
        new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": params}
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            sid = (await http.post("/rpc", json=new, headers=bearer(token))).json()["result"]["sessionId"]
            events: list[str] = []
            async with (
                asyncio.timeout(10),
                http.stream("GET", f"/sessions/{sid}/events", params={"token": token}) as sse,
            ):
                assert sse.status_code == 200
                async for line in sse.aiter_lines():
                    if line.startswith("event:"):
                        events.append(line.removeprefix("event: "))
                        if len(events) == 1:  # the snapshot: the stream is live, now revoke
                            assert await store.revoke_token(record.id)
                # The loop ends because the server ended the stream.
            assert events[-1] == TOKEN_REVOKED
            again = await http.get(f"/sessions/{sid}/events", params={"token": token})
            assert again.status_code == 401


# ---------------------------------------------------------------- the token stays secret


async def test_the_token_never_reaches_the_server_logs(
    server_factory, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with server_factory(scripted({"text": "hi"}), auth=AuthMode.TOKEN) as server:
        # uvicorn logs requests at INFO (the level `agentd serve` runs at).
        for name in ("uvicorn.access", "uvicorn.error"):
            caplog.set_level(logging.INFO, logger=name)
        token, _ = await create_token(server.app.state.agentd.store, "alice")
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            assert (await http.get("/metrics", params={"token": token})).status_code == 200
            assert (await http.get(f"/openapi.json?a=1&token={token}&b=2")).status_code == 200
            assert (await http.get("/metrics", params={"token": token + "x"})).status_code == 401
        ws = await websockets.connect(ws_url(server.base_url) + f"?token={token}")
        await ws.close()
        with pytest.raises(InvalidStatus):
            await websockets.connect(ws_url(server.base_url) + f"?token={token}x")
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("uvicorn"))
    assert "GET /metrics?token=*** HTTP/1.1" in logged  # the lines are there...
    assert "/openapi.json?a=1&token=***&b=2" in logged
    assert "WebSocket /acp?token=***" in logged
    assert token not in logged  # ...without the token


async def test_the_handshake_never_echoes_the_token(server_factory) -> None:
    async with server_factory(scripted(), auth=AuthMode.TOKEN) as server:
        token, _ = await create_token(server.app.state.agentd.store, "alice")
        with_real = await websockets.connect(
            ws_url(server.base_url), subprotocols=["acp", f"agentd.bearer.{token}"]
        )
        only_token = await websockets.connect(
            ws_url(server.base_url), subprotocols=[f"agentd.bearer.{token}"]
        )
        try:
            assert with_real.response.headers.get_all("Sec-WebSocket-Protocol") == ["acp"]
            # Nothing but the credential offered: no protocol is chosen at all.
            assert only_token.response.headers.get_all("Sec-WebSocket-Protocol") == []
            for ws in (with_real, only_token):
                assert token not in str(ws.response.headers)
            client = WsClient(only_token)  # and the connection works
            await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        finally:
            await with_real.close()
            await only_token.close()


# ------------------------------------------------------------------ the API description


async def test_metrics_and_the_api_description_need_a_token_when_auth_is_on(server_factory) -> None:
    async with server_factory(scripted(), auth=AuthMode.TOKEN) as server:
        token, _ = await create_token(server.app.state.agentd.store, "alice")
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            for path in ("/metrics", "/docs", "/redoc", "/openapi.json"):
                for headers in ({}, bearer("agentd_wrong")):
                    refused = await http.get(path, headers=headers)
                    assert refused.status_code == 401, path
                    assert refused.headers["www-authenticate"] == "Bearer"
                    assert refused.json()["error"] == "unauthorized" and refused.json()["detail"]
                assert (await http.get(path, headers=bearer(token))).status_code == 200, path
            schema = (await http.get("/openapi.json", headers=bearer(token))).json()
            assert "/rpc" in schema["paths"] and "/openapi.json" not in schema["paths"]
            # A browser came with ?token=: the page fetches the schema the same way.
            page = await http.get("/docs", params={"token": token})
            assert page.status_code == 200 and f"/openapi.json?token={token}" in page.text
            # Health probes stay open for load balancers and orchestrators.
            assert (await http.get("/healthz")).status_code == 200
            assert (await http.get("/readyz")).status_code == 200


async def test_the_api_description_is_open_without_auth(server_factory) -> None:
    async with server_factory(scripted()) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            for path in ("/docs", "/redoc", "/openapi.json", "/metrics"):
                assert (await http.get(path)).status_code == 200, path


# -------------------------------------------------------------------------- rate limits


async def call_outcomes(client: WsClient, n: int) -> list[str]:
    out = []
    for _ in range(n):
        try:
            await client.call("session/list", {})
            out.append("ok")
        except RpcFailed as exc:
            assert exc.code == LIMIT_EXCEEDED
            out.append("limited")
    return out


async def test_without_auth_each_connection_has_its_own_rate_bucket(server_factory) -> None:
    # The limiter's clock stands still (a fake one): no refill, only the burst counts.
    clock = FakeClock()
    async with server_factory(scripted(), rate_limit_per_s=1.0, rate_limit_burst=3, clock=clock) as server:
        first = await server.client()  # `initialize` took one
        assert await call_outcomes(first, 3) == ["ok", "ok", "limited"]
        second = await server.client()  # a fresh bucket: initialize and 2 calls fit
        assert await call_outcomes(second, 3) == ["ok", "ok", "limited"]
        # Over HTTP the bucket is the remote address's, not any connection's.
        body = {"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            replies = [(await http.post("/rpc", json=body)).json() for _ in range(4)]
        codes = [reply.get("error", {}).get("code") for reply in replies]
        assert codes == [None, None, None, LIMIT_EXCEEDED]
        await first.close()
        await second.close()


async def test_with_auth_a_principal_has_one_bucket_across_connections(server_factory) -> None:
    async with server_factory(
        scripted(), auth=AuthMode.TOKEN, rate_limit_per_s=1.0, rate_limit_burst=3, clock=FakeClock()
    ) as server:
        store = server.app.state.agentd.store
        alice_token, _ = await create_token(store, "alice")
        bob_token, _ = await create_token(store, "bob")
        first = await ws_client(server.base_url, additional_headers=bearer(alice_token))
        assert await call_outcomes(first, 2) == ["ok", "ok"]  # alice's bucket is now empty
        second = WsClient(
            await websockets.connect(ws_url(server.base_url), additional_headers=bearer(alice_token))
        )
        with pytest.raises(RpcFailed) as limited:
            await second.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert limited.value.code == LIMIT_EXCEEDED
        bob = await ws_client(server.base_url, additional_headers=bearer(bob_token))  # bob's own bucket
        for client in (first, second, bob):
            await client.close()


def test_only_token_values_are_redacted_from_logged_urls() -> None:
    from agentd.infra.logs import redact_token

    assert redact_token("GET /a?token=abc&b=1") == "GET /a?token=***&b=1"
    assert redact_token("/a?x=1&TOKEN=abc") == "/a?x=1&TOKEN=***"
    assert redact_token("/a?mytoken=abc&tokens=2") == "/a?mytoken=abc&tokens=2"
