"""Issue 30 item 3: a sub-agent always has a turn cap, over a real server."""

from __future__ import annotations

from pathlib import Path

from agentd.loop.subagents.limits import DEFAULT_CHILD_MAX_TURNS
from tests.support.client import text_prompt
from tests.support.routed import RoutedProvider
from tests.support.server import scripted
from tests.support.session import final_tool_updates, served_session, tool_call

ROAMER = """\
name = "roamer"
description = "Looks around without a cap of its own"
tools = ["list_dir", "glob"]
system_prompt = "You are the ROAMER."
"""


async def test_a_child_with_no_cap_anywhere_gets_the_documented_default(
    server_factory, workspace: Path, tmp_path: Path
):
    """000: "max_turns 是 Option<usize>，默认 None…只在子代理场景由定义或父代理填充" — neither the
    definition nor the parent sets a cap, yet the child stops after the documented default
    number of tool rounds (the `task` tool states it), never running unbounded."""
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "roamer.toml").write_text(ROAMER)
    parent = scripted(
        {"tool_calls": [tool_call("task", "t1", agent="roamer", prompt="look around")]},
        {"text": "the child stopped"},
    )
    # Every step different: no streak or cycle, so only the turn cap can stop it.
    child = scripted(
        *({"tool_calls": [{"name": "glob", "arguments": {"pattern": f"*.{i}"}}]} for i in range(12)),
        {"text": "never sampled: the cap ended the child"},
    )
    provider = RoutedProvider(parent, {"ROAMER": child})
    async with served_session(server_factory, workspace, provider, agents_dir=agents) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        task = next(t for t in parent.requests[0].tools if t.name == "task")
        assert f"else {DEFAULT_CHILD_MAX_TURNS}" in task.parameters["properties"]["max_turns"]["description"]
        assert len(child.requests) == DEFAULT_CHILD_MAX_TURNS == 10
        final = final_tool_updates(client, sid)["t1"]
        assert final["rawOutput"]["status"] == "max_turns_reached"
