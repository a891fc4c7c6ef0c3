"""The whole server with the real Anthropic provider, extended thinking and prompt caching on,
against FakeAnthropic (a local server speaking the Messages SSE format, which refuses what the
real API refuses — bodies the official `anthropic` request types reject, a thinking block
edited or missing where the tool loop needs it, more than four cache breakpoints)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentd.providers.anthropic.provider import AnthropicProvider
from agentd.providers.anthropic.request import count_cache_breakpoints
from tests.support.client import text_prompt
from tests.support.fakes.anthropic_server import (
    FakeAnthropic,
    RedactedThinkingBlock,
    StreamedMessage,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    UsageScript,
)
from tests.support.session import events, new_session

# Each test once per model-call transport (lean, httpx): tests/e2e/providers/conftest.py.
pytestmark = pytest.mark.usefixtures("each_http_transport")

MODEL = "claude-test"
PRICES = {MODEL: {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}}
EPHEMERAL = {"type": "ephemeral"}

THOUGHT = ThinkingBlock(["The user wants the folder's ", "contents: list it."])
REDACTED = RedactedThinkingBlock()
LIST = ToolUseBlock("toolu_01List", "list_dir", json.dumps({"path": "."}))


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def provider(fake: FakeAnthropic) -> AnthropicProvider:
    return AnthropicProvider(base_url=fake.base_url, api_key="sk-ant-test", model=MODEL, thinking_budget=2048)


def tokens(ledger: dict[str, Any]) -> tuple[int, int, int, int]:
    return (
        ledger["inputTokens"],
        ledger["outputTokens"],
        ledger["cacheReadTokens"],
        ledger["cacheWriteTokens"],
    )


async def test_thinking_goes_back_through_a_tool_call_and_cache_tokens_are_counted(
    server_factory: Any, workspace: Path, fake: FakeAnthropic
) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    fake.enqueue(
        # Call 1: thinks (signed + redacted), says so, lists the folder; writes the cache.
        StreamedMessage(
            [THOUGHT, REDACTED, TextBlock.from_text("Looking."), LIST],
            usage=UsageScript(input_tokens=20, output_tokens=50, cache_creation_input_tokens=3000),
        ),
        # Call 2: reads the cached prefix, writes the new tail.
        StreamedMessage(
            [ThinkingBlock(["One file."]), TextBlock.from_text("There is a.txt.")],
            usage=UsageScript(
                input_tokens=30,
                output_tokens=20,
                cache_read_input_tokens=3000,
                cache_creation_input_tokens=100,
            ),
            full_delta_usage=True,
        ),
    )
    async with server_factory(provider(fake), model=MODEL, prices=PRICES) as server:
        client = await server.client()
        try:
            sid = await new_session(client, workspace)
            done = await client.call("session/prompt", text_prompt(sid, "what is here?"))
            assert done["stopReason"] == "end_turn"

            first, second = (r.body for r in fake.requests)  # both accepted by the strict fake
            for body in (first, second):
                assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
                assert body["max_tokens"] > 2048
                assert body["system"][-1]["cache_control"] == EPHEMERAL
                assert body["tools"][-1]["cache_control"] == EPHEMERAL
                assert body["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
                assert count_cache_breakpoints(body) <= 4
            # The second request carries the signed blocks back, verbatim and first.
            assistant = second["messages"][-2]
            assert assistant["role"] == "assistant"
            assert assistant["content"][:2] == [THOUGHT.wire(), REDACTED.wire()]
            assert [b["type"] for b in assistant["content"][2:]] == ["text", "tool_use"]
            tail = second["messages"][-1]["content"][-1]
            assert tail["type"] == "tool_result" and tail["cache_control"] == EPHEMERAL
            # The previous call's tail (the prompt) is marked too, so its cache entry is read.
            assert second["messages"][-3]["content"][-1]["cache_control"] == EPHEMERAL

            # Cache reads and writes in the ledger and its cost (R-R4).
            usage = (await client.call("_agentd/usage/get", {"sessionId": sid}))["session"]
            assert tokens(usage) == (50, 70, 3000, 3100)
            assert usage["totalTokens"] == 50 + 70 + 3000 + 3100
            expected_cost = (50 * 3.0 + 70 * 15.0 + 3000 * 0.3 + 3100 * 3.75) / 1_000_000
            assert usage["cost"] == pytest.approx(expected_cost)
            assert tokens(events(client, sid, "turn_ended")[0]["turn"]["usage"]) == tokens(usage)

            stored = await server.app.state.agentd.store.load_messages(sid)
            kept = [m["reasoning_blocks"] for m in stored if m["role"] == "assistant"]
            assert kept[0] == [
                {"provider": "anthropic", "data": THOUGHT.wire()},
                {"provider": "anthropic", "data": REDACTED.wire()},
            ]
        finally:
            await client.close()

    # After a restart the history (from the store) still carries the signed blocks.
    fake.enqueue(StreamedMessage([ThinkingBlock(["Polite."]), TextBlock.from_text("You're welcome.")]))
    async with server_factory(provider(fake), model=MODEL, prices=PRICES) as server:
        client = await server.client()
        try:
            await client.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
            done = await client.call("session/prompt", text_prompt(sid, "thanks"))
            assert done["stopReason"] == "end_turn"
            third = fake.requests[-1].body
            sent = [m for m in third["messages"] if m["role"] == "assistant"]
            assert sent[0]["content"][:2] == [THOUGHT.wire(), REDACTED.wire()]
            assert sent[1]["content"][0] == ThinkingBlock(["One file."]).wire()
        finally:
            await client.close()


async def test_caching_off_sends_no_breakpoints(
    server_factory: Any, workspace: Path, fake: FakeAnthropic
) -> None:
    fake.enqueue(StreamedMessage.from_text("Hi."))
    plain = AnthropicProvider(base_url=fake.base_url, api_key="sk-ant-test", model=MODEL, prompt_cache=False)
    async with server_factory(plain, model=MODEL) as server:
        client = await server.client()
        try:
            sid = await new_session(client, workspace)
            assert (await client.call("session/prompt", text_prompt(sid, "hi")))["stopReason"] == "end_turn"
        finally:
            await client.close()
    body = fake.requests[0].body
    assert count_cache_breakpoints(body) == 0 and isinstance(body["system"], str)
    assert "thinking" not in body
