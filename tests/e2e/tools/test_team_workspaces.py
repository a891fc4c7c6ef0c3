"""Team deployments (R-X2, R-X4, R-T9): with auth on, each principal works in its own
root under the workspace root (or explicit grants) and cannot reach another's files; MCP
servers come only from the operator's allow-lists."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from agentd.infra.auth import create_token
from agentd.infra.config import AuthMode, Settings
from agentd.tools.mcp.client import McpHttp, McpStdio
from agentd.tools.mcp.policy import check_mcp_specs, url_allowed
from tests.support.client import RpcFailed, WsClient, text_prompt, ws_client
from tests.support.mcp import calc_stdio
from tests.support.server import scripted
from tests.support.session import new_session

WORKSPACE_DENIED = -32015
INVALID_PARAMS = -32602


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def as_principal(server: Any, principal: str) -> WsClient:
    token, _ = await create_token(server.app.state.agentd.store, principal)
    return await ws_client(server.base_url, additional_headers=bearer(token))


async def refused(client: WsClient, method: str, params: dict[str, Any]) -> RpcFailed:
    with pytest.raises(RpcFailed) as err:
        await client.call(method, params)
    return err.value


def read(path: str, call_id: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "read_file", "arguments": {"path": path}, "id": call_id}]}


# --------------------------------------------------------------------------- workspaces


async def test_each_principal_gets_its_own_root_and_cannot_reach_anothers(
    server_factory, tmp_path: Path
) -> None:
    root = (tmp_path / "roots").resolve()
    provider = scripted(
        read("../alice/secret.txt", "r1"), read(str(root / "alice" / "secret.txt"), "r2"), {"text": "no"}
    )
    async with server_factory(provider, auth=AuthMode.TOKEN, workspace_root=root) as server:
        alice = await as_principal(server, "alice")
        bob = await as_principal(server, "bob")
        # The principal's own root is made on demand by its first session.
        assert not (root / "alice").exists()
        await new_session(alice, root / "alice")
        (root / "alice" / "secret.txt").write_text("alice's secret")
        bob_sid = await new_session(bob, root / "bob")
        (root / "bob" / "to-alice").symlink_to(root / "alice")

        for cwd in (root / "alice", root, root / "bob" / "to-alice", tmp_path):
            err = await refused(bob, "session/new", {"cwd": str(cwd), "mcpServers": []})
            assert err.code == WORKSPACE_DENIED, cwd
            assert (
                "outside your workspace" in err.error["message"]
                and "AGENTD_WORKSPACE_GRANTS" in (err.error["message"])
            )
        # Nor by loading his own session with her directory as the cwd.
        load = {"sessionId": bob_sid, "cwd": str(root / "alice"), "mcpServers": []}
        assert (await refused(bob, "session/load", load)).code == WORKSPACE_DENIED
        assert [s["cwd"] for s in (await bob.call("session/list", {}))["sessions"]] == [str(root / "bob")]

        # Nor through the tools of his session: relative or absolute, the file stays out of reach.
        await bob.call("session/prompt", text_prompt(bob_sid, "read alice's secret"))
        results = [m for req in provider.requests[1:] for m in req.messages if m.role == "tool"]
        assert {m.tool_call_id for m in results} == {"r1", "r2"}
        for m in results:
            assert m.is_error and "outside the workspace" in m.content
            assert "alice's secret" not in m.content
        await alice.close()
        await bob.close()


async def test_grants_add_roots_and_loading_checks_the_sessions_own_cwd(
    server_factory, tmp_path: Path
) -> None:
    root, shared = (tmp_path / "roots").resolve(), (tmp_path / "common").resolve()
    shared.mkdir()
    db = f"sqlite+aiosqlite:///{tmp_path / 'agentd.db'}"
    tokens: dict[str, str] = {}
    common: dict[str, Any] = {"database_url": db, "auth": AuthMode.TOKEN, "workspace_root": root}
    async with server_factory(scripted(), workspace_grants={"bob": [shared]}, **common) as server:
        for name in ("alice", "bob"):
            tokens[name], _ = await create_token(server.app.state.agentd.store, name)
        bob = await ws_client(server.base_url, additional_headers=bearer(tokens["bob"]))
        alice = await ws_client(server.base_url, additional_headers=bearer(tokens["alice"]))
        sid = await new_session(bob, shared)  # granted
        assert (await refused(alice, "session/new", {"cwd": str(shared), "mcpServers": []})).code == (
            WORKSPACE_DENIED
        )
        await bob.close()
        await alice.close()

    # The grant is withdrawn: bob's old session there can no longer be loaded.
    async with server_factory(scripted(), **common) as server:
        bob = await ws_client(server.base_url, additional_headers=bearer(tokens["bob"]))
        load = {"sessionId": sid, "cwd": str(root / "bob"), "mcpServers": []}
        for method in ("session/load", "session/resume"):
            assert (await refused(bob, method, load)).code == WORKSPACE_DENIED, method
        fork = await refused(bob, "_agentd/session/fork", {"sessionId": sid})
        assert fork.code == WORKSPACE_DENIED
        await bob.close()


async def test_with_auth_and_no_workspace_root_principals_live_under_home(
    server_factory, tmp_path: Path, workspace: Path
) -> None:
    home = tmp_path / "home"
    async with server_factory(scripted(), home=home, auth=AuthMode.TOKEN) as server:
        alice = await as_principal(server, "alice")
        await new_session(alice, home / "workspaces" / "alice")
        assert (await refused(alice, "session/new", {"cwd": str(workspace), "mcpServers": []})).code == (
            WORKSPACE_DENIED
        )
        # A principal whose name is no directory name gets no root of its own.
        odd = await as_principal(server, "../alice")
        for cwd in (home / "workspaces" / "alice", home / "workspaces"):
            err = await refused(odd, "session/new", {"cwd": str(cwd), "mcpServers": []})
            assert err.code == WORKSPACE_DENIED
        await alice.close()
        await odd.close()


# ----------------------------------------------------------------------------------- MCP


async def test_with_auth_mcp_servers_come_only_from_the_allow_lists(server_factory, workspace: Path) -> None:
    async with server_factory(
        scripted(),
        auth=AuthMode.TOKEN,
        workspace_grants={"alice": [workspace]},
        mcp_allowed_commands=[sys.executable],
        mcp_allowed_urls=["http://127.0.0.1:9/mcp"],
    ) as server:
        alice = await as_principal(server, "alice")
        cases = [
            ({"name": "sh", "command": "/bin/sh", "args": ["-c", "id"]}, "AGENTD_MCP_ALLOWED_COMMANDS"),
            ({"name": "sh", "command": "sh", "args": ["-c", "id"]}, "AGENTD_MCP_ALLOWED_COMMANDS"),
            (calc_stdio(LD_PRELOAD="/tmp/evil.so"), "LD_PRELOAD"),
            ({"type": "http", "name": "web", "url": "http://169.254.169.254/mcp"}, "AGENTD_MCP_ALLOWED_URLS"),
            ({"type": "http", "name": "web", "url": "http://127.0.0.1:9/mcpx"}, "AGENTD_MCP_ALLOWED_URLS"),
        ]
        for spec, named in cases:
            err = await refused(alice, "session/new", {"cwd": str(workspace), "mcpServers": [spec]})
            assert err.code == INVALID_PARAMS and named in err.error["message"], spec
        assert (await alice.call("session/list", {}))["sessions"] == []  # nothing was created
        sid = await new_session(alice, workspace)
        load = {"sessionId": sid, "cwd": str(workspace), "mcpServers": [cases[0][0]]}
        assert (await refused(alice, "session/load", load)).code == INVALID_PARAMS
        # A listed command starts as before.
        await new_session(alice, workspace, mcpServers=[calc_stdio()])
        await alice.close()


def test_mcp_url_prefixes_match_on_scheme_host_and_path_segments() -> None:
    allowed = ["https://mcp.example.com/api", "http://10.0.0.5:8080"]
    assert url_allowed("https://mcp.example.com/api", allowed)
    assert url_allowed("https://MCP.example.com/api/tools?x=1", allowed)
    assert url_allowed("http://10.0.0.5:8080/anything", allowed)
    for url in (
        "https://mcp.example.com/apix",
        "https://mcp.example.com.evil.net/api",
        "https://user@mcp.example.com/api",
        "http://mcp.example.com/api",
        "https://mcp.example.com/api/../admin",
        "https://mcp.example.com/api/%2E%2E/admin",
        "http://10.0.0.5:8081/",
    ):
        assert not url_allowed(url, allowed), url


def test_without_auth_any_mcp_server_is_allowed(tmp_path: Path) -> None:
    specs = [McpStdio(name="sh", command="/bin/sh"), McpHttp(type="http", name="w", url="http://x/")]
    check_mcp_specs(specs, Settings(home=tmp_path))  # the local user: today's behaviour
    with pytest.raises(ValueError, match="AGENTD_MCP_ALLOWED_COMMANDS"):
        check_mcp_specs(specs, Settings(home=tmp_path, auth=AuthMode.TOKEN))
