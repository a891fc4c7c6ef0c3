"""Issue 30 item 5: a client-registered hook is asked at a sub-agent's stop, over a real server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.client import text_prompt
from tests.support.routed import RoutedProvider
from tests.support.server import scripted
from tests.support.session import final_tool_updates, served_session, tool_call

HELPER = """\
name = "helper"
description = "Answers"
tools = []
system_prompt = "You are the HELPER."
"""


async def test_a_client_hook_registered_for_subagent_stop_is_asked_and_can_keep_the_child_working(
    server_factory, workspace: Path, tmp_path: Path
):
    """001: "Stop 检查调用用户/客户端注册的 Stop（主 session）或 SubagentStop（子 agent session）类
    hook。两类来源：文件配置的 hook，以及 client 注册的 hook" — a client registers for
    `subagent_stop`; it is asked when the child is about to stop (not when the session's agent
    stops), and its block sends the child back to work with the feedback."""
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "helper.toml").write_text(HELPER)
    parent = scripted(
        {"tool_calls": [tool_call("task", "t1", agent="helper", prompt="answer")]},
        {"text": "the child answered"},
    )
    child = scripted({"text": "first try"}, {"text": "second try, checked"})
    asked: list[dict[str, Any]] = []

    async def on_request(msg: dict[str, Any]) -> dict[str, Any]:
        asked.append(msg["params"])
        if len(asked) == 1:
            return {"decision": "block", "reason": "check your answer"}
        return {"decision": "allow"}

    provider = RoutedProvider(parent, {"HELPER": child})
    async with served_session(server_factory, workspace, provider, agents_dir=agents) as (_, client, sid):
        client.on_request = on_request
        registered = await client.call(
            "_agentd/hooks/register", {"sessionId": sid, "events": ["subagent_stop"]}
        )
        assert registered["registered"] == ["subagent_stop"]

        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        # Asked twice, both times for the child; never for the session's own stop.
        assert [a["event"] for a in asked] == ["subagent_stop", "subagent_stop"]
        assert asked[0]["agent"] == "helper" and asked[0]["parentToolCallId"] == "t1"
        assert len(child.requests) == 2
        assert "check your answer" in child.requests[1].messages[-1].content
        final = final_tool_updates(client, sid)["t1"]
        assert final["status"] == "completed"


async def test_registering_an_unknown_hook_event_is_refused_readably(server_factory, workspace: Path):
    provider = scripted({"text": "unused"})
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        resp = await client.request("_agentd/hooks/register", {"sessionId": sid, "events": ["pre_stop"]})
        assert resp["error"]["code"] == -32602
        assert "subagent_stop" in resp["error"]["message"]
