"""Every provider the server makes — the main one and each fallback lane's — is closed at
shutdown (issue 11), and `close_providers` closes each distinct provider once."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import agentd.app
import agentd.providers.factory as factory
from agentd.app import create_app
from agentd.core.provider import Provider, ProviderRequest, StreamEvent
from agentd.infra.config import ProviderName, Settings
from agentd.providers.anthropic.provider import AnthropicProvider
from agentd.providers.factory import close_providers
from agentd.providers.openai.chat import OpenAIProvider
from agentd.providers.scripted import ScriptedProvider


class Recorder:
    """A provider that counts its `aclose()` calls (and can fail one)."""

    name = "recorder"
    supports_native_schema = False

    def __init__(self, fail: bool = False) -> None:
        self.closed = 0
        self.fail = fail

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        raise NotImplementedError

    async def aclose(self) -> None:
        self.closed += 1
        if self.fail:
            raise RuntimeError("cannot close")


class NoAclose:
    """A provider from before `aclose` existed (an embedding program's or a test's)."""

    name = "old"


async def test_each_distinct_provider_is_closed_once() -> None:
    a, b = Recorder(), Recorder()
    await close_providers([a, b, a])
    assert (a.closed, b.closed) == (1, 1)


async def test_a_failing_close_does_not_keep_the_others_open() -> None:
    bad, good = Recorder(fail=True), Recorder()
    await close_providers([bad, good])
    assert (bad.closed, good.closed) == (1, 1)


async def test_a_provider_without_aclose_is_skipped() -> None:
    good = Recorder()
    old: Any = NoAclose()
    await close_providers([old, good])
    assert good.closed == 1


async def test_the_scripted_provider_closes_as_a_no_op() -> None:
    provider = ScriptedProvider.demo()
    await provider.aclose()
    await provider.aclose()  # twice is fine too


@pytest.mark.parametrize("cls", [OpenAIProvider, AnthropicProvider])
async def test_aclose_closes_the_own_http_client_only(cls: type[OpenAIProvider | AnthropicProvider]) -> None:
    own = cls(base_url="http://127.0.0.1:9", api_key="k", model="m")
    await own.aclose()
    assert own._client.is_closed
    import httpx

    async with httpx.AsyncClient() as client:
        lent = cls(base_url="http://127.0.0.1:9", api_key="k", model="m", client=client)
        await lent.aclose()
        assert not client.is_closed  # the caller's client stays the caller's


async def test_shutdown_closes_the_main_provider_and_every_fallback_lane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Provider] = []
    original = factory.make_provider

    def recording(settings: Settings) -> Provider:
        provider = original(settings)
        made.append(provider)
        return provider

    # app.py calls make_provider for the main provider, make_lanes calls it for each lane.
    monkeypatch.setattr(factory, "make_provider", recording)
    monkeypatch.setattr(agentd.app, "make_provider", recording)
    lanes = [
        {"provider": "anthropic", "model": "claude-x", "api_key": "sk-ant"},
        {"provider": "openai", "model": "gpt-y", "base_url": "http://127.0.0.1:9/v1"},
    ]
    monkeypatch.setenv("AGENTD_FALLBACKS", json.dumps(lanes))
    settings = Settings(
        home=tmp_path,
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'a.db'}",  # type: ignore[arg-type]
        provider=ProviderName.OPENAI,
        openai_base_url="http://127.0.0.1:9/v1",
        auto_resume=False,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        assert [type(p) for p in made] == [OpenAIProvider, AnthropicProvider, OpenAIProvider]
        assert not any(p._client.is_closed for p in made)  # type: ignore[attr-defined]
    assert all(p._client.is_closed for p in made)  # type: ignore[attr-defined]
