"""Completion requirement (R-L2b) over a real WebSocket, with agent definitions loaded from
a tmp `agents_dir` (TOML and Markdown files) and picked by `_meta.agentd.agent` on
`session/new` or by `session/set_config_option` (configId `agent`).

When L3 completes without the required tool having run:
- a reminder user message is appended (the next provider request ends with it);
- a `completion_recovery` event says `attempt` n and `delaySeconds` min(base·2^(n-1), max);
- L3 runs again, at most `max_retries` times; exhausted → the last result, marked
  `_meta.agentd.reason == "auto_recovery_exhausted"` and `turn.autoRecoveryExhausted`;
- recovery rounds do not force the output schema (no StructuredOutput tool, no native
  `output_schema` in the request);
- MaxTurnsReached, StationarityEnded and refusals never enter recovery;
- calling the tool (in the first round or in a recovery round) ends the turn normally.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentd.core.provider import ProviderRequest
from agentd.loop.structured import SHIM_REMINDER, STRUCTURED_OUTPUT_TOOL
from agentd.loop.turn import RECOVERY_TEXT
from agentd.providers.scripted import ScriptedProvider
from tests.support.client import RpcFailed, text_prompt
from tests.support.server import scripted
from tests.support.session import assert_valid_frames, events, open_session, served_session, the_turn_end

NEVER = {"text": "this step must never be sampled"}
REMINDER = RECOVERY_TEXT.format(tool="todo_write")

PLANNER_TOML = """\
name = "planner"
description = "Plans with todo_write"
tools = ["list_dir", "todo_write"]

[completion]
tool = "todo_write"
max_retries = 4
base_delay_ms = 10
max_delay_ms = 40
"""

CAPPED_TOML = """\
name = "capped"
description = "One tool round, must write a plan"
tools = ["list_dir", "todo_write"]
max_turns = 1

[completion]
tool = "todo_write"
max_retries = 2
base_delay_ms = 10
max_delay_ms = 40
"""

EXTRACTOR_MD = """\
---
name: extractor
description: Answers in a schema
tools: [list_dir]
completion: StructuredOutput
completion.max_retries: 1
completion.base_delay_ms: 10
completion.max_delay_ms: 40
output_schema: {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}
---
You summarise things as JSON.
"""


@pytest.fixture
def agents_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "planner.toml").write_text(PLANNER_TOML)
    (folder / "capped.toml").write_text(CAPPED_TOML)
    (folder / "extractor.md").write_text(EXTRACTOR_MD)
    return folder


# ---------------------------------------------------------------------------- helpers


def agent_option(config_options: list[dict[str, Any]]) -> dict[str, Any]:
    (option,) = [o for o in config_options if o["id"] == "agent"]
    return option


def last_message(request: ProviderRequest) -> tuple[str, str]:
    m = request.messages[-1]
    return m.role, m.content


def tool_names(request: ProviderRequest) -> list[str]:
    return [t.name for t in request.tools]


def todo_write_call(call_id: str) -> dict[str, Any]:
    todos = [{"content": "write the plan", "status": "completed"}]
    return {"name": "todo_write", "arguments": {"todos": todos}, "id": call_id}


def list_dir_call(call_id: str) -> dict[str, Any]:
    return {"name": "list_dir", "arguments": {"path": "."}, "id": call_id}


# ---------------------------------------------------------------------------- recovery and exhaustion


async def test_missing_completion_tool_reminds_backs_off_reruns_and_exhausts(
    server_factory, workspace: Path, agents_dir: Path
):
    provider = scripted(*({"text": f"answer {i}"} for i in range(1, 6)), NEVER)
    async with server_factory(provider, agents_dir=agents_dir) as server:
        client = await server.client()
        created = await open_session(client, workspace, agent="planner")
        sid = created["sessionId"]
        assert agent_option(created["configOptions"])["currentValue"] == "planner"

        result = await client.call("session/prompt", text_prompt(sid, "plan the work"))

        # The first run plus max_retries = 4 recovery runs, each exactly one request.
        assert len(provider.requests) == 5
        assert last_message(provider.requests[0]) == ("user", "plan the work")
        for request in provider.requests[1:]:
            # The reminder is the newest message the model sees in every recovery round.
            assert last_message(request) == ("user", REMINDER)
        # Recovery rounds keep the agent's tools: the model can still call todo_write.
        assert all("todo_write" in tool_names(r) for r in provider.requests)

        recoveries = events(client, sid, "completion_recovery")
        assert [(e["tool"], e["attempt"], e["maxRetries"]) for e in recoveries] == [
            ("todo_write", n, 4) for n in (1, 2, 3, 4)
        ]
        # min(base·2^(n-1), max) with base 10 ms and max 40 ms.
        assert [e["delaySeconds"] for e in recoveries] == [0.01, 0.02, 0.04, 0.04]

        # Exhausted: the last result, marked.
        assert result["stopReason"] == "end_turn"
        meta = result["_meta"]["agentd"]
        assert (meta["outcome"], meta["reason"]) == ("completed", "auto_recovery_exhausted")
        ended = the_turn_end(client, sid)
        assert ended["reason"] == "auto_recovery_exhausted"
        assert ended["turn"]["autoRecoveryExhausted"] is True
        assert ended["turn"]["completionRecoveries"] == 4
        notices = events(client, sid, "notice")
        assert any("todo_write" in n["title"] for n in notices), notices
        assert_valid_frames(client)
        await client.close()


async def test_calling_the_tool_in_a_recovery_round_ends_normally(
    server_factory, workspace: Path, agents_dir: Path
):
    provider = scripted(
        {"text": "Done, no plan needed."},
        {"expect": REMINDER, "text": "Writing the plan.", "tool_calls": [todo_write_call("call_todo")]},
        {"text": "Plan written."},
        NEVER,
    )
    async with served_session(
        server_factory, workspace, provider, agents_dir=agents_dir, agent="planner"
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "plan the work"))

        assert len(provider.requests) == 3
        assert result["stopReason"] == "end_turn"
        assert "reason" not in result["_meta"]["agentd"]
        assert [e["attempt"] for e in events(client, sid, "completion_recovery")] == [1]
        ended = the_turn_end(client, sid)
        assert ended["turn"]["completionRecoveries"] == 1
        assert "autoRecoveryExhausted" not in ended["turn"]
        assert ended["toolsCalled"] == 1


async def test_calling_the_tool_in_the_first_round_needs_no_recovery(
    server_factory, workspace: Path, agents_dir: Path
):
    provider = scripted(
        {"text": "Planning.", "tool_calls": [todo_write_call("call_todo")]},
        {"text": "Plan written."},
        NEVER,
    )
    async with served_session(
        server_factory, workspace, provider, agents_dir=agents_dir, agent="planner"
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "plan the work"))

        assert len(provider.requests) == 2
        assert result["stopReason"] == "end_turn" and "reason" not in result["_meta"]["agentd"]
        assert events(client, sid, "completion_recovery") == []
        turn = the_turn_end(client, sid)["turn"]
        assert "completionRecoveries" not in turn and "autoRecoveryExhausted" not in turn


async def test_default_agent_has_no_completion_requirement(server_factory, workspace: Path, agents_dir: Path):
    provider = scripted({"text": "Just an answer."}, NEVER)
    async with server_factory(provider, agents_dir=agents_dir) as server:
        client = await server.client()
        created = await open_session(client, workspace)
        sid = created["sessionId"]
        assert agent_option(created["configOptions"])["currentValue"] == "default"

        result = await client.call("session/prompt", text_prompt(sid, "hi"))

        assert len(provider.requests) == 1
        assert result["stopReason"] == "end_turn"
        assert events(client, sid, "completion_recovery") == []
        await client.close()


# ---------------------------------------------------------------------------- the schema is not forced


@pytest.mark.parametrize("native", [False, True], ids=["shim", "native"])
async def test_recovery_rounds_do_not_force_the_output_schema(
    server_factory, workspace: Path, agents_dir: Path, native: bool
):
    # The first L3 run never produces the structured answer (4 failed attempts: the first
    # and three retries), so it completes without StructuredOutput and recovery starts.
    provider = ScriptedProvider.from_dict(
        {
            "steps": [
                {"text": "no json here"},
                {"text": "still none"},
                {"text": "nope"},
                {"text": "not yet"},
                {"text": "ok"},
                NEVER,
            ]
        },
        supports_native_schema=native,
    )
    async with served_session(
        server_factory, workspace, provider, agents_dir=agents_dir, agent="extractor"
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "summarise"))

        assert len(provider.requests) == 5
        forced, recovery = provider.requests[:4], provider.requests[4]
        for request in forced:
            if native:
                assert request.output_schema is not None
                assert STRUCTURED_OUTPUT_TOOL not in tool_names(request)
            else:
                assert request.output_schema is None
                assert STRUCTURED_OUTPUT_TOOL in tool_names(request)
        # The recovery round forces nothing: no native schema. Because the requirement IS
        # StructuredOutput, the pseudo-tool stays offered (unforced) so the model can comply.
        assert recovery.output_schema is None
        assert tool_names(recovery) == ["list_dir", STRUCTURED_OUTPUT_TOOL]
        # The recovery reminder is the last user message; the request adds the shim's own
        # reminder to it (the offered StructuredOutput tool), both as <system-reminder> text.
        role, text = last_message(recovery)
        assert role == "user" and text.startswith(RECOVERY_TEXT.format(tool=STRUCTURED_OUTPUT_TOOL))
        assert text.endswith(f"{SHIM_REMINDER}\n</system-reminder>")

        recoveries = events(client, sid, "completion_recovery")
        assert [(e["tool"], e["attempt"], e["delaySeconds"]) for e in recoveries] == [
            (STRUCTURED_OUTPUT_TOOL, 1, 0.01)
        ]
        assert result["_meta"]["agentd"]["reason"] == "auto_recovery_exhausted"
        assert the_turn_end(client, sid)["turn"]["autoRecoveryExhausted"] is True


@pytest.mark.parametrize("native", [False, True], ids=["shim", "native"])
async def test_a_valid_structured_output_satisfies_a_structured_output_requirement(
    server_factory, workspace: Path, agents_dir: Path, native: bool
):
    answer = {"summary": "two files"}
    step: dict[str, Any] = (
        {"text": json.dumps(answer)}
        if native
        else {"tool_calls": [{"name": STRUCTURED_OUTPUT_TOOL, "arguments": answer, "id": "call_so"}]}
    )
    provider = ScriptedProvider.from_dict({"steps": [step, NEVER, NEVER]}, supports_native_schema=native)
    async with served_session(
        server_factory, workspace, provider, agents_dir=agents_dir, agent="extractor"
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "summarise"))

        meta = result["_meta"]["agentd"]
        assert meta.get("structuredOutput") == {"value": answer}, meta
        assert "reason" not in meta, meta
        assert events(client, sid, "completion_recovery") == []
        assert len(provider.requests) == 1


# ---------------------------------------------------------------------------- no recovery for final stops


async def test_max_turns_reached_never_enters_recovery(server_factory, workspace: Path, agents_dir: Path):
    provider = scripted(
        {"tool_calls": [list_dir_call("call_1")]},
        NEVER,  # max_turns = 1: the first round ends the turn without sampling again
    )
    async with served_session(server_factory, workspace, provider, agents_dir=agents_dir, agent="capped") as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "look around"))

        assert result["stopReason"] == "max_turn_requests"
        assert result["_meta"]["agentd"]["reason"] == "max_turns_reached"
        assert len(provider.requests) == 1
        assert events(client, sid, "completion_recovery") == []
        turn = the_turn_end(client, sid)["turn"]
        assert "completionRecoveries" not in turn and "autoRecoveryExhausted" not in turn


async def test_stationarity_stop_never_enters_recovery(server_factory, workspace: Path, agents_dir: Path):
    provider = scripted(*({"tool_calls": [list_dir_call(f"call_{i}")]} for i in range(16)), NEVER)
    async with served_session(
        server_factory, workspace, provider, agents_dir=agents_dir, agent="planner"
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "look around"))

        assert result["_meta"]["agentd"]["outcome"] == "stationarity_ended"
        assert result["_meta"]["agentd"]["reason"] == "identical_steps"
        assert len(provider.requests) == 16
        assert events(client, sid, "completion_recovery") == []
        turn = the_turn_end(client, sid)["turn"]
        assert "completionRecoveries" not in turn and "autoRecoveryExhausted" not in turn


async def test_refusal_never_enters_recovery(server_factory, workspace: Path, agents_dir: Path):
    provider = scripted({"text": "I can't help with that.", "stop": "refusal"}, NEVER)
    async with served_session(
        server_factory, workspace, provider, agents_dir=agents_dir, agent="planner"
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "do something bad"))

        assert result["stopReason"] == "refusal"
        assert len(provider.requests) == 1
        assert events(client, sid, "completion_recovery") == []


# ---------------------------------------------------------------------------- choosing the agent


async def test_unknown_agent_on_session_new_is_invalid_params(
    server_factory, workspace: Path, agents_dir: Path
):
    provider = scripted(NEVER)
    async with server_factory(provider, agents_dir=agents_dir) as server:
        client = await server.client()

        with pytest.raises(RpcFailed) as info:
            await open_session(client, workspace, agent="nobody")

        assert info.value.code == -32602
        assert "nobody" in info.value.error["message"]
        assert "_meta.agentd.agent" in info.value.error["message"]
        assert provider.requests == []
        await client.close()


async def test_set_config_option_switches_the_agent_and_its_requirement(
    server_factory, workspace: Path, agents_dir: Path
):
    provider = scripted(
        {"expect": "first", "text": "Plain answer."},  # default agent: no requirement
        {"expect": "second", "text": "Plain answer again."},  # planner: requirement applies
        {"expect": REMINDER, "text": "Planning.", "tool_calls": [todo_write_call("call_todo")]},
        {"text": "Planned."},
        {"expect": "third", "text": "Back to default."},
        NEVER,
    )
    async with server_factory(provider, agents_dir=agents_dir) as server:
        client = await server.client()
        created = await open_session(client, workspace)
        sid = created["sessionId"]
        option = agent_option(created["configOptions"])
        assert option["currentValue"] == "default"
        assert {o["value"] for o in option["options"]} >= {"default", "planner", "capped", "extractor"}

        await client.call("session/prompt", text_prompt(sid, "first"))
        assert len(provider.requests) == 1
        assert events(client, sid, "completion_recovery") == []

        switched = await client.call(
            "session/set_config_option", {"sessionId": sid, "configId": "agent", "value": "planner"}
        )
        assert agent_option(switched["configOptions"])["currentValue"] == "planner"

        result = await client.call("session/prompt", text_prompt(sid, "second"))
        assert result["stopReason"] == "end_turn" and "reason" not in result["_meta"]["agentd"]
        assert len(provider.requests) == 4
        assert [e["attempt"] for e in events(client, sid, "completion_recovery")] == [1]
        # The planner's tool allow-list is what the model was offered.
        assert tool_names(provider.requests[1]) == ["list_dir", "todo_write"]

        with pytest.raises(RpcFailed) as info:
            await client.call(
                "session/set_config_option", {"sessionId": sid, "configId": "agent", "value": "nobody"}
            )
        assert info.value.code == -32602

        back = await client.call(
            "session/set_config_option", {"sessionId": sid, "configId": "agent", "value": "default"}
        )
        assert agent_option(back["configOptions"])["currentValue"] == "default"
        await client.call("session/prompt", text_prompt(sid, "third"))
        assert len(provider.requests) == 5
        assert len(events(client, sid, "completion_recovery")) == 1
        assert_valid_frames(client)
        await client.close()
