"""`todo_write` and the TodoGate (R-L3f) over the real server.

- `todo_write` publishes the complete list as an ACP `plan` session/update (content,
  priority — medium when not given — and status of every entry);
- a model that stops with todo items still pending / in progress gets a nudge listing the
  open items (visible in the next provider request), at most 2 times per prompt; then
  the turn ends `end_turn` and the turn data says how many todos remain;
- a model that completes its todos (todo_write with everything completed) is not nudged;
- no TodoGate when the prompt has `_meta.agentd.outputSchema` or the stop is a refusal.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from agentd.core.provider import ProviderRequest
from agentd.infra.config import PermissionMode
from agentd.loop.structured import MISSING_CALL_TEXT, STRUCTURED_OUTPUT_TOOL
from agentd.providers.scripted import ScriptedProvider
from tests.support.client import WsClient, text_prompt
from tests.support.server import Server, scripted
from tests.support.session import assert_valid_frames, events, new_session

# ---------------------------------------------------------------------------- helpers

ServeFn = Callable[[Any], AbstractAsyncContextManager[Server]]


@pytest.fixture
def serve(server_factory) -> ServeFn:
    def start(provider: Any) -> AbstractAsyncContextManager[Server]:
        return server_factory(provider, permission_mode=PermissionMode.BYPASS)

    return start


def plans(client: WsClient, session_id: str) -> list[list[dict[str, Any]]]:
    return [u["entries"] for u in client.updates(session_id) if u["sessionUpdate"] == "plan"]


NUDGE_MARK = "Your todo list still has unfinished items"


def todo_nudges(request: ProviderRequest) -> list[str]:
    return [m.content for m in request.messages if m.role == "user" and NUDGE_MARK in m.content]


def write_todos(*todos: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {
        "text": "Updating the plan.",
        "tool_calls": [{"name": "todo_write", "arguments": {"todos": list(todos)}, "id": call_id}],
    }


PARSER = {"content": "Write the parser", "status": "in_progress", "priority": "high"}
TESTS = {"content": "Add tests", "status": "pending"}
SPEC = {"content": "Read the spec", "status": "completed", "priority": "low"}


def done(item: dict[str, Any]) -> dict[str, Any]:
    return {**item, "status": "completed"}


# ---------------------------------------------------------------------------- plan update


async def test_todo_write_sends_the_complete_list_as_an_acp_plan_update(serve: ServeFn, workspace: Path):
    provider = scripted(
        write_todos(PARSER, TESTS, SPEC, call_id="call_todo_1"),
        write_todos(done(PARSER), done(TESTS), done(SPEC), call_id="call_todo_2"),
        {"text": "Everything is done."},
    )
    async with serve(provider) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "build the parser"))

        assert result["stopReason"] == "end_turn"
        assert plans(client, sid) == [
            [
                {"content": "Write the parser", "priority": "high", "status": "in_progress"},
                {"content": "Add tests", "priority": "medium", "status": "pending"},
                {"content": "Read the spec", "priority": "low", "status": "completed"},
            ],
            [
                {"content": "Write the parser", "priority": "high", "status": "completed"},
                {"content": "Add tests", "priority": "medium", "status": "completed"},
                {"content": "Read the spec", "priority": "low", "status": "completed"},
            ],
        ]
        assert_valid_frames(client)
        await client.close()


# ---------------------------------------------------------------------------- the gate


async def test_stopping_with_open_todos_is_nudged_at_most_twice_per_prompt(serve: ServeFn, workspace: Path):
    provider = scripted(
        write_todos(PARSER, TESTS, SPEC, call_id="call_todo"),
        {"text": "I'm done."},
        {"text": "Really, I'm done."},
        {"text": "Stopping now, the rest is for later."},
        # The next prompt: the list is still open, so it gets its own two nudges.
        {"text": "Still not doing them."},
        {"text": "No."},
        {"text": "Final no."},
        {"text": "never sampled"},
    )
    async with serve(provider) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "build the parser"))

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["outcome"] == "completed"
        assert len(provider.requests) == 4
        # No nudge before the model first stops.
        assert todo_nudges(provider.requests[0]) == todo_nudges(provider.requests[1]) == []
        # Each stop with open items gets a nudge as the newest message of the next request.
        for n, request in ((1, provider.requests[2]), (2, provider.requests[3])):
            nudges = todo_nudges(request)
            assert len(nudges) == n
            assert request.messages[-1].role == "user" and NUDGE_MARK in request.messages[-1].content
        nudge = todo_nudges(provider.requests[2])[0]
        assert "- [in_progress] Write the parser" in nudge
        assert "- [pending] Add tests" in nudge
        assert "Read the spec" not in nudge  # completed items are not open

        # Per prompt: the next prompt starts with a fresh allowance of two.
        again = await client.call("session/prompt", text_prompt(sid, "what about the todos?"))
        assert again["stopReason"] == "end_turn"
        assert len(provider.requests) == 7
        assert len(todo_nudges(provider.requests[6])) == 4
        assert len(events(client, sid, "turn_started")) == 2
        await client.close()


async def test_completing_the_todos_means_no_nudge(serve: ServeFn, workspace: Path):
    provider = scripted(
        write_todos(PARSER, TESTS, call_id="call_todo_1"),
        write_todos(done(PARSER), done(TESTS), call_id="call_todo_2"),
        {"text": "All done."},
        {"text": "never sampled"},
    )
    async with serve(provider) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "build the parser"))

        assert result["stopReason"] == "end_turn"
        assert len(provider.requests) == 3
        assert all(todo_nudges(r) == [] for r in provider.requests)
        await client.close()


async def test_no_todo_gate_for_a_refusal(serve: ServeFn, workspace: Path):
    provider = scripted(
        write_todos(PARSER, TESTS, call_id="call_todo"),
        {"text": "I can't continue with this.", "stop": "refusal"},
        {"text": "never sampled"},
    )
    async with serve(provider) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "build the parser"))

        assert result["stopReason"] == "refusal"
        assert len(provider.requests) == 2
        assert all(todo_nudges(r) == [] for r in provider.requests)
        await client.close()


SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


async def test_no_todo_gate_with_an_output_schema_native(serve: ServeFn, workspace: Path):
    provider = ScriptedProvider.from_dict(
        {
            "steps": [
                write_todos(PARSER, TESTS, call_id="call_todo"),
                {"text": '{"answer": "42"}'},
                {"text": "never sampled"},
            ]
        },
        supports_native_schema=True,
    )
    async with serve(provider) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "answer in JSON", outputSchema=SCHEMA))

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["structuredOutput"] == {"value": {"answer": "42"}}
        assert len(provider.requests) == 2
        assert all(todo_nudges(r) == [] for r in provider.requests)
        await client.close()


async def test_no_todo_gate_with_an_output_schema_shim(serve: ServeFn, workspace: Path):
    provider = scripted(
        write_todos(PARSER, TESTS, call_id="call_todo"),
        {"text": "The answer is 42."},  # stops without the shim call: asked for it, not nudged
        {"tool_calls": [{"name": STRUCTURED_OUTPUT_TOOL, "arguments": {"answer": "42"}, "id": "call_so"}]},
        {"text": "never sampled"},
    )
    async with serve(provider) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "answer in JSON", outputSchema=SCHEMA))

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["structuredOutput"] == {"value": {"answer": "42"}}
        assert len(provider.requests) == 3
        assert (
            provider.requests[2]
            .messages[-1]
            .content.startswith(f"<system-reminder>\n{MISSING_CALL_TEXT[:40]}")
        )
        assert all(todo_nudges(r) == [] for r in provider.requests)
        await client.close()


# ---------------------------------------------------------------------------- turn data


async def test_turn_ended_records_todo_nudges_and_remaining_todos(serve: ServeFn, workspace: Path):
    provider = scripted(
        write_todos(PARSER, TESTS, SPEC, call_id="call_todo"),
        {"text": "Done."},
        {"text": "Done."},
        {"text": "Done."},
    )
    async with serve(provider) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "build the parser"))
        assert result["stopReason"] == "end_turn"

        ended = events(client, sid, "turn_ended")
        assert len(ended) == 1
        assert ended[0]["turn"]["todoNudges"] == 2
        assert ended[0]["turn"]["todosRemaining"] == 2
        await client.close()
