"""An editor driving `agentd acp` over stdio through the ACP SDK: script, recorder, the whole-session walk."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from acp import text_block
from acp.connection import StreamDirection, StreamEvent
from acp.schema import UserMessageChunk
from acp.stdio import spawn_agent_process

from tests.support.acp_schema import AcpValidator
from tests.support.acp_sdk import RecordingClient

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
    home: Path,
    script: Path,
    *args: str,
    client: RecordingClient | None = None,
    init_meta: dict[str, Any] | None = None,
) -> AsyncIterator[tuple[Any, RecordingClient, Recorder, Any]]:
    """An editor's view: the SDK's client connection to a spawned `agentd acp` (`args`:
    e.g. `--connect URL` for the bridge); `client` answers the agent's requests;
    `init_meta`: the `_meta` of its `initialize` (e.g. agentd's opt-in)."""
    client = client or RecordingClient()
    recorder = Recorder()
    async with spawn_agent_process(
        client,
        sys.executable,
        "-m",
        "agentd.cli",
        "acp",
        *args,
        env=agentd_env(home, script),
        observers=[recorder],
    ) as (conn, process):
        init = await asyncio.wait_for(conn.initialize(protocol_version=1, **(init_meta or {})), 60)
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
        done = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("write out.txt")]), 60)
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


class LineAgent:
    """A spawned `agentd acp` driven line by line: the exact bytes of each answer."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def spawn(cls, env: dict[str, str]) -> LineAgent:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentd.cli", "acp", env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            limit=16 * 1024 * 1024,
        )  # fmt: skip
        return cls(proc)

    async def send(self, *messages: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        await self.proc.stdin.drain()

    async def line(self) -> bytes:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
        assert line, "agentd acp closed stdout"
        return line

    async def answer(self, req_id: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The response to `req_id`, and the other messages (notifications, requests) before
        it; a permission request meanwhile is allowed (once)."""
        others: list[dict[str, Any]] = []
        while True:
            message = json.loads(await self.line())
            if message.get("id") == req_id and "method" not in message:
                return message, others
            others.append(message)
            if message.get("method") == "session/request_permission":
                allow = next(o for o in message["params"]["options"] if o["kind"] == "allow_once")
                outcome = {"outcome": "selected", "optionId": allow["optionId"]}
                await self.send({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": outcome}})

    async def close(self) -> tuple[int, str]:
        """End of input: the exit code and what it wrote on stderr."""
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        err = await asyncio.wait_for(self.proc.stderr.read(), 60)
        return await asyncio.wait_for(self.proc.wait(), 60), err.decode()
