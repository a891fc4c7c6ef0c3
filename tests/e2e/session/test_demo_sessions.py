"""The demo model is per session (issue 10): on a server using the configured scripted
demo provider, every session replays the demo from its first step, even while another
session is in the middle of it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentd.infra.config import PermissionMode
from agentd.providers.scripted import ScriptedProvider
from tests.support.client import agent_text, text_prompt
from tests.support.server import running_server

# Every tool call of the demo, in order, as the client sees its input.
DEMO_CALLS = [tc.arguments for step in ScriptedProvider.demo().script.steps for tc in step.tool_calls]


async def test_two_sessions_each_play_the_whole_demo(tmp_path: Path) -> None:
    ws_a, ws_b = tmp_path / "a", tmp_path / "b"
    ws_a.mkdir()
    ws_b.mkdir()
    # provider=None: the server builds its provider from the settings (the demo script).
    async with running_server(
        home=tmp_path / "home",
        provider=None,
        permission_mode=PermissionMode.BYPASS,  # type: ignore[arg-type]
    ) as server:
        client = await server.client()
        try:
            a, b = [
                (await client.call("session/new", {"cwd": str(ws.resolve()), "mcpServers": []}))["sessionId"]
                for ws in (ws_a, ws_b)
            ]
            first = asyncio.create_task(client.request("session/prompt", text_prompt(a, "hello please")))
            # Session b starts while a is mid-script (a's first tool call has run).
            await client.wait_notification(
                lambda m: (
                    m["method"] == "session/update"
                    and m["params"]["sessionId"] == a
                    and m["params"]["update"]["sessionUpdate"] == "tool_call_update"
                    and m["params"]["update"].get("status") == "completed"
                ),
                within=30,
            )
            second = asyncio.create_task(client.request("session/prompt", text_prompt(b, "hello too")))
            results = await asyncio.wait_for(asyncio.gather(first, second), 60)
        finally:
            await client.close()
    for resp in results:
        assert resp["result"]["stopReason"] == "end_turn", resp
    for sid, ws in ((a, ws_a), (b, ws_b)):
        updates = client.updates(sid)
        assert [u.get("rawInput") for u in updates if u["sessionUpdate"] == "tool_call"] == DEMO_CALLS
        assert "Done. I created `hello.py`" in agent_text(updates)
        assert (ws / "hello.py").read_text().count("Welcome to agentd") == 1
