"""The server's HTTP provider is made at its first call (issue 32, idle memory): an idle
server configured for OpenAI or Anthropic has not imported httpx or the provider's wire
code, and the provider it then makes is the one `make_provider` makes, made once, closed
at shutdown; before any call, shutdown has nothing to close."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentd.core.provider import ProviderRequest
from agentd.infra.config import ProviderName, Settings
from agentd.providers.anthropic.provider import AnthropicProvider
from agentd.providers.factory import LAZY_KINDS, lazy_provider
from agentd.providers.lazy import LazyProvider
from agentd.providers.openai.chat import OpenAIProvider
from agentd.providers.openai.responses import OpenAIResponsesProvider
from tests.support.paths import REPO_ROOT

CLASSES = {
    ProviderName.OPENAI: OpenAIProvider,
    ProviderName.OPENAI_RESPONSES: OpenAIResponsesProvider,
    ProviderName.ANTHROPIC: AnthropicProvider,
}
REQUEST = ProviderRequest(model="m", system="", messages=[])


def settings_for(kind: ProviderName, tmp_path: Path) -> Settings:
    return Settings(
        home=tmp_path,
        provider=kind,
        openai_api_key="sk-test",  # type: ignore[arg-type]
        anthropic_api_key="sk-ant-test",  # type: ignore[arg-type]
        openai_base_url="http://127.0.0.1:9/v1",
        anthropic_base_url="http://127.0.0.1:9",
    )


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_the_lazy_names_are_the_providers_own(kind: ProviderName) -> None:
    cls = CLASSES[kind]
    assert LAZY_KINDS[kind] == (cls.name, cls.supports_native_schema)


@pytest.mark.parametrize("kind", sorted(CLASSES))
async def test_the_provider_is_made_once_at_its_first_call_and_closed(
    kind: ProviderName, tmp_path: Path
) -> None:
    provider = lazy_provider(settings_for(kind, tmp_path))
    assert isinstance(provider, LazyProvider) and provider.made is None
    provider.stream(REQUEST)  # an async generator: made, not started (no request is sent)
    made = provider.made
    assert isinstance(made, CLASSES[kind])
    provider.stream(REQUEST)
    assert provider.made is made
    # Later calls go to the real provider's `stream` itself (no call through the wrapper).
    assert provider.stream == made.stream
    await provider.aclose()
    assert made._client.is_closed


async def test_closing_before_any_call_makes_nothing(tmp_path: Path) -> None:
    provider = lazy_provider(settings_for(ProviderName.OPENAI, tmp_path))
    assert isinstance(provider, LazyProvider)
    await provider.aclose()
    assert provider.made is None


def test_the_scripted_provider_is_made_at_once(tmp_path: Path) -> None:
    assert not isinstance(lazy_provider(Settings(home=tmp_path)), LazyProvider)


HEAVY = (
    "httpx",
    "httpcore",
    "h11",
    "agentd.providers.openai.chat",
    "agentd.providers.anthropic.provider",
    "agentd.providers.http.lean",
)
IDLE = """
import asyncio, json, sys
from agentd.app import create_app
from agentd.core.provider import ProviderRequest
from agentd.infra.config import Settings

app = create_app(Settings(home={home!r}, provider={kind!r}, openai_api_key="k", anthropic_api_key="k",
                          openai_base_url="http://127.0.0.1:9/v1", anthropic_base_url="http://127.0.0.1:9"))
heavy = lambda: sorted(m for m in {heavy!r} if m in sys.modules)

async def main() -> None:
    async with app.router.lifespan_context(app):
        print(json.dumps(heavy()))
        app.state.agentd.provider.stream(ProviderRequest(model="m", system="", messages=[]))
        print(json.dumps(heavy()))

asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("kind", "module"),
    [("openai", "agentd.providers.openai.chat"), ("anthropic", "agentd.providers.anthropic.provider")],
)
def test_an_idle_server_with_a_real_provider_has_not_imported_it(
    kind: str, module: str, tmp_path: Path
) -> None:
    """Checked in a fresh interpreter; the second line is the other half: the first call loads it."""
    code = IDLE.format(home=str(tmp_path / "home"), kind=kind, heavy=HEAVY)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    idle, called = (json.loads(line) for line in out.stdout.splitlines())
    assert idle == []
    assert {"httpx", module} <= set(called)


def test_the_model_catalogue_lists_through_a_lazy_provider() -> None:
    """The catalogue sees that a lazily made HTTP provider lists its models, and asking for
    the endpoint makes the provider (the catalogue would otherwise be silently empty)."""
    from agentd.infra import ProviderName, Settings
    from agentd.providers import catalogue_for, lazy_provider

    provider = lazy_provider(Settings(provider=ProviderName.OPENAI, openai_api_key="k", model="m"))
    catalogue = catalogue_for(provider, 600, [])
    assert catalogue.source is not None
    assert catalogue.source.models_endpoint().url.endswith("/models")


def test_forgetting_a_session_reaches_the_made_provider_and_needs_none_before() -> None:
    """The session manager tells the provider a session was unloaded (its wire cache)."""
    forgotten: list[str] = []

    class Made:
        def forget_session(self, session_id: str) -> None:
            forgotten.append(session_id)

    lazy = LazyProvider("openai", False, make=lambda: Made())  # type: ignore[arg-type,return-value]
    lazy.forget_session("s0")  # nothing made yet: nothing kept, and nothing is made for it
    assert lazy.made is None
    lazy._real()
    lazy.forget_session("s1")
    assert forgotten == ["s1"]


@pytest.mark.parametrize("kind", sorted(CLASSES))
async def test_batches_go_to_the_real_provider_after_the_first_call(
    kind: ProviderName, tmp_path: Path
) -> None:
    provider = lazy_provider(settings_for(kind, tmp_path))
    assert isinstance(provider, LazyProvider)
    provider.stream_batches(REQUEST)  # made, not started
    made = provider.made
    assert isinstance(made, CLASSES[kind])
    assert provider.stream_batches == made.stream_batches
    await provider.aclose()


async def test_a_real_provider_without_batches_gives_one_event_per_batch() -> None:
    from agentd.core.provider import Stop, StopReason, StreamEvent, TextDelta

    class StreamOnly:
        name = "stream-only"
        supports_native_schema = False

        async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
            yield TextDelta("a")
            yield Stop(StopReason.END_TURN)

        async def aclose(self) -> None:
            pass

    provider = LazyProvider("stream-only", False, StreamOnly)
    batches = [batch async for batch in provider.stream_batches(REQUEST)]
    assert batches == [[TextDelta("a")], [Stop(StopReason.END_TURN)]]
