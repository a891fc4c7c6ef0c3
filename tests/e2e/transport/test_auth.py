"""R-X1 / R-X2: bearer tokens (stored hashed, made with `agentd token create`) on HTTP
(`Authorization`) and WebSocket (header, or the `agentd.bearer.<token>` subprotocol / a
`?token=` query for browsers); a token acts as its principal, who sees only their own
sessions. Serving off the loopback interface without auth refuses to start."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from agentd.infra.auth import bearer_token, chosen_subprotocol, create_token, hash_token, insecure_bind
from agentd.infra.config import AuthMode
from agentd.store.db import Store
from tests.support.client import RpcFailed, WsClient, text_prompt, ws_client, ws_url
from tests.support.server import scripted


def rpc_body(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


# ------------------------------------------------------------------------------- pure parts


def test_the_token_is_taken_from_header_then_subprotocol_then_query() -> None:
    assert bearer_token({"authorization": "Bearer abc"}, {}) == "abc"
    assert bearer_token({"authorization": "bearer  abc "}, {"token": "q"}) == "abc"
    assert bearer_token({"authorization": "Basic abc"}, {}) is None
    assert bearer_token({"sec-websocket-protocol": "acp, agentd.bearer.xyz"}, {"token": "q"}) == "xyz"
    assert bearer_token({"sec-websocket-protocol": "agentd.bearer."}, {}) is None
    assert bearer_token({}, {"token": "q"}) == "q"
    assert bearer_token({}, {}) is None


def test_the_accepted_subprotocol_is_never_the_credential() -> None:
    assert chosen_subprotocol({"sec-websocket-protocol": "agentd.bearer.xyz, acp"}) == "acp"
    # Only the credential offered: none is accepted rather than echoing the token.
    assert chosen_subprotocol({"sec-websocket-protocol": "agentd.bearer.xyz"}) is None
    assert chosen_subprotocol({}) is None


@pytest.mark.parametrize(
    ("host", "mode", "refused"),
    [
        ("127.0.0.1", AuthMode.NONE, False),
        ("::1", AuthMode.NONE, False),
        ("localhost", AuthMode.NONE, False),
        ("0.0.0.0", AuthMode.NONE, True),
        ("192.168.1.10", AuthMode.NONE, True),
        ("agentd.example.com", AuthMode.NONE, True),
        ("0.0.0.0", AuthMode.TOKEN, False),
    ],
)
def test_serving_off_loopback_needs_auth(host: str, mode: AuthMode, refused: bool) -> None:
    assert (insecure_bind(host, mode) is not None) is refused


async def test_tokens_are_stored_hashed_and_revocable(migrated_db_url: str) -> None:
    store = await Store.open(migrated_db_url)
    try:
        await store.migrate()
        token, record = await create_token(store, "alice", "laptop")
        assert token.startswith("agentd_") and len(token) > 40
        digest = hashlib.sha256(token.encode()).hexdigest()
        assert await store.principal_for_token(digest) == "alice"
        listed = await store.list_tokens()
        assert [(t.id, t.principal, t.name, t.revoked_at) for t in listed] == [
            (record.id, "alice", "laptop", None)
        ]
        # Only the hash is kept: the token itself appears nowhere in the table.
        async with store.engine.connect() as conn:
            from sqlalchemy import text

            rows = (await conn.execute(text("SELECT * FROM api_tokens"))).all()
        assert token not in json.dumps([list(map(str, r)) for r in rows])
        assert await store.revoke_token(record.id) is True
        assert await store.principal_for_token(digest) is None
        assert await store.revoke_token(record.id) is False  # already revoked
    finally:
        await store.close()


# ------------------------------------------------------------------------------ end to end


async def test_every_entry_point_needs_a_valid_token(server_factory, workspace: Path, db_url: str) -> None:
    async with server_factory(
        scripted({"text": "hi"}, loop=True),
        database_url=db_url,
        auth=AuthMode.TOKEN,
        workspace_grants={"alice": [workspace]},
    ) as server:
        store = server.app.state.agentd.store
        alice, _ = await create_token(store, "alice")
        new = rpc_body("session/new", {"cwd": str(workspace), "mcpServers": []})
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            # Liveness and readiness stay open (load balancers, orchestrators).
            assert (await http.get("/healthz")).status_code == 200
            assert (await http.get("/readyz")).status_code == 200
            for headers in (
                {},
                {"Authorization": "Bearer agentd_wrong"},
                {"Authorization": f"Basic {alice}"},
            ):
                resp = await http.post("/rpc", json=new, headers=headers)
                assert resp.status_code == 401
                assert resp.headers["www-authenticate"] == "Bearer"
                assert resp.json()["error"]["code"] == -32000
                assert resp.json()["error"]["message"]  # readable
            ok = await http.post("/rpc", json=new, headers={"Authorization": f"Bearer {alice}"})
            assert ok.status_code == 200, ok.text
            sid = ok.json()["result"]["sessionId"]
            # SSE: header or ?token= (EventSource cannot set headers).
            assert (await http.get(f"/sessions/{sid}/events")).status_code == 401
            async with http.stream("GET", f"/sessions/{sid}/events", params={"token": alice}) as sse:
                assert sse.status_code == 200
                async for line in sse.aiter_lines():
                    if line.startswith("event:"):
                        break

        # WebSocket: refused at the handshake with a readable 401, never accepted.
        for kw in ({}, {"additional_headers": {"Authorization": "Bearer agentd_wrong"}}):
            with pytest.raises(InvalidStatus) as refused:
                await websockets.connect(ws_url(server.base_url), **kw)
            assert refused.value.response.status_code == 401
            assert b"authentication required" in refused.value.response.body or b"invalid" in (
                refused.value.response.body
            )
        # Accepted with the header, the subprotocol, or the query parameter.
        by_header = await ws_client(server.base_url, additional_headers={"Authorization": f"Bearer {alice}"})
        by_proto = await ws_client(server.base_url, subprotocols=["acp", f"agentd.bearer.{alice}"])
        assert by_proto.ws.subprotocol == "acp"  # the credential is not echoed back
        ws = await websockets.connect(ws_url(server.base_url) + f"?token={alice}")
        by_query = WsClient(ws)
        await by_query.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        for client in (by_header, by_proto, by_query):
            result = await client.call("session/prompt", text_prompt(sid, "hello"))
            assert result["stopReason"] == "end_turn"
            await client.close()


async def test_a_token_acts_as_its_principal_who_sees_only_their_own_sessions(
    server_factory, workspace: Path, db_url: str
) -> None:
    async with server_factory(
        scripted({"text": "hi"}, loop=True),
        database_url=db_url,
        auth=AuthMode.TOKEN,
        workspace_grants={"alice": [workspace]},
    ) as server:
        store = server.app.state.agentd.store
        alice_token, _ = await create_token(store, "alice")
        bob_token, bob_record = await create_token(store, "bob")
        alice = await ws_client(
            server.base_url, additional_headers={"Authorization": f"Bearer {alice_token}"}
        )
        bob = await ws_client(server.base_url, additional_headers={"Authorization": f"Bearer {bob_token}"})
        sid = (await alice.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        assert (await store.get_session(sid)).owner == "alice"

        # Bob cannot see, load, prompt, attach to or delete Alice's session: it looks missing.
        assert (await bob.call("session/list", {}))["sessions"] == []
        for method, params in (
            ("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}),
            ("session/prompt", text_prompt(sid, "let me in")),
            ("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0}),
            ("session/delete", {"sessionId": sid}),
        ):
            with pytest.raises(RpcFailed) as denied:
                await bob.call(method, params)
            assert denied.value.code == -32002, method
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            sse = await http.get(f"/sessions/{sid}/events", headers={"Authorization": f"Bearer {bob_token}"})
            assert sse.status_code == 404
        assert [s["sessionId"] for s in (await alice.call("session/list", {}))["sessions"]] == [sid]

        # A revoked token is refused from the next request on.
        assert await store.revoke_token(bob_record.id)
        with pytest.raises(InvalidStatus) as refused:
            await websockets.connect(
                ws_url(server.base_url), additional_headers={"Authorization": f"Bearer {bob_token}"}
            )
        assert refused.value.response.status_code == 401
        await alice.close()
        await bob.close()


# --------------------------------------------------------------------------------- the CLI


async def run_cli(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentd.cli", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def cli_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(AGENTD_HOME=str(tmp_path / "home"), HOME=str(tmp_path))
    return env


async def test_serve_refuses_a_public_address_without_auth(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    code, _, err = await run_cli("serve", "--host", "0.0.0.0", "--port", "0", env=env)
    assert code == 2
    assert "refusing to listen on 0.0.0.0 without authentication" in err
    assert "AGENTD_AUTH=token" in err
    env["AGENTD_HOST"] = "10.1.2.3"  # the environment counts as much as the flag
    code, _, err = await run_cli("serve", env=env)
    assert code == 2 and "10.1.2.3" in err


async def test_token_create_list_revoke_from_the_command_line(
    server_factory, workspace: Path, tmp_path: Path, db_url: str
) -> None:
    env = cli_env(tmp_path)
    db = ["--database-url", db_url]
    code, out, err = await run_cli("token", "create", "--principal", "carol", "--name", "ci", *db, env=env)
    assert code == 0, err
    token = out.strip()
    assert token.startswith("agentd_") and "carol" in err and "not kept" in err
    code, out, _ = await run_cli("token", "list", *db, env=env)
    assert code == 0
    (line,) = out.strip().splitlines()
    token_id, principal, name, _created, state, teams = line.split("\t")
    assert (principal, name, state, teams) == ("carol", "ci", "active", "-")
    assert token not in out  # never shown again

    # The printed token works against a server on that database...
    grants = {"carol": [workspace]}
    async with server_factory(
        scripted({"text": "hi"}),
        database_url=db_url,
        auth=AuthMode.TOKEN,
        workspace_grants=grants,
        token_recheck_s=0.1,  # the revocation below is seen within 0.1 s, not the default 2 s
    ) as server:
        client = await ws_client(server.base_url, additional_headers={"Authorization": f"Bearer {token}"})
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        assert (await server.app.state.agentd.store.get_session(sid)).owner == "carol"

        # ...until it is revoked: the open connection is closed, new ones are refused.
        code, out, _ = await run_cli("token", "revoke", token_id, *db, env=env)
        assert code == 0 and token_id in out
        async with asyncio.timeout(15):  # a hang bound, far above AGENTD_TOKEN_RECHECK_S
            await client.ws.wait_closed()
        assert (client.ws.close_code, client.ws.close_reason) == (4401, "token revoked")
        with pytest.raises(InvalidStatus):
            await websockets.connect(
                ws_url(server.base_url), additional_headers={"Authorization": f"Bearer {token}"}
            )
    code, _, err = await run_cli("token", "revoke", token_id, *db, env=env)
    assert code == 1 and "no active token" in err
    code, _, err = await run_cli("token", "create", "--principal", "  ", *db, env=env)
    assert code == 2 and "must not be empty" in err


async def test_token_create_puts_the_principal_in_teams(tmp_path: Path, db_url: str) -> None:
    env = cli_env(tmp_path)
    db = ["--database-url", db_url]
    teams = ["--team", "core", "--team", "ops", "--team", "core"]
    code, out, err = await run_cli("token", "create", "--principal", "dave", *teams, *db, env=env)
    assert code == 0, err
    assert "in teams core, ops" in err
    store = await Store.open(db_url)
    try:
        found = await store.identity_for_token(hash_token(out.strip()))
    finally:
        await store.close()
    assert found == ("dave", ("core", "ops"))
    code, out, _ = await run_cli("token", "list", *db, env=env)
    assert code == 0 and out.strip().split("\t")[-1] == "core,ops"
    code, _, err = await run_cli("token", "create", "--principal", "x", "--team", "a b", *db, env=env)
    assert code == 2 and "bad team name" in err
