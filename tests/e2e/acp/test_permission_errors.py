"""A permission question always ends (issue 29, item 1): a client that answers
`session/request_permission` with an error — the ACP Python SDK's own example client answers
`-32601` — or that leaves without answering refuses the call at once, the way a rejection
does (the turn ends `cancelled`, the tool never runs), instead of the turn waiting for the
permission timeout (an hour by default). Over stdio (`agentd acp`), the bridge
(`agentd acp --connect`) and WebSocket, with the official SDK as the client."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from acp import text_block

from tests.support.acp_sdk import ErringClient, sdk_connection
from tests.support.acp_stdio import editor
from tests.support.proc import agentd_serve_on, free_port

SCRIPT = {
    "steps": [
        {
            "text": "Writing it.",
            "tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "x\n"}}],
        },
        {"text": "unreachable: the refusal ends the turn"},
    ]
}  # fmt: skip


@contextlib.asynccontextmanager
async def connected(kind: str, tmp_path: Path, client: ErringClient) -> AsyncIterator[Any]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    if kind == "stdio":
        async with editor(tmp_path / "home", script, client=client) as (conn, *_):
            yield conn
        return
    port = free_port()
    async with agentd_serve_on(tmp_path, port, SCRIPT):
        if kind == "bridge":
            url = f"ws://127.0.0.1:{port}/acp"
            async with editor(tmp_path / "editor-home", script, "--connect", url, client=client) as (
                conn,
                *_,
            ):
                yield conn
        else:
            server = SimpleNamespace(base_url=f"http://127.0.0.1:{port}")
            async with sdk_connection(server, client) as (conn, *_):
                yield conn


@pytest.mark.parametrize("kind", ["stdio", "bridge", "websocket"])
async def test_an_error_answer_refuses_the_call_at_once(kind: str, tmp_path: Path, workspace: Path) -> None:
    client = ErringClient()
    async with connected(kind, tmp_path, client) as conn:
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        # Well inside the default permission timeout (3,600 s): only an at-once refusal ends it.
        done = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("write it")]), 60)
    assert len(client.permission_requests) == 1  # it was asked, and answered with an error
    assert done.stop_reason == "cancelled"  # a refusal is the approval phase's circuit breaker
    assert not (workspace / "out.txt").exists()  # the call never ran
    assert "unreachable" not in client.agent_text(sid)
