"""Anthropic request building (`anthropic_request.py`): prompt-caching breakpoints, extended
thinking parameters, signed thinking blocks sent back — every body checked against the
official `anthropic` package's request types (`tests/support/fakes/anthropic_validation.py`)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from agentd.core.conversation import Message, ReasoningBlock, ToolCall
from agentd.core.provider import ProviderRequest, ToolSpec
from agentd.providers.anthropic.provider import AnthropicProvider
from agentd.providers.anthropic.request import count_cache_breakpoints
from tests.support.fakes.anthropic_validation import REDACTED_PREFIX, sdk_problem, sign, validate_body

EPHEMERAL = {"type": "ephemeral"}
THINKING = {
    "type": "thinking",
    "thinking": "I should list the files.",
    "signature": sign("I should list the files."),
}
REDACTED = {"type": "redacted_thinking", "data": REDACTED_PREFIX + "abc"}
LS = ToolCall(id="toolu_1", name="list_dir", arguments='{"path": "."}')
TOOLS = [
    ToolSpec("list_dir", "List a folder", {"type": "object", "properties": {"path": {"type": "string"}}}),
    ToolSpec("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}}),
]


def anthropic_block(data: dict[str, Any]) -> ReasoningBlock:
    return ReasoningBlock(provider="anthropic", data=copy.deepcopy(data))


def thinking_turn(*blocks: dict[str, Any]) -> Message:
    return Message(
        role="assistant",
        content="Listing.",
        reasoning="I should list the files.",
        reasoning_blocks=[anthropic_block(b) for b in blocks],
        tool_calls=[LS],
    )


def conversation(*, thinking: tuple[dict[str, Any], ...] = (THINKING,)) -> list[Message]:
    """Two prompts; the second is inside a tool loop (its tool result is the tail)."""
    return [
        Message.user("hello"),
        Message(role="assistant", content="Hi."),
        Message.user("what is here?"),
        thinking_turn(*thinking),
        Message.tool_result(LS, "a.txt\nb.txt"),
    ]


def body_for(messages: list[Message], **provider: Any) -> dict[str, Any]:
    request = ProviderRequest(model="claude-test", system="You are terse.", messages=messages, tools=TOOLS)
    body = AnthropicProvider(api_key=None, model="claude-test", **provider).build_body(request)
    assert validate_body(body) is None, validate_body(body)  # the real API would take it
    return body


# -- prompt caching ---------------------------------------------------------------------------


def test_breakpoints_on_tools_system_tail_and_previous_user_turn() -> None:
    body = body_for(conversation())
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": EPHEMERAL}]
    assert body["tools"][-1]["cache_control"] == EPHEMERAL
    assert "cache_control" not in body["tools"][0]
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    # The tail: the tool result, which the next call's prefix will contain.
    assert messages[-1]["content"][-1]["type"] == "tool_result"
    assert messages[-1]["content"][-1]["cache_control"] == EPHEMERAL
    # The previous user turn: where the previous call put its tail mark.
    assert messages[2]["content"][-1] == {"type": "text", "text": "what is here?", "cache_control": EPHEMERAL}
    assert count_cache_breakpoints(body) == 4


def test_never_more_than_four_breakpoints_and_never_on_thinking() -> None:
    history: list[Message] = []
    for n in range(6):
        history += [Message.user(f"prompt {n}"), thinking_turn(THINKING), Message.tool_result(LS, "x")]
        for messages in (
            history,
            [*history, Message(role="assistant", reasoning_blocks=[anthropic_block(THINKING)])],
        ):
            body = body_for(messages, thinking_budget=2048)
            assert count_cache_breakpoints(body) <= 4
            for message in body["messages"]:
                for block in message["content"]:
                    assert not (
                        block["type"] in ("thinking", "redacted_thinking") and "cache_control" in block
                    )


def test_one_turn_conversation_without_tools_or_system() -> None:
    request = ProviderRequest(model="m", system="", messages=[Message.user("hi")])
    body = AnthropicProvider(api_key=None, model="m").build_body(request)
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": EPHEMERAL}]}
    ]
    assert "system" not in body and "tools" not in body
    assert count_cache_breakpoints(body) == 1


def test_caching_off_sends_no_cache_control() -> None:
    body = body_for(conversation(), prompt_cache=False)
    assert count_cache_breakpoints(body) == 0
    assert body["system"] == "You are terse."
    assert "cache_control" not in json.dumps(body)


# -- extended thinking --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "cap", "max_tokens"),
    [(2048, None, 8192), (10_000, None, 18_192), (2048, 256, 2304), (2048, 4096, 4096), (8192, None, 16_384)],
)
def test_thinking_parameters_and_max_tokens_above_the_budget(
    budget: int, cap: int | None, max_tokens: int
) -> None:
    request = ProviderRequest(model="m", system="", messages=[Message.user("hi")], max_output_tokens=cap)
    body = AnthropicProvider(api_key=None, model="m", thinking_budget=budget).build_body(request)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] == max_tokens > budget
    # Thinking restricts these; we never send them.
    assert not {"tool_choice", "temperature", "top_k", "top_p"} & set(body)
    assert validate_body(body) is None


def test_a_budget_below_the_api_minimum_is_refused() -> None:
    with pytest.raises(ValueError, match="1024"):
        AnthropicProvider(api_key=None, model="m", thinking_budget=500)


def test_signed_blocks_go_back_first_in_order_and_verbatim() -> None:
    messages = conversation(thinking=(THINKING, REDACTED))
    body = body_for(messages, thinking_budget=2048)
    assistant = body["messages"][3]
    assert assistant == {
        "role": "assistant",
        "content": [
            THINKING,
            REDACTED,
            {"type": "text", "text": "Listing."},
            {"type": "tool_use", "id": "toolu_1", "name": "list_dir", "input": {"path": "."}},
        ],
    }
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    # The stored blocks are not touched by the breakpoints (copies go on the wire).
    assert [b.data for b in messages[3].reasoning_blocks] == [THINKING, REDACTED]


def test_blocks_of_another_provider_are_skipped() -> None:
    messages = conversation()
    messages[3].reasoning_blocks.insert(
        0, ReasoningBlock(provider="openai-responses", data={"type": "reasoning", "encrypted_content": "x"})
    )
    body = body_for(messages, thinking_budget=2048)
    assert body["messages"][3]["content"][0] == THINKING
    assert "encrypted_content" not in json.dumps(body)


def test_thinking_off_sends_no_blocks() -> None:
    body = body_for(conversation())
    assert "thinking" not in body
    assert body["messages"][3]["content"][0]["type"] == "text"
    assert '"signature"' not in json.dumps(body)


def test_an_open_tool_loop_without_thinking_is_sent_without_thinking() -> None:
    # E.g. a fallback lane or thinking switched on mid-loop: the API would refuse thinking here.
    body = body_for(conversation(thinking=()), thinking_budget=2048)
    assert "thinking" not in body
    assert body["max_tokens"] == 8192
    # The same history once the loop is closed by a new user prompt: thinking is back on, and
    # the earlier turns without thinking blocks are fine.
    closed = [
        *conversation(thinking=()),
        Message(role="assistant", content="Two files."),
        Message.user("thanks"),
    ]
    assert body_for(closed, thinking_budget=2048)["thinking"]["budget_tokens"] == 2048


def test_reasoning_blocks_round_trip_through_storage() -> None:
    messages = conversation(thinking=(THINKING, REDACTED))
    stored = [json.loads(json.dumps(m.model_dump(mode="json"))) for m in messages]
    restored = [Message.model_validate(m) for m in stored]
    assert restored == messages
    assert body_for(restored, thinking_budget=2048) == body_for(messages, thinking_budget=2048)


# -- the validator the tests rely on ---------------------------------------------------------------


def good_body() -> dict[str, Any]:
    return body_for(conversation(thinking=(THINKING, REDACTED)), thinking_budget=2048)


def _set(path: str, value: Any) -> dict[str, Any]:
    body = good_body()
    *parents, last = path.split(".")
    target: Any = body
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    target[int(last) if last.isdigit() else last] = value
    return body


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (_set("max_tokens", "lots"), "max_tokens"),
        (_set("bogus", 1), "bogus: Extra inputs"),
        (_set("messages.0.content.0.bogus", 1), "messages.0.content.0.bogus: Extra inputs"),
        (_set("messages.0.content.0.cache_control", {"type": "persistent"}), "cache_control.type"),
        (_set("system.0.cache_control", {"type": "ephemeral", "ttl": "1d"}), "system.0.cache_control.ttl"),
        (_set("messages.3.content.0", {"type": "thinking", "thinking": "x"}), "signature"),
        (_set("tools.0.input_schema", "object"), "tools.0.input_schema"),
        (_set("thinking", {"type": "enabled"}), "budget_tokens"),
    ],
)
def test_the_sdk_types_reject_malformed_bodies(body: dict[str, Any], reason: str) -> None:
    assert sdk_problem(good_body()) is None
    problem = sdk_problem(body)
    assert problem is not None and reason in problem, problem


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (_set("thinking", {"type": "enabled", "budget_tokens": 8192}), "max_tokens"),
        (_set("thinking", {"type": "enabled", "budget_tokens": 512}), "1024"),
        (_set("tool_choice", {"type": "any"}), "tool_choice"),
        (_set("messages.3.content.0.thinking", "I should delete the files."), "signature"),
        (
            _set(
                "messages.3.content",
                [
                    {"type": "text", "text": "Listing."},
                    {"type": "tool_use", "id": "toolu_1", "name": "list_dir", "input": {}},
                ],
            ),
            "must start with a thinking block",
        ),
        (_set("messages.1.content.0.cache_control", EPHEMERAL), "maximum of 4"),
        (_set("messages.3.content.0.cache_control", EPHEMERAL), "cache_control"),
    ],
)
def test_the_api_rules_reject_what_the_types_allow(body: dict[str, Any], reason: str) -> None:
    assert validate_body(good_body()) is None
    problem = validate_body(body)
    assert problem is not None and reason in problem, problem


async def test_auxiliary_calls_go_without_thinking() -> None:
    """The compaction summary and the goal evaluator ask for no extended reasoning: with a
    thinking budget configured their Anthropic bodies still carry no `thinking`, and keep
    their own small output cap."""
    from agentd.core import GoalState
    from agentd.loop.compaction import summarise
    from agentd.loop.goals.evaluator import evaluator_request
    from agentd.providers.scripted import ScriptedProvider

    scripted = ScriptedProvider.from_dict({"steps": [{"text": "summary"}]})
    older = [Message.user("hi"), Message(role="assistant", content="yo")]
    assert await summarise(scripted, "m", older) == "summary"
    [summary] = scripted.requests
    verdict = evaluator_request("m", GoalState(objective="ship"), [], [Message.user("hi")], None, False)
    provider = AnthropicProvider(api_key=None, model="m", thinking_budget=2048)
    for request in (summary, verdict):
        assert request.extended_reasoning is False
        body = provider.build_body(request)
        assert "thinking" not in body and body["max_tokens"] == request.max_output_tokens
        assert validate_body(body) is None
    # The same request with reasoning allowed would think (the flag is what turns it off).
    summary.extended_reasoning = True
    assert provider.build_body(summary)["thinking"] == {"type": "enabled", "budget_tokens": 2048}


def test_adaptive_thinking_has_no_budget_and_keeps_the_signed_blocks() -> None:
    provider = AnthropicProvider(api_key=None, model="m", thinking_budget=4096, adaptive_thinking=True)
    request = ProviderRequest(
        model="m", system="s", messages=conversation(), tools=TOOLS, max_output_tokens=2000
    )
    body = provider.build_body(request)
    assert body["thinking"] == {"type": "adaptive"}  # it takes precedence over the budget
    assert body["max_tokens"] == 2000  # no budget to make room for
    assistant = body["messages"][-2]
    assert assistant["content"][0]["type"] == "thinking"  # the signed block still goes back first
    assert validate_body(body) is None
    request.extended_reasoning = False
    assert "thinking" not in provider.build_body(request)
