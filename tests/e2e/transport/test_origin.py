"""R-X4: a browser page may talk to agentd only if its origin is allow-listed. Without the
check any web page could open `ws://127.0.0.1:8765/acp` — WebSockets are not covered by
CORS — or POST a `text/plain` body to `/rpc`, and run commands in the user's workspaces.
Clients that are not browsers send no `Origin` and are unaffected."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from agentd.transport.origin import normalize_origin, origin_allowed
from tests.support.client import WsClient
from tests.support.server import scripted

EVIL = "https://evil.example"
APP = "https://app.example.com"


def test_origins_compare_by_scheme_host_and_port() -> None:
    assert normalize_origin("HTTPS://App.Example.com:443") == "https://app.example.com"
    assert normalize_origin("http://localhost:8080/") == "http://localhost:8080"
    assert normalize_origin("http://[::1]:80") == "http://[::1]"
    assert origin_allowed(None, []) is True  # no Origin: not a browser
    assert origin_allowed(APP, []) is False
    assert origin_allowed("https://app.example.com:443", [APP]) is True
    assert origin_allowed("http://app.example.com", [APP]) is False  # another scheme
    assert origin_allowed("https://app.example.com.evil.example", [APP]) is False
    assert origin_allowed("null", [APP]) is False
    assert origin_allowed(EVIL, ["*"]) is True


async def test_an_unlisted_page_cannot_open_the_websocket_or_post_to_rpc(
    server_factory, workspace: Path
) -> None:
    async with server_factory(scripted({"text": "hi"})) as server:
        ws_url = server.base_url.replace("http://", "ws://") + "/acp"
        with pytest.raises(InvalidStatus) as refused:
            await websockets.connect(ws_url, origin=EVIL)
        assert refused.value.response.status_code == 403
        assert json.loads(refused.value.response.body)["error"] == "origin_not_allowed"

        # A "simple" cross-site POST (text/plain, no preflight) is refused before it runs.
        new = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/new",
            "params": {"cwd": str(workspace), "mcpServers": []},
        }
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            resp = await http.post(
                "/rpc", content=json.dumps(new), headers={"Origin": EVIL, "Content-Type": "text/plain"}
            )
            assert resp.status_code == 403
            assert "AGENTD_ALLOWED_ORIGINS" in resp.json()["detail"]
            assert (await http.get("/sessions/x/events", headers={"Origin": EVIL})).status_code == 403
            listed = await http.post(
                "/rpc", json={"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}
            )
            assert listed.json()["result"]["sessions"] == []  # nothing was created

        # Clients that are not browsers (no Origin) are unaffected.
        client = await WsClient.connect(server.base_url)
        assert (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        await client.close()


async def test_a_listed_page_connects_and_gets_cors_headers(server_factory, workspace: Path) -> None:
    async with server_factory(scripted({"text": "hi"}), allowed_origins=[APP]) as server:
        ws_url = server.base_url.replace("http://", "ws://") + "/acp"
        ws = await websockets.connect(ws_url, origin=APP)
        client = WsClient(ws)
        await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        await client.close()
        with pytest.raises(InvalidStatus):
            await websockets.connect(ws_url, origin=EVIL)  # the list is not "anything goes"

        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            preflight = await http.options(
                "/rpc",
                headers={
                    "Origin": APP,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "authorization, content-type",
                },
            )
            assert preflight.status_code == 200
            assert preflight.headers["access-control-allow-origin"] == APP
            body = {"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}
            resp = await http.post("/rpc", json=body, headers={"Origin": APP})
            assert resp.status_code == 200 and resp.headers["access-control-allow-origin"] == APP


async def test_the_servers_own_pages_may_connect_but_a_rebinding_page_may_not(server_factory) -> None:
    """Same origin (the page agentd itself serves at `/`) is allowed. A DNS-rebinding
    attack — evil.example resolving to 127.0.0.1 — arrives with `Host: evil.example`, which
    a server without auth refuses outright."""
    async with server_factory(scripted({"text": "hi"})) as server:
        port = server.base_url.rsplit(":", 1)[1]
        ws_url = server.base_url.replace("http://", "ws://") + "/acp"
        ws = await websockets.connect(ws_url, origin=f"http://127.0.0.1:{port}")
        client = WsClient(ws)
        await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        await client.close()

        rebound = f"http://evil.example:{port}"
        with pytest.raises(InvalidStatus) as refused:
            # The name resolves to us (as rebinding makes it): connect to 127.0.0.1, say evil.example.
            await websockets.connect(
                f"ws://evil.example:{port}/acp", origin=rebound, host="127.0.0.1", port=int(port)
            )
        assert refused.value.response.status_code == 400
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}
            resp = await http.post(
                "/rpc", json=body, headers={"Host": f"evil.example:{port}", "Origin": rebound}
            )
            assert resp.status_code == 400
            ok = await http.post("/rpc", json=body, headers={"Host": f"localhost:{port}"})
            assert ok.status_code == 200


async def test_with_tokens_any_host_name_may_reach_the_server(server_factory) -> None:
    from agentd.infra.config import AuthMode

    async with server_factory(scripted(), auth=AuthMode.TOKEN) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            resp = await http.get("/healthz", headers={"Host": "agentd.internal:8765"})
            assert resp.status_code == 200
