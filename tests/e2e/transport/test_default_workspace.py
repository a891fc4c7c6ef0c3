"""Issue 31 item 5: `session/new` with an empty cwd opens the caller's default workspace —
made on first use and still confined to the principal's roots — and a bad cwd is answered
with a sentence, not a validator dump."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd.infra.auth import create_token
from agentd.infra.config import AuthMode
from tests.support.client import RpcFailed, ws_client
from tests.support.server import scripted

INVALID_PARAMS = -32602


async def test_an_empty_cwd_opens_the_default_workspace_without_auth(server_factory, tmp_path: Path) -> None:
    async with server_factory(scripted({"text": "hi"})) as server:
        client = await server.client()
        try:
            sid = (await client.call("session/new", {"cwd": "", "mcpServers": []}))["sessionId"]
            listed = (await client.call("session/list", {}))["sessions"]
            with pytest.raises(RpcFailed) as err:
                await client.call("session/new", {"cwd": "relative/dir", "mcpServers": []})
        finally:
            await client.close()
    default = (tmp_path / "home" / "workspaces" / "default").resolve()
    assert default.is_dir()
    assert [(s["sessionId"], s["cwd"]) for s in listed] == [(sid, str(default))]
    assert err.value.code == INVALID_PARAMS
    assert err.value.error["message"] == "Invalid params: cwd: cwd must be an absolute path"


async def test_an_empty_cwd_is_the_principals_own_root_with_auth(server_factory, tmp_path: Path) -> None:
    root = (tmp_path / "roots").resolve()
    async with server_factory(scripted({"text": "hi"}), auth=AuthMode.TOKEN, workspace_root=root) as server:
        token, _ = await create_token(server.app.state.agentd.store, "alice")
        alice = await ws_client(server.base_url, additional_headers={"Authorization": f"Bearer {token}"})
        try:
            await alice.call("session/new", {"cwd": "", "mcpServers": []})
            listed = (await alice.call("session/list", {}))["sessions"]
        finally:
            await alice.close()
    assert [s["cwd"] for s in listed] == [str(root / "alice")]
    assert (root / "alice").is_dir() and not (root / "default").exists()
