"""`agentd acp` over stdio (issue 12, item 1, local mode), driven the way editors drive it:
the official ACP Python SDK spawns `agentd acp` as a subprocess and speaks newline-delimited
JSON-RPC on its stdin/stdout. Every frame agentd wrote validates against the pinned schema;
sessions persist (a second process lists and loads them); nothing but protocol reaches stdout.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import httpx
from acp import text_block
from acp.schema import AgentMessageChunk

from tests.support.acp_stdio import agentd_env, editor, whole_session, write_script
from tests.support.client import WsClient, agent_text, text_prompt
from tests.support.polling import until


async def test_an_editor_runs_a_whole_session_over_stdio(tmp_path: Path, workspace: Path) -> None:
    home, script = tmp_path / "home", write_script(tmp_path)
    await whole_session(lambda: editor(home, script), workspace)


async def test_stdout_carries_only_protocol_and_bad_lines_get_errors(tmp_path: Path) -> None:
    """A stray line is answered with a JSON-RPC error and the process keeps serving; every
    line on stdout is one JSON-RPC message; end of input answers what was read, then exits."""
    lines = [
        "this is not json",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}),
        "",
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}),
    ]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentd.cli", "acp",
        env=agentd_env(tmp_path / "home", write_script(tmp_path)),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(("\n".join(lines) + "\n").encode()), 60)
    assert proc.returncode == 0, err.decode()
    messages = [json.loads(line) for line in out.decode().splitlines()]  # each line is JSON
    assert all(m.get("jsonrpc") == "2.0" for m in messages)
    by_id = {m.get("id"): m for m in messages}
    assert by_id[None]["error"]["code"] == -32700
    assert by_id[1]["result"]["protocolVersion"] == 1
    assert by_id[2]["result"] == {"sessions": []}
    assert b"scripted demo provider" not in out  # logs go to stderr


async def test_listen_lets_a_second_client_watch_the_editors_session(tmp_path: Path, workspace: Path) -> None:
    """`--listen`: while the editor drives a session over stdio, a WebSocket client attaches
    to the same session and sees its turn."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home, script = tmp_path / "home", write_script(tmp_path)
    async with editor(home, script, "--listen", f"127.0.0.1:{port}") as (conn, client, recorder, _):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base) as http:
            assert (await http.get("/healthz")).status_code == 200
        watcher = await WsClient.connect(base)
        try:
            await watcher.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
            done = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("write out.txt")]), 60
            )
            assert done.stop_reason == "end_turn"
            await until(lambda: "Done over stdio [ok]." in agent_text(watcher.updates(sid)))
            # The watcher can prompt the same session too.
            result = await watcher.call("session/prompt", text_prompt(sid, "talk slowly"))
            assert result["stopReason"] == "end_turn"
        finally:
            await watcher.close()
        assert any(isinstance(u, AgentMessageChunk) for _, u in client.updates)
        recorder.assert_all_frames_valid()
