"""Issue 30 item 6: the loop's reminders as the seeds inject them, over a real server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.core.provider import ProviderRequest
from agentd.infra.config import PermissionMode
from agentd.loop.reminders import is_system_reminder
from agentd.loop.structured import STRUCTURED_OUTPUT_TOOL
from tests.support.client import text_prompt
from tests.support.server import scripted
from tests.support.session import served_session


def last(request: ProviderRequest) -> tuple[str, str]:
    message = request.messages[-1]
    return message.role, message.content


async def test_the_loops_nudges_are_system_reminders_in_a_user_message(server_factory, workspace: Path):
    """001: "<system-reminder> 标签会作为某条 user content 里的文本" — the stationarity nudge and the
    TodoGate nudge reach the model as `<system-reminder>` text in a user message."""
    same = {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]}
    todos = {"todos": [{"content": "Write the parser", "status": "pending"}]}
    provider = scripted(
        {"tool_calls": [{"name": "todo_write", "arguments": todos, "id": "call_todo"}]},
        *([same] * 8),
        {"text": "I stopped polling."},
        {"text": "Done, really."},
    )
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "work"))
        assert result["stopReason"] == "end_turn"

        # After the 8th identical step: the stationarity nudge.
        role, text = last(provider.requests[9])
        assert role == "user" and is_system_reminder(text) and "stop polling" in text
        # After the model stopped with a pending todo: the TodoGate nudge.
        role, text = last(provider.requests[10])
        assert role == "user" and is_system_reminder(text) and "Write the parser" in text


async def test_the_structured_output_tool_says_what_000_says(server_factory, workspace: Path):
    """000: the StructuredOutput pseudo-tool's description is "Return your final answer as JSON
    matching the required schema..."; its retry after a stop without the call is a
    `<system-reminder>` in a user message (001)."""
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    provider = scripted(
        {"text": "the answer is 3"},
        {"tool_calls": [{"name": STRUCTURED_OUTPUT_TOOL, "arguments": {"n": 3}}]},
        {"text": "unused"},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "count", outputSchema=schema))

        assert result["stopReason"] == "end_turn"
        tool = next(t for t in provider.requests[0].tools if t.name == STRUCTURED_OUTPUT_TOOL)
        assert tool.description.startswith("Return your final answer as JSON matching the required schema")
        role, text = last(provider.requests[1])
        assert role == "user" and is_system_reminder(text) and STRUCTURED_OUTPUT_TOOL in text
