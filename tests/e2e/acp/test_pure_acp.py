"""Pure ACP unless a client asks (issue 29, item 3): a stock client — the official SDK's,
initialized the way its examples do — is sent only the schema's methods over WebSocket,
stdio and the bridge: no `_agentd/` notification it would answer with an error (acpx prints
"Method not found: _agentd/event", Toad answers each with an error reply). A client that
opts in at `initialize` (`_meta.agentd.notifications`) gets agentd's own traffic, as
agentd's web page, chat and bridge do."""

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

from tests.support.acp_sdk import RecordingClient, sdk_connection
from tests.support.acp_stdio import editor
from tests.support.proc import agentd_serve_on, free_port

SCRIPT = {
    "loop": True,
    "steps": [
        {
            "text": "Writing it.",
            "tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "x\n"}}],
        },
        {"text": "Done."},
    ],
}


@contextlib.asynccontextmanager
async def connected(
    kind: str, tmp_path: Path, opt_in: bool
) -> AsyncIterator[tuple[Any, RecordingClient, Any]]:
    """(SDK connection, its client, what it received) over `kind`, initialized as a stock
    client or with agentd's opt-in."""
    client = RecordingClient()
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    meta = {"agentd": {"notifications": ["*"]}} if opt_in else {}
    if kind == "stdio":
        async with editor(tmp_path / "home", script, client=client, init_meta=meta) as (conn, _, rec, _p):
            yield conn, client, rec
        return
    port = free_port()
    async with agentd_serve_on(tmp_path, port, SCRIPT):
        if kind == "bridge":
            url = f"ws://127.0.0.1:{port}/acp"
            home = tmp_path / "editor-home"
            async with editor(home, script, "--connect", url, client=client, init_meta=meta) as (
                conn,
                _,
                rec,
                _p,
            ):
                yield conn, client, rec
        else:
            server = SimpleNamespace(base_url=f"http://127.0.0.1:{port}")
            async with sdk_connection(server, client, init_meta=meta) as (conn, _, transport):
                yield conn, client, transport


def agentd_methods(received: list[dict[str, Any]]) -> list[str]:
    return [str(m["method"]) for m in received if str(m.get("method", "")).startswith("_agentd/")]


@pytest.mark.parametrize("kind", ["websocket", "stdio", "bridge"])
@pytest.mark.parametrize("opt_in", [False, True], ids=["stock", "opted-in"])
async def test_only_clients_that_ask_get_agentds_own_notifications(
    kind: str, opt_in: bool, tmp_path: Path, workspace: Path
) -> None:
    async with connected(kind, tmp_path, opt_in) as (conn, client, seen):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        done = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("write it")]), 60)
        assert done.stop_reason == "end_turn"
        assert client.permission_requests  # a permission question: `_agentd/permission/resolved` follows it
        received = seen.received
    if opt_in:
        assert "_agentd/event" in agentd_methods(received)  # turn boundaries, for instance
        assert "_agentd/permission/resolved" in agentd_methods(received)
        assert client.ext_notifications
    else:
        assert agentd_methods(received) == []
        assert client.ext_notifications == []
    assert client.agent_text(sid) == "Writing it.Done."  # the session itself is the same
