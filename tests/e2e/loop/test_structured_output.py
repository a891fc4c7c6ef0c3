"""R-L3e end to end: a prompt's JSON Schema (`_meta.agentd.outputSchema`) for the final
answer, over a real WebSocket with the scripted provider.

Shim path (provider without native schema support): the schema becomes the parameters of
a `StructuredOutput` pseudo-tool, validation errors go back as its tool result; after three
retries (four failed attempts) the turn completes with `structuredOutput: {"error": ...}`. Native path:
the request carries the schema and the final text is validated as JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentd.core.provider import ProviderRequest
from agentd.infra.config import PermissionMode
from agentd.loop.structured import (
    ACCEPTED_TEXT,
    MISSING_CALL_TEXT,
    MIXED_CALL_TEXT,
    SHIM_REMINDER,
    STRUCTURED_OUTPUT_TOOL,
)
from agentd.providers.scripted import ScriptedProvider
from tests.support.client import RpcFailed, WsClient, text_prompt
from tests.support.server import scripted
from tests.support.session import assert_valid_frames, events, served_session

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["answer"],
    "additionalProperties": False,
}


def so_call(arguments: dict[str, Any] | str, call_id: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"name": STRUCTURED_OUTPUT_TOOL, "arguments": arguments}
    if call_id is not None:
        call["id"] = call_id
    return call


def tool_named(request: ProviderRequest, name: str) -> Any:
    return next((t for t in request.tools if t.name == name), None)


def tool_updates(client: WsClient, sid: str, call_id: str) -> list[dict[str, Any]]:
    return [u for u in client.updates(sid) if u.get("toolCallId") == call_id]


async def prompt_with_schema(client: WsClient, sid: str, text: str, schema: Any = SCHEMA) -> dict[str, Any]:
    return await client.call("session/prompt", text_prompt(sid, text, outputSchema=schema))


# --------------------------------------------------------------------------------------------
# Shim path


async def test_shim_offers_the_schema_as_a_tool_and_a_valid_call_completes_the_turn(
    server_factory, workspace: Path
) -> None:
    provider = scripted({"tool_calls": [so_call({"answer": "42", "confidence": 0.9}, "call_so")]})
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        result = await prompt_with_schema(client, sid, "What is the answer?")

        assert result["stopReason"] == "end_turn"
        meta = result["_meta"]["agentd"]
        assert meta["outcome"] == "completed"
        assert meta["structuredOutput"] == {"value": {"answer": "42", "confidence": 0.9}}
        # Accepted on the first call: no further provider request.
        assert len(provider.requests) == 1
        request = provider.requests[0]
        shim = tool_named(request, STRUCTURED_OUTPUT_TOOL)
        assert shim is not None and shim.parameters == SCHEMA  # the parameters ARE the schema
        assert tool_named(request, "read_file") is not None  # the real tools are still offered
        # 001: the reminder is `<system-reminder>` text in a user message, not the system prompt.
        assert SHIM_REMINDER not in request.system
        assert request.messages[-1].role == "user"
        assert request.messages[-1].content.endswith(
            f"<system-reminder>\n{SHIM_REMINDER}\n</system-reminder>"
        )
        assert request.messages[-1].content.startswith("What is the answer?")
        assert request.output_schema is None  # not the native path
        # The shim call shows up as a completed tool call; it never ran as a real tool.
        updates = tool_updates(client, sid, "call_so")
        assert updates[0]["sessionUpdate"] == "tool_call"
        assert updates[-1]["status"] == "completed"
        assert ACCEPTED_TEXT in json.dumps(updates[-1]["content"])
        assert_valid_frames(client)


async def test_shim_invalid_call_gets_the_validation_error_as_its_result_and_the_model_retries(
    server_factory, workspace: Path
) -> None:
    provider = scripted(
        {"tool_calls": [so_call({"answer": 42}, "call_bad")]},
        {"tool_calls": [so_call({"answer": "forty-two"}, "call_good")]},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        result = await prompt_with_schema(client, sid, "What is the answer?")

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["structuredOutput"] == {"value": {"answer": "forty-two"}}
        assert len(provider.requests) == 2
        # What the model saw next: its call, then the validation error as that call's result.
        retry = provider.requests[1]
        call_msg, result_msg = retry.messages[-2:]
        assert [c.id for c in call_msg.tool_calls] == ["call_bad"]
        assert result_msg.role == "tool" and result_msg.tool_call_id == "call_bad"
        assert result_msg.name == STRUCTURED_OUTPUT_TOOL and result_msg.is_error
        assert "does not match the schema" in result_msg.content
        assert "at answer: 42 is not of type 'string'" in result_msg.content
        assert "3 attempt(s) left" in result_msg.content
        # The retry still offers the shim with the same schema.
        assert tool_named(retry, STRUCTURED_OUTPUT_TOOL).parameters == SCHEMA
        assert tool_updates(client, sid, "call_bad")[-1]["status"] == "failed"
        assert tool_updates(client, sid, "call_good")[-1]["status"] == "completed"
        assert_valid_frames(client)


async def test_shim_three_retries_then_the_turn_completes_with_the_error(
    server_factory, workspace: Path
) -> None:
    """000: "STRUCTURED_OUTPUT_MAX_RETRIES = 3 （turn.rs:10）用尽后，turn 仍以 Completed 结束，
    只是结果里携带 structured_output: Some(Err(..))" — three *retries* after the first attempt,
    so the model gets four attempts before the turn completes carrying the error."""
    provider = scripted(
        {"tool_calls": [so_call({})]},  # missing required
        {"tool_calls": [so_call({"answer": "x", "confidence": 7})]},  # out of range
        {"tool_calls": [so_call({"answer": "x", "confidence": -1})]},  # below the minimum
        {"tool_calls": [so_call({"answer": "x", "extra": True})]},  # additional property
        {"text": "never requested"},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        result = await prompt_with_schema(client, sid, "What is the answer?")

        # Exhausted: the turn still completes (not a JSON-RPC error), carrying the error.
        assert result["stopReason"] == "end_turn"
        meta = result["_meta"]["agentd"]
        assert meta["outcome"] == "completed"
        structured = meta["structuredOutput"]
        assert set(structured) == {"error"}
        assert "does not match the schema" in structured["error"]
        assert "extra" in structured["error"]  # the last attempt's problem
        assert len(provider.requests) == 4  # the first attempt and three retries, no fifth
        first_error = provider.requests[1].messages[-1]
        assert "'answer' is a required property" in first_error.content
        assert "3 attempt(s) left" in first_error.content
        second_error = provider.requests[2].messages[-1]
        assert "at confidence: 7 is greater than the maximum of 1" in second_error.content
        assert "2 attempt(s) left" in second_error.content
        third_error = provider.requests[3].messages[-1]
        assert "at confidence: -1 is less than the minimum of 0" in third_error.content
        assert "1 attempt(s) left" in third_error.content
        assert [e["turn"]["structuredAttempts"] for e in events(client, sid, "turn_ended")] == [4]
        assert_valid_frames(client)


async def test_shim_call_mixed_with_a_real_tool_is_rejected_while_the_real_tool_runs(
    server_factory, workspace: Path
) -> None:
    provider = scripted(
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "out.txt", "content": "data\n"}, "id": "call_w"},
                so_call({"answer": "written"}, "call_so_early"),
            ]
        },
        {"tool_calls": [so_call({"answer": "written"}, "call_so")]},
    )
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        result = await prompt_with_schema(client, sid, "Write out.txt, then report.")

        assert (workspace / "out.txt").read_text() == "data\n"  # the real tool ran
        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["structuredOutput"] == {"value": {"answer": "written"}}
        assert len(provider.requests) == 2
        write_result, shim_result = provider.requests[1].messages[-2:]
        assert write_result.tool_call_id == "call_w" and not write_result.is_error
        assert shim_result.tool_call_id == "call_so_early" and shim_result.is_error
        assert shim_result.content == MIXED_CALL_TEXT  # readable: says why and what to do
        assert tool_updates(client, sid, "call_w")[-1]["status"] == "completed"
        assert tool_updates(client, sid, "call_so_early")[-1]["status"] == "failed"
        assert_valid_frames(client)


async def test_shim_a_model_that_stops_without_calling_gets_a_reminder(
    server_factory, workspace: Path
) -> None:
    provider = scripted(
        {"text": "The answer is 42."},
        {"tool_calls": [so_call({"answer": "42"})]},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        result = await prompt_with_schema(client, sid, "What is the answer?")

        assert result["_meta"]["agentd"]["structuredOutput"] == {"value": {"answer": "42"}}
        assert len(provider.requests) == 2
        stopped, reminder = provider.requests[1].messages[-2:]
        assert stopped.role == "assistant" and stopped.content == "The answer is 42."
        assert reminder.role == "user"
        assert reminder.content.startswith(f"<system-reminder>\n{MISSING_CALL_TEXT}")
        assert "3 attempt(s) left" in reminder.content  # it counted as an attempt
        assert_valid_frames(client)


async def test_shim_stopping_without_the_call_counts_towards_the_four_attempts(
    server_factory, workspace: Path
) -> None:
    provider = scripted(
        {"text": "Plain answer."},
        {"tool_calls": [so_call({"answer": 1})]},
        {"text": "Still plain."},
        {"text": "Plain again."},
        {"text": "never requested"},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        result = await prompt_with_schema(client, sid, "What is the answer?")

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["structuredOutput"] == {"error": MISSING_CALL_TEXT}
        assert len(provider.requests) == 4
        assert "1 attempt(s) left" in provider.requests[3].messages[-1].content
        assert_valid_frames(client)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "objekt"}, "the output schema is not a valid JSON Schema"),
        ({"type": "string"}, 'the output schema must describe an object ("type": "object")'),
    ],
    ids=["not-a-json-schema", "not-an-object-schema"],
)
@pytest.mark.parametrize("native", [False, True], ids=["shim-provider", "native-provider"])
async def test_an_invalid_user_schema_short_circuits_every_attempt(
    server_factory, workspace: Path, schema: dict[str, Any], expected: str, native: bool
) -> None:
    provider = ScriptedProvider.from_dict(
        {"steps": [{"tool_calls": [so_call({"answer": "x"}, f"call_{i}")]} for i in range(4)]},
        supports_native_schema=native,
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        result = await prompt_with_schema(client, sid, "Answer.", schema=schema)

        assert result["stopReason"] == "end_turn"
        meta = result["_meta"]["agentd"]
        assert meta["outcome"] == "completed"
        error = meta["structuredOutput"]["error"]
        assert set(meta["structuredOutput"]) == {"error"}
        assert expected in error
        assert len(provider.requests) == 4
        for request in provider.requests:
            # A broken schema never goes to the provider, neither natively nor as tool parameters.
            assert request.output_schema is None
            shim = tool_named(request, STRUCTURED_OUTPUT_TOOL)
            assert shim is not None and shim.parameters != schema
            assert shim.parameters.get("type") == "object"
        # Every attempt (even a perfectly reasonable value) got the schema error back.
        for n, request in enumerate(provider.requests[1:]):
            last = request.messages[-1]
            assert last.role == "tool" and last.tool_call_id == f"call_{n}" and last.is_error
            assert expected in last.content
        assert_valid_frames(client)


@pytest.mark.parametrize("bad", ['{"type": "object"}', ["type", "object"], 7, True])
async def test_a_non_object_output_schema_is_invalid_params(
    server_factory, workspace: Path, bad: Any
) -> None:
    provider = scripted({"text": "never requested"})
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        with pytest.raises(RpcFailed) as failed:
            await prompt_with_schema(client, sid, "Answer.", schema=bad)
        assert failed.value.code == -32602
        assert "outputSchema" in failed.value.error["message"]
        assert provider.requests == []  # refused before any turn started
        # The session is still usable.
        result = await client.call("session/prompt", text_prompt(sid, "plain"))
        assert result["stopReason"] == "end_turn"
        assert "structuredOutput" not in result["_meta"]["agentd"]
        assert_valid_frames(client)


# --------------------------------------------------------------------------------------------
# Native path


def native(*steps: dict[str, Any]) -> ScriptedProvider:
    return ScriptedProvider.from_dict({"steps": list(steps)}, supports_native_schema=True)


async def test_native_request_carries_the_schema_and_valid_json_completes(
    server_factory, workspace: Path
) -> None:
    provider = native({"text": '{"answer": "42", "confidence": 1}', "chunk_size": 5})
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        result = await prompt_with_schema(client, sid, "What is the answer?")

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["structuredOutput"] == {"value": {"answer": "42", "confidence": 1}}
        assert len(provider.requests) == 1
        request = provider.requests[0]
        assert request.output_schema == SCHEMA
        assert tool_named(request, STRUCTURED_OUTPUT_TOOL) is None
        assert SHIM_REMINDER not in request.system
        assert all(SHIM_REMINDER not in m.content for m in request.messages)
        assert tool_named(request, "read_file") is not None
        assert_valid_frames(client)


async def test_native_invalid_answers_are_retried_with_the_error_message(
    server_factory, workspace: Path
) -> None:
    provider = native(
        {"text": "Sure! The answer is 42."},
        {"text": '{"answer": 42}'},
        {"text": '{"answer": "42"}'},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        result = await prompt_with_schema(client, sid, "What is the answer?")

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["structuredOutput"] == {"value": {"answer": "42"}}
        assert len(provider.requests) == 3
        for request in provider.requests:
            assert request.output_schema == SCHEMA
            assert tool_named(request, STRUCTURED_OUTPUT_TOOL) is None
        not_json = provider.requests[1].messages[-1]
        assert not_json.role == "user"
        assert "The answer is not valid JSON" in not_json.content
        assert "3 attempt(s) left" in not_json.content
        wrong = provider.requests[2].messages[-1]
        assert wrong.role == "user"
        assert "at answer: 42 is not of type 'string'" in wrong.content
        assert_valid_frames(client)


async def test_native_four_invalid_answers_complete_with_the_error(server_factory, workspace: Path) -> None:
    provider = native(
        {"text": "no"}, {"text": "[1, 2]"}, {"text": "{}"}, {"text": '{"answer": null}'}, {"text": "unused"}
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        result = await prompt_with_schema(client, sid, "What is the answer?")

        assert result["stopReason"] == "end_turn"
        structured = result["_meta"]["agentd"]["structuredOutput"]
        assert set(structured) == {"error"}
        assert "None is not of type 'string'" in structured["error"]
        assert len(provider.requests) == 4
        assert_valid_frames(client)


async def test_native_retry_text_does_not_mention_the_missing_shim_tool(
    server_factory, workspace: Path
) -> None:
    provider = native({"text": "not json"}, {"text": '{"answer": "ok"}'})
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        result = await prompt_with_schema(client, sid, "What is the answer?")
        assert result["_meta"]["agentd"]["structuredOutput"] == {"value": {"answer": "ok"}}
        retry = provider.requests[1].messages[-1]
        assert tool_named(provider.requests[1], STRUCTURED_OUTPUT_TOOL) is None
        assert STRUCTURED_OUTPUT_TOOL not in retry.content
