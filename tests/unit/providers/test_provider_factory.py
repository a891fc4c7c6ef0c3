"""`AGENTD_PROVIDER` picks the provider; `AGENTD_FALLBACKS` builds the chain's lanes."""

from __future__ import annotations

import pytest

from agentd.infra.config import Settings
from agentd.providers.anthropic.provider import AnthropicProvider
from agentd.providers.factory import make_lanes, make_provider
from agentd.providers.openai.chat import OpenAIProvider
from agentd.providers.scripted import ScriptedProvider


async def test_anthropic_is_chosen_by_settings(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AGENTD_PROVIDER", "anthropic")
    monkeypatch.setenv("AGENTD_ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("AGENTD_ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("AGENTD_MODEL", "claude-test")
    provider = make_provider(Settings())
    assert isinstance(provider, AnthropicProvider)
    body = provider.build_body(
        __import__("agentd.core.provider", fromlist=["x"]).ProviderRequest(
            model="claude-test", system="s", messages=[]
        )
    )
    assert body["model"] == "claude-test"
    await provider.aclose()


async def test_openai_and_the_scripted_default(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AGENTD_PROVIDER", "openai")
    assert isinstance(make_provider(Settings()), OpenAIProvider)
    monkeypatch.delenv("AGENTD_PROVIDER")
    assert isinstance(make_provider(Settings()), ScriptedProvider)


async def test_fallback_lanes_come_from_settings(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(
        "AGENTD_FALLBACKS",
        '[{"provider": "anthropic", "model": "claude-b", "api_key": "k"},'
        ' {"provider": "openai", "model": "gpt-c", "base_url": "http://127.0.0.1:9/v1"}]',
    )
    lanes = make_lanes(Settings())
    assert [(type(lane.provider).__name__, lane.model, lane.name) for lane in lanes] == [
        ("AnthropicProvider", "claude-b", "fallback1:anthropic/claude-b"),
        ("OpenAIProvider", "gpt-c", "fallback2:openai/gpt-c"),
    ]
    for lane in lanes:
        await lane.provider.aclose()


async def test_anthropic_caching_and_thinking_come_from_settings(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AGENTD_PROVIDER", "anthropic")
    monkeypatch.setenv("AGENTD_ANTHROPIC_API_KEY", "sk-ant-test")
    default = make_provider(Settings())
    assert isinstance(default, AnthropicProvider)
    assert (default.options.prompt_cache, default.options.thinking_budget) == (True, 0)  # on / off
    monkeypatch.setenv("AGENTD_ANTHROPIC_PROMPT_CACHE", "false")
    monkeypatch.setenv("AGENTD_ANTHROPIC_THINKING_BUDGET", "4096")
    tuned = make_provider(Settings())
    assert isinstance(tuned, AnthropicProvider)
    assert (tuned.options.prompt_cache, tuned.options.thinking_budget) == (False, 4096)
    # A fallback lane on Anthropic gets the same request settings.
    monkeypatch.setenv("AGENTD_FALLBACKS", '[{"provider": "anthropic", "model": "claude-b", "api_key": "k"}]')
    [lane] = make_lanes(Settings())
    assert isinstance(lane.provider, AnthropicProvider) and lane.provider.options.thinking_budget == 4096
    monkeypatch.setenv("AGENTD_ANTHROPIC_ADAPTIVE_THINKING", "true")
    adaptive = make_provider(Settings())
    assert isinstance(adaptive, AnthropicProvider) and adaptive.options.adaptive_thinking
    await adaptive.aclose()
    monkeypatch.setenv("AGENTD_ANTHROPIC_THINKING_BUDGET", "1000")  # below the API's minimum
    with pytest.raises(ValueError, match="1024"):
        Settings()
    for provider in (default, tuned, lane.provider):
        await provider.aclose()


async def test_openai_responses_and_the_provider_settings(monkeypatch: pytest.MonkeyPatch):
    from agentd.infra.config import ReasoningEffort, TokenField
    from agentd.providers.openai.responses import OpenAIResponsesProvider

    monkeypatch.setenv("AGENTD_PROVIDER", "openai-responses")
    monkeypatch.setenv("AGENTD_REASONING_EFFORT", "high")
    provider = make_provider(Settings())
    assert isinstance(provider, OpenAIResponsesProvider)
    assert provider.reasoning_effort is ReasoningEffort.HIGH
    # The stream timeouts are on by default, for every HTTP provider.
    assert (provider._first_token_timeout, provider._idle_timeout) == (180.0, 90.0)  # 003: octos defaults
    await provider.aclose()

    monkeypatch.setenv("AGENTD_PROVIDER", "openai")
    monkeypatch.setenv("AGENTD_OPENAI_TOKEN_FIELD", "max_tokens")
    monkeypatch.setenv("AGENTD_FIRST_TOKEN_TIMEOUT_S", "0")  # 0: off
    monkeypatch.setenv("AGENTD_STREAM_IDLE_TIMEOUT_S", "7")
    chat = make_provider(Settings())
    assert isinstance(chat, OpenAIProvider) and chat.token_field is TokenField.MAX_TOKENS
    assert (chat._first_token_timeout, chat._idle_timeout) == (None, 7.0)
    await chat.aclose()

    monkeypatch.setenv("AGENTD_PROVIDER", "anthropic")
    monkeypatch.setenv("AGENTD_ANTHROPIC_API_KEY", "sk-ant-test")
    anthropic = make_provider(Settings())
    assert isinstance(anthropic, AnthropicProvider) and anthropic._idle_timeout == 7.0
    await anthropic.aclose()
