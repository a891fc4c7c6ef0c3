"""The model picker offers what the provider serves (issue 33, item 3), over a real
WebSocket against the fake OpenAI and Anthropic servers: listed, limited by the operator's
patterns, with context windows; a failing models endpoint leaves the configured model working
and a refresh picks the list up later; a switch mid-session keeps the conversation and books
each call at its own model's price."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentd.protocol.jsonrpc import ErrorCode
from agentd.providers.anthropic import AnthropicProvider
from agentd.providers.openai import OpenAIProvider
from tests.support.client import RpcFailed, WsClient, agent_text, text_prompt
from tests.support.fakes.anthropic_server import FakeAnthropic, StreamedMessage
from tests.support.fakes.openai_server import Completion, FakeOpenAI
from tests.support.session import open_session

LISTING = {"model": "test-model", "models_ttl_s": 600}


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def model_option(config_options: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in config_options if o["id"] == "model")


async def set_model(client: WsClient, sid: str, model: str) -> dict[str, Any]:
    params = {"sessionId": sid, "configId": "model", "value": model}
    return await client.call("session/set_config_option", params)


async def test_the_picker_offers_the_allowed_served_models_with_their_windows(
    server_factory, workspace: Path, fake: FakeOpenAI
) -> None:
    fake.models = [
        {"id": "test-model"},
        {"id": "big-model", "context_length": 200000},
        {"id": "small-model", "max_model_len": 8192},
        {"id": "whisper-1"},  # not a chat model the operator offers
    ]
    provider = OpenAIProvider(base_url=fake.base_url, api_key="sk-test", model="test-model")
    async with server_factory(provider, models_allow=["*-model"], **LISTING) as server:
        client = await server.client()
        opened = await open_session(client, workspace)

        option = model_option(opened["configOptions"])
        assert option["currentValue"] == "test-model"
        assert option["options"] == [
            {"value": "test-model", "name": "test-model"},
            {
                "value": "big-model",
                "name": "big-model",
                "description": "200k context",
                "_meta": {"agentd": {"contextWindow": 200000}},
            },
            {
                "value": "small-model",
                "name": "small-model",
                "description": "8k context",
                "_meta": {"agentd": {"contextWindow": 8192}},
            },
        ]
        listed = await client.call("_agentd/models/list", {})
        assert [(m["id"], m["source"], m["contextWindow"]) for m in listed["models"]] == [
            ("test-model", "configured", 128000),
            ("big-model", "provider", 200000),
            ("small-model", "provider", 8192),
        ]
        assert listed["listing"] is True and listed["error"] is None and listed["fetchedAt"]
        with pytest.raises(RpcFailed) as refused:
            await set_model(client, opened["sessionId"], "whisper-1")
        assert refused.value.code == ErrorCode.INVALID_PARAMS
        assert "unknown model 'whisper-1'" in refused.value.error["message"]
        # Two sessions and a listing within the TTL: the provider was asked once.
        await open_session(client, workspace)
        assert len(fake.models_requests) == 1


async def test_slash_model_lists_the_offered_models_and_keeps_to_the_operator_s_list(
    server_factory, workspace: Path, fake: FakeOpenAI
) -> None:
    fake.models = [{"id": "test-model"}, {"id": "big-model"}, {"id": "whisper-1"}]
    provider = OpenAIProvider(base_url=fake.base_url, api_key="sk-test", model="test-model")
    async with server_factory(provider, models_allow=["*-model"], **LISTING) as server:
        client = await server.client()
        sid = (await open_session(client, workspace))["sessionId"]

        async def local(text: str) -> str:
            before = len(agent_text(client.updates(sid)))
            await client.call("session/prompt", text_prompt(sid, text))
            return agent_text(client.updates(sid))[before:]

        assert await local("/model") == "Model: test-model\nOffered: test-model, big-model"
        assert await local("/model whisper-1") == (
            "Model 'whisper-1' is not offered; one of test-model, big-model."
        )
        assert await local("/model big-model") == "Model: big-model"
        assert fake.requests == []  # all answered locally


async def test_a_failing_models_endpoint_leaves_the_configured_model_and_a_refresh_recovers(
    server_factory, workspace: Path, fake: FakeOpenAI
) -> None:
    fake.models_status = 500
    fake.models = [{"id": "test-model"}, {"id": "big-model"}]
    fake.enqueue(Completion.from_text("still here"))
    provider = OpenAIProvider(base_url=fake.base_url, api_key="sk-test", model="test-model")
    async with server_factory(provider, **LISTING) as server:
        client = await server.client()
        opened = await open_session(client, workspace)
        sid = opened["sessionId"]
        only = [{"value": "test-model", "name": "test-model"}]
        assert model_option(opened["configOptions"])["options"] == only
        listed = await client.call("_agentd/models/list", {})
        assert listed["error"] == "HTTP 500" and [m["id"] for m in listed["models"]] == ["test-model"]
        with pytest.raises(RpcFailed) as refused:
            await set_model(client, sid, "big-model")
        assert refused.value.code == ErrorCode.INVALID_PARAMS
        assert (await client.call("session/prompt", text_prompt(sid, "hi")))["stopReason"] == "end_turn"
        assert fake.requests[-1].body["model"] == "test-model"

        fake.models_status = 200
        refreshed = await client.call("_agentd/models/list", {"refresh": True})
        assert refreshed["error"] is None
        assert [m["id"] for m in refreshed["models"]] == ["test-model", "big-model"]
        answer = await set_model(client, sid, "big-model")
        assert model_option(answer["configOptions"])["currentValue"] == "big-model"


async def test_switching_mid_session_keeps_the_conversation_and_prices_each_call_at_its_model(
    server_factory, workspace: Path, fake: FakeOpenAI
) -> None:
    fake.models = [{"id": "test-model"}, {"id": "small-model", "context_length": 32000}]
    fake.enqueue(Completion.from_text("first answer"), Completion.from_text("second answer"))
    prices = {
        "test-model": {"input": 1.0, "output": 2.0},
        "small-model": {"input": 100.0, "output": 200.0},
    }
    provider = OpenAIProvider(base_url=fake.base_url, api_key="sk-test", model="test-model")
    async with server_factory(provider, prices=prices, **LISTING) as server:
        client = await server.client()
        sid = (await open_session(client, workspace))["sessionId"]
        await client.call("session/prompt", text_prompt(sid, "question one"))
        await set_model(client, sid, "small-model")
        await client.call("session/prompt", text_prompt(sid, "question two"))

        first, second = fake.requests[-2].body, fake.requests[-1].body
        assert (first["model"], second["model"]) == ("test-model", "small-model")
        said = [(m["role"], m["content"]) for m in second["messages"] if m["role"] != "system"]
        assert said == [
            ("user", "question one"),
            ("assistant", "first answer"),
            ("user", "question two"),
        ]
        assert agent_text(client.updates(sid)) == "first answersecond answer"
        # The context gauge (and compaction, at 85 % of it) follows the model: the provider's
        # window for small-model, the default for test-model.
        sizes = [u["size"] for u in client.updates(sid) if u["sessionUpdate"] == "usage_update"]
        assert sizes[0] == 128000 and sizes[-1] == 32000
        usage = (await client.call("_agentd/usage/get", {"sessionId": sid}))["session"]
        # The fake reports 10 input and 5 output tokens a call: one call at each model's price.
        assert usage["inputTokens"] == 20 and usage["outputTokens"] == 10
        assert usage["cost"] == pytest.approx((10 * 1 + 5 * 2 + 10 * 100 + 5 * 200) / 1e6)


async def test_anthropic_s_models_are_listed_page_by_page(server_factory, workspace: Path) -> None:
    async with FakeAnthropic([StreamedMessage.from_text("ok")]) as fake:
        fake.models = [
            {"id": "claude-sonnet-4-5", "display_name": "Claude Sonnet 4.5"},
            {"id": "claude-haiku-4-5", "display_name": "Claude Haiku 4.5"},
            {"id": "claude-opus-4-1", "display_name": "Claude Opus 4.1"},
        ]
        fake.models_page_size = 2
        provider = AnthropicProvider(base_url=fake.base_url, api_key="sk-ant", model="claude-sonnet-4-5")
        async with server_factory(provider, model="claude-sonnet-4-5", models_ttl_s=600) as server:
            client = await server.client()
            opened = await open_session(client, workspace)
            options = model_option(opened["configOptions"])["options"]
            assert [(o["value"], o["name"]) for o in options] == [
                ("claude-sonnet-4-5", "Claude Sonnet 4.5"),
                ("claude-haiku-4-5", "Claude Haiku 4.5"),
                ("claude-opus-4-1", "Claude Opus 4.1"),
            ]
            assert len(fake.models_requests) == 2
            await set_model(client, opened["sessionId"], "claude-haiku-4-5")
            await client.call("session/prompt", text_prompt(opened["sessionId"], "hi"))
            assert fake.requests[-1].body["model"] == "claude-haiku-4-5"
