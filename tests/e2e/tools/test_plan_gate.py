"""The plan gate is independent of the permission layer (issue 16 item 8, R-T4).

Seed 000 §4.3: "plan 模式的编辑门 PlanEditGate 刻意独立于权限管理器…即便用户开了全部批准，plan
模式下的写操作依然被拦" — even with approve-all (bypass) on, plan mode's writes are refused.
Today plan and bypass are two values of one mode: picking bypass silently leaves plan.

Now plan is a flag of its own: `session/set_mode plan` (or `/plan`, or the `plan` config
option) turns it on; picking another mode sets the permission mode underneath and leaves
the gate on; `/plan off` or the `plan` config option `off` clears it. It is persisted with
the session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.infra.config import PermissionMode
from tests.support.client import WsClient, text_prompt
from tests.support.server import scripted
from tests.support.session import (
    assert_valid_frames,
    events,
    final_tool_updates,
    new_session,
    shown_text,
    tool_call,
)


def mode_ids(client: WsClient, sid: str) -> list[str]:
    return [u["currentModeId"] for u in client.updates(sid) if u["sessionUpdate"] == "current_mode_update"]


def option(options: list[dict[str, Any]], option_id: str) -> dict[str, Any]:
    return next(o for o in options if o["id"] == option_id)


async def local(client: WsClient, sid: str, text: str) -> str:
    result = await client.call("session/prompt", text_prompt(sid, text))
    assert result["_meta"]["agentd"]["reason"].startswith("local_command:")
    chunks = [u for u in client.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]
    return str(chunks[-1]["content"]["text"])


async def test_bypass_does_not_open_the_plan_gate(server_factory, workspace: Path) -> None:
    """Seed 000: "即便用户开了全部批准，plan 模式下的写操作依然被拦"."""
    provider = scripted(
        {"tool_calls": [tool_call("write_file", "call_w", path="a.txt", content="a")]},
        {"tool_calls": [tool_call("bash", "call_b", command="touch b.txt")]},
        {"text": "nothing changed"},
        {"tool_calls": [tool_call("write_file", "call_w2", path="a.txt", content="a")]},
        {"text": "wrote a"},
    )
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        await client.call("session/set_mode", {"sessionId": sid, "modeId": "plan"})
        await client.call("session/set_mode", {"sessionId": sid, "modeId": "bypass"})
        # The gate stays on: every client is told the session still shows `plan`.
        assert mode_ids(client, sid) == ["plan", "plan"]
        assert [e["plan"] for e in events(client, sid, "plan_mode")] == [True]
        loaded = await client.call(
            "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        )
        assert loaded["modes"]["currentModeId"] == "plan"
        assert option(loaded["configOptions"], "plan")["currentValue"] == "on"

        result = await client.call("session/prompt", text_prompt(sid, "change things"))
        assert result["stopReason"] == "end_turn"
        assert not (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()
        finals = final_tool_updates(client, sid)
        for call_id in ("call_w", "call_b"):
            assert finals[call_id]["status"] == "failed"
            assert "plan mode is read-only" in shown_text(finals[call_id])

        # Clearing the gate leaves bypass (chosen under it) in force: no question, the write runs.
        text = await local(client, sid, "/plan off")
        assert text.startswith("Plan mode is off (permission mode: bypass)")
        assert mode_ids(client, sid)[-1] == "bypass"
        assert [e["plan"] for e in events(client, sid, "plan_mode")] == [True, False]
        result = await client.call("session/prompt", text_prompt(sid, "now write"))
        assert result["stopReason"] == "end_turn"
        assert (workspace / "a.txt").read_text() == "a"
        assert_valid_frames(client)
        await client.close()


async def test_the_plan_option_sets_and_clears_the_gate_alone(server_factory, workspace: Path) -> None:
    async with server_factory(
        scripted({"text": "unused"}), permission_mode=PermissionMode.ACCEPT_EDITS
    ) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        on = await client.call(
            "session/set_config_option", {"sessionId": sid, "configId": "plan", "value": "on"}
        )
        assert option(on["configOptions"], "plan")["currentValue"] == "on"
        assert option(on["configOptions"], "mode")["currentValue"] == "plan"
        off = await client.call(
            "session/set_config_option", {"sessionId": sid, "configId": "plan", "value": "off"}
        )
        assert option(off["configOptions"], "mode")["currentValue"] == "accept_edits"
        bad = await client.request(
            "session/set_config_option", {"sessionId": sid, "configId": "plan", "value": "maybe"}
        )
        assert bad["error"]["code"] == -32602
        assert mode_ids(client, sid) == ["plan", "accept_edits"]
        assert_valid_frames(client)
        await client.close()


async def test_the_plan_gate_survives_a_restart(server_factory, workspace: Path, db_url: str) -> None:
    async with server_factory(scripted({"text": "unused"}), database_url=db_url) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        await client.call("session/set_mode", {"sessionId": sid, "modeId": "bypass"})
        assert (await local(client, sid, "/plan")).startswith("Plan mode is on")
        await client.close()

    provider = scripted(
        {"tool_calls": [tool_call("write_file", "call_w", path="a.txt", content="a")]},
        {"text": "could not"},
    )
    async with server_factory(provider, database_url=db_url) as server:
        client = await server.client()
        loaded = await client.call(
            "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        )
        assert loaded["modes"]["currentModeId"] == "plan"
        assert option(loaded["configOptions"], "plan")["currentValue"] == "on"
        result = await client.call("session/prompt", text_prompt(sid, "write"))
        assert result["stopReason"] == "end_turn"
        assert not (workspace / "a.txt").exists()
        assert (await local(client, sid, "/plan status")).startswith("Plan mode is on")
        assert (await local(client, sid, "/plan off")).startswith(
            "Plan mode is off (permission mode: bypass)"
        )
        await client.close()
