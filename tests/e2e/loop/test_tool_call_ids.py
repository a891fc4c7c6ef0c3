"""Tool-call ids on the wire are unique within a session even when the provider reuses
them (some OpenAI-compatible servers answer `call_0` at every step): a client must never
see two different calls under one `toolCallId`. The conversation carries the renamed ids
both ways, so the provider's history stays consistent."""

from __future__ import annotations

from pathlib import Path

from agentd.core.conversation import ToolCall
from agentd.infra.config import PermissionMode
from agentd.loop.react.sampling import unique_tool_call_id
from tests.support.client import text_prompt
from tests.support.server import scripted
from tests.support.session import served_session


def _ls(call_id: str) -> dict:
    return {"name": "list_dir", "arguments": {"path": "."}, "id": call_id}


def test_a_reused_id_gets_the_next_free_suffix() -> None:
    assert unique_tool_call_id("call_0", set(), []) == "call_0"
    assert unique_tool_call_id("call_0", {"call_0"}, []) == "call_0_2"
    assert unique_tool_call_id("call_0", {"call_0", "call_0_2"}, []) == "call_0_3"
    pending = [ToolCall(id="x", name="n", arguments="{}")]
    assert unique_tool_call_id("x", set(), pending) == "x_2"


async def test_reused_provider_ids_become_distinct_tool_calls(
    server_factory, workspace: Path, db_url: str
) -> None:
    provider = scripted(
        {"tool_calls": [_ls("call_0"), _ls("call_0")]},  # twice in one response
        {"tool_calls": [_ls("call_0")]},  # and again in the next step
        {"text": "done"},
        {"tool_calls": [_ls("call_0")]},  # and in the next prompt, after a restart
        {"text": "done again"},
    )
    async with served_session(
        server_factory, workspace, provider, database_url=db_url, permission_mode=PermissionMode.BYPASS
    ) as (_, client, sid):
        assert (await client.call("session/prompt", text_prompt(sid, "look around")))[
            "stopReason"
        ] == "end_turn"
        created = [u["toolCallId"] for u in client.updates(sid) if u["sessionUpdate"] == "tool_call"]
        assert created == ["call_0", "call_0_2", "call_0_3"]
        # Every call finished under its own id.
        done = [
            u["toolCallId"]
            for u in client.updates(sid)
            if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"
        ]
        assert sorted(done) == sorted(created)
        # The provider saw each result paired with the call that asked for it.
        last = provider.requests[2].messages
        calls = [c.id for m in last if m.role == "assistant" for c in m.tool_calls]
        results = [m.tool_call_id for m in last if m.role == "tool"]
        assert calls == results == ["call_0", "call_0_2", "call_0_3"]
    # A reloaded session still knows the ids it used.
    async with server_factory(provider, database_url=db_url, permission_mode=PermissionMode.BYPASS) as server:
        client = await server.client()
        await client.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        await client.call("session/prompt", text_prompt(sid, "once more"))
        created = [u["toolCallId"] for u in client.updates(sid) if u["sessionUpdate"] == "tool_call"]
        assert created == ["call_0", "call_0_2", "call_0_3", "call_0_4"]
        await client.close()
