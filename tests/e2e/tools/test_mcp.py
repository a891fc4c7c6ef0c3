"""R-T9: MCP servers from `session/new`'s `mcpServers` (stdio and streamable HTTP) are
connected with the `mcp` SDK; their tools join the session's tool set as
`mcp__<server>__<tool>` with the same permission policy and events as built-in tools."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentd.infra.config import PermissionMode
from tests.support.client import RpcFailed, WsClient, agent_text, allow, text_prompt
from tests.support.mcp import CALC, calc_stdio
from tests.support.polling import until
from tests.support.proc import free_port
from tests.support.server import scripted
from tests.support.session import tool_call

# Run as a separate process only: importing the SDK's server side configures logging.


def statuses(client: WsClient, sid: str) -> dict[str, str]:
    out = {}
    for u in client.updates(sid):
        if u["sessionUpdate"] in ("tool_call", "tool_call_update") and "status" in u:
            out[u["toolCallId"]] = u["status"]
    return out


async def test_stdio_server_tools_run_with_permissions_and_events(server_factory, workspace: Path) -> None:
    provider = scripted(
        {
            "tool_calls": [
                tool_call("mcp__calc__add", "c_add", a=2, b=3),
                tool_call("mcp__calc__peek", "c_peek"),
            ]
        },
        {"tool_calls": [tool_call("mcp__calc__boom", "c_boom")]},
        {"text": "2 + 3 = 5"},
    )
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        client = await server.client()
        client.on_request = allow()
        init = next(f for f in client.frames if f.get("id") == 1)["result"]
        assert init["agentCapabilities"]["mcpCapabilities"] == {"http": True, "sse": False}
        new = {"cwd": str(workspace), "mcpServers": [calc_stdio(CALC_GREETING="hello from env")]}
        sid = (await client.call("session/new", new))["sessionId"]
        result = await client.call("session/prompt", text_prompt(sid, "add 2 and 3"))
        assert result["stopReason"] == "end_turn"
        assert agent_text(client.updates(sid)) == "2 + 3 = 5"

        offered = {t.name for t in provider.requests[0].tools}
        assert {"mcp__calc__add", "mcp__calc__peek", "mcp__calc__boom", "read_file"} <= offered
        results = {m.tool_call_id: m for m in provider.requests[1].messages if m.role == "tool"}
        assert results["c_add"].content == "5" and not results["c_add"].is_error
        assert results["c_peek"].content == "hello from env"  # the env reached the server
        boom = next(
            m for m in provider.requests[2].messages if m.role == "tool" and m.tool_call_id == "c_boom"
        )
        assert boom.is_error and "boom" in boom.content
        assert statuses(client, sid) == {"c_add": "completed", "c_peek": "completed", "c_boom": "failed"}
        titles = {
            u["toolCallId"]: u["title"] for u in client.updates(sid) if u["sessionUpdate"] == "tool_call"
        }
        assert titles["c_add"] == "calc: add"
        # Only the tools that change things asked; the read-only one did not.
        asked = [r["params"]["toolCall"]["toolCallId"] for r in client.server_requests]
        assert sorted(asked) == ["c_add", "c_boom"]
        await client.close()


async def test_plan_mode_refuses_mcp_tools_that_are_not_read_only(server_factory, workspace: Path) -> None:
    provider = scripted(
        {"tool_calls": [tool_call("mcp__calc__peek", "c_peek")]},
        {"tool_calls": [tool_call("mcp__calc__add", "c_add", a=1, b=1)]},
        {"text": "done"},
    )
    async with server_factory(provider, permission_mode=PermissionMode.PLAN) as server:
        client = await server.client()
        client.on_request = allow()
        new = {"cwd": str(workspace), "mcpServers": [calc_stdio()]}
        sid = (await client.call("session/new", new))["sessionId"]
        await client.call("session/prompt", text_prompt(sid, "look, then add"))
        st = statuses(client, sid)
        assert st["c_peek"] == "completed" and st["c_add"] == "failed"
        assert client.server_requests == []  # plan mode refuses without asking


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"name": "calc"}, "mcpServers.0.command"),
        ({"type": "http", "name": "web"}, "mcpServers.0.url"),
        (calc_stdio(start_timeout=0), "mcpServers.0._meta.agentd.startTimeoutSeconds"),
        ({**calc_stdio(), "_meta": {"agentd": []}}, "mcpServers.0._meta.agentd"),
    ],
)
async def test_a_bad_spec_fails_session_new_and_creates_nothing(
    server_factory, workspace: Path, spec: dict[str, Any], message: str
) -> None:
    async with server_factory(scripted()) as server:
        client = await server.client()
        with pytest.raises(RpcFailed) as failed:
            await client.call("session/new", {"cwd": str(workspace), "mcpServers": [spec]})
        assert failed.value.code == -32602 and message in failed.value.error["message"]
        assert (await client.call("session/list", {}))["sessions"] == []
        assert (await client.call("session/list", {})) is not None  # the connection goes on
        await client.close()


def notices(client: WsClient, sid: str) -> list[str]:
    return [u["title"] for u in client.updates(sid) if u["sessionUpdate"] == "notice"]


async def test_a_hanging_or_crashing_server_is_reported_and_the_others_work(
    server_factory, workspace: Path
) -> None:
    """Issue 29 item 6: a server that never answers is left out after its own timeout, one
    that cannot start at once; each is one notice naming it, and the session works with
    the rest."""
    provider = scripted({"tool_calls": [tool_call("mcp__calc__add", "c_add", a=2, b=3)]}, {"text": "5"})
    servers = [
        calc_stdio("--hang", name="slow", start_timeout=1),
        calc_stdio(),
        calc_stdio("--crash", name="broken"),
        {"name": "missing", "command": "/nonexistent/mcp-server"},
    ]
    async with server_factory(provider, permission_mode=PermissionMode.BYPASS) as server:
        client = await server.client(session={"notices": {}})
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": servers}))["sessionId"]
        result = await client.call("session/prompt", text_prompt(sid, "add 2 and 3"))
        assert result["stopReason"] == "end_turn"
        assert next(m for m in provider.requests[1].messages if m.role == "tool").content == "5"
        offered = {t.name for t in provider.requests[0].tools}
        assert "mcp__calc__add" in offered
        assert not [t for t in offered if t.startswith(("mcp__slow", "mcp__broken", "mcp__missing"))]
        told = notices(client, sid)
        assert len(told) == 3
        without = "; the session goes on without its tools"
        assert "MCP server 'slow' did not start within 1s" + without in told
        assert any(
            t.startswith("MCP server 'broken' could not start: ") and t.endswith(without) for t in told
        )
        assert any(t.startswith("MCP server 'missing' could not start: ") for t in told)
        await client.close()


async def test_servers_start_in_parallel(server_factory, workspace: Path) -> None:
    """Two servers that each answer only once the other has been started (the two ends of
    one FIFO): started one after the other, the first would wait for the second forever
    and hit its timeout."""
    fifo = workspace / "rendezvous"
    os.mkfifo(fifo)
    servers = [
        calc_stdio("--rendezvous", str(fifo), "writer", name="a", start_timeout=60),
        calc_stdio("--rendezvous", str(fifo), "reader", name="b", start_timeout=60),
    ]
    provider = scripted({"text": "hi"})
    async with server_factory(provider) as server:
        client = await server.client(session={"notices": {}})
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": servers}))["sessionId"]
        await client.call("session/prompt", text_prompt(sid, "hi"))
        offered = {t.name for t in provider.requests[0].tools}
        assert {"mcp__a__add", "mcp__b__add"} <= offered
        assert notices(client, sid) == []
        await client.close()


@contextlib.asynccontextmanager
async def subprocess_running(argv: list[str], log: Path) -> AsyncIterator[Any]:
    out = log.open("wb")
    proc = await asyncio.create_subprocess_exec(*argv, stdout=out, stderr=asyncio.subprocess.STDOUT)
    out.close()
    try:
        yield proc
    finally:
        proc.kill()
        await proc.wait()


async def test_streamable_http_server_with_headers(server_factory, workspace: Path, tmp_path: Path) -> None:
    provider = scripted({"tool_calls": [tool_call("mcp__web__add", "c_add", a=20, b=22)]}, {"text": "42"})
    port = free_port()
    mcp_base = f"http://127.0.0.1:{port}"
    async with subprocess_running([sys.executable, CALC, "--http", str(port)], tmp_path / "mcp.log"):
        async with httpx.AsyncClient() as http:

            async def listening() -> bool:
                with contextlib.suppress(httpx.TransportError):
                    await http.get(f"{mcp_base}/mcp", timeout=1)
                    return True
                return False

            await until(listening, what="the MCP server to listen")
        async with server_factory(provider, permission_mode=PermissionMode.BYPASS) as server:
            client = await server.client()
            spec = {
                "type": "http",
                "name": "web",
                "url": f"{mcp_base}/mcp",
                "headers": [{"name": "X-Test", "value": "1"}],
            }
            sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": [spec]}))[
                "sessionId"
            ]
            await client.call("session/prompt", text_prompt(sid, "add"))
            result = next(m for m in provider.requests[1].messages if m.role == "tool")
            assert result.content == "42"
            await client.close()


async def test_load_with_servers_gives_a_restarted_session_its_tools(
    server_factory, workspace: Path, tmp_path: Path
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'mcp.db'}"
    async with server_factory(scripted({"text": "hi"}), database_url=db) as server:
        client = await server.client()
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": [calc_stdio()]}))[
            "sessionId"
        ]
        await client.call("session/prompt", text_prompt(sid, "hi"))
        await client.close()
    after = scripted({"tool_calls": [tool_call("mcp__calc__add", "c1", a=1, b=2)]}, {"text": "3"})
    async with server_factory(after, database_url=db, permission_mode=PermissionMode.BYPASS) as server:
        client = await server.client()
        client.on_request = allow()  # the session keeps the mode it was created with
        load = {"sessionId": sid, "cwd": str(workspace), "mcpServers": [calc_stdio()]}
        await client.call("session/load", load)
        await client.call("session/prompt", text_prompt(sid, "add"))
        assert next(m for m in after.requests[1].messages if m.role == "tool").content == "3"
        await client.close()
