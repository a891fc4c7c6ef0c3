"""`agentd acp` over stdio (issue 12, item 1, local mode), driven the way editors drive it:
the official ACP Python SDK spawns `agentd acp` as a subprocess and speaks newline-delimited
JSON-RPC on its stdin/stdout. Every frame agentd wrote validates against the pinned schema;
sessions persist (a second process lists and loads them); nothing but protocol reaches stdout.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from acp import text_block
from acp.connection import StreamDirection, StreamEvent
from acp.schema import AgentMessageChunk, UserMessageChunk
from acp.stdio import spawn_agent_process

from tests.e2e.acp.test_acp_sdk import RecordingClient
from tests.e2e.session.test_attach import until
from tests.support.acp_schema import AcpValidator
from tests.support.client import WsClient, agent_text, text_prompt

SCRIPT = {
    "steps": [
        {
            "text": "Writing it.",
            "tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "stdio\n"}}],
        },
        {"text": "Done over stdio [ok]."},
        {"text": "x" * 400, "chunk_size": 2, "chunk_delay": 0.05, "delay": 0.1},
        {"text": "after cancel"},
    ]
}


class Recorder:
    """An SDK stream observer: every message agentd wrote, and our requests' methods."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.request_methods: dict[Any, str] = {}

    def __call__(self, event: StreamEvent) -> None:
        msg = event.message
        if event.direction is StreamDirection.INCOMING:
            self.received.append(msg)
        elif "method" in msg and "id" in msg:
            self.request_methods[msg["id"]] = msg["method"]

    def assert_all_frames_valid(self) -> None:
        assert self.received
        validator = AcpValidator.default()
        for frame in self.received:
            validator.assert_valid_agent_frame(frame, self.request_methods)


def agentd_env(home: Path, script: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(AGENTD_HOME=str(home), AGENTD_PROVIDER="scripted", AGENTD_SCRIPT=str(script))
    return env


@asynccontextmanager
async def editor(
    home: Path, script: Path, *args: str
) -> AsyncIterator[tuple[Any, RecordingClient, Recorder, Any]]:
    """An editor's view: the SDK's client connection to a spawned `agentd acp`."""
    client = RecordingClient()
    recorder = Recorder()
    async with spawn_agent_process(
        client,
        sys.executable,
        "-m",
        "server.cli",
        "acp",
        *args,
        env=agentd_env(home, script),
        observers=[recorder],
    ) as (conn, process):
        init = await asyncio.wait_for(conn.initialize(protocol_version=1), 60)
        assert init.protocol_version == 1 and init.agent_capabilities.load_session is True
        yield conn, client, recorder, process


def write_script(tmp_path: Path) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(SCRIPT))
    return path


async def whole_session(open_editor: Any, workspace: Path) -> None:
    """Initialize, new, a prompt with a permission answered, cancel, another prompt; then a
    new editor process lists and loads the session with replay. `open_editor()` spawns one."""
    async with open_editor() as (conn, client, recorder, _):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        done = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[text_block("write out.txt")]), 60
        )
        assert done.stop_reason == "end_turn"
        assert len(client.permission_requests) == 1  # asked, and the SDK client allowed it
        assert (workspace / "out.txt").read_text() == "stdio\n"
        assert client.agent_text(sid) == "Writing it.Done over stdio [ok]."

        # Cancel a streaming turn; the session goes on.
        client.update_seen.clear()
        before = client.agent_text(sid)
        slow = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("talk slowly")]))
        await asyncio.wait_for(client.update_seen.wait(), 30)
        await conn.cancel(session_id=sid)
        assert (await asyncio.wait_for(slow, 30)).stop_reason == "cancelled"
        streamed = client.agent_text(sid)[len(before) :]
        assert 0 < len(streamed) < 400
        again = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("again")]), 60)
        assert again.stop_reason == "end_turn"
        recorder.assert_all_frames_valid()

    # The editor comes back later (a new process): the session is listed and loads with replay.
    async with open_editor() as (conn, client, recorder, _):
        listed = await conn.list_sessions()
        assert [s.session_id for s in listed.sessions] == [sid]
        await asyncio.wait_for(conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[]), 60)
        users = [u.content.text for u in client.of(sid, UserMessageChunk)]
        assert users == ["write out.txt", "talk slowly", "again"]
        assert client.agent_text(sid).startswith("Writing it.Done over stdio [ok].")
        assert client.agent_text(sid).endswith("after cancel")
        recorder.assert_all_frames_valid()


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
        sys.executable, "-m", "server.cli", "acp",
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
