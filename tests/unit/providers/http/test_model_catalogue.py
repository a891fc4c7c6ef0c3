"""The provider's model list (issue 33, item 3): reading OpenAI's and Anthropic's answers,
the operator's patterns, when to ask again, and the catalogue against the fake servers —
an endpoint that fails keeps what was known, Anthropic's pages are followed."""

from __future__ import annotations

import asyncio

import pytest

from agentd.infra.config import Settings
from agentd.providers.anthropic import AnthropicProvider
from agentd.providers.http.catalogue import (
    RETRY_AFTER_FAILURE_S,
    ListFormat,
    ModelCatalogue,
    ModelInfo,
    ModelListError,
    ModelsEndpoint,
    catalogue_for,
    is_stale,
    offered,
    parse_page,
)
from agentd.providers.openai import OpenAIProvider
from agentd.providers.scripted import ScriptedProvider
from agentd.session.services import ActorServices
from tests.support.fakes.anthropic_server import FakeAnthropic
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.web_site import WebSite


def test_an_openai_list_with_the_context_windows_compatible_servers_give() -> None:
    body = {
        "object": "list",
        "data": [
            {"id": "gpt-4o", "object": "model", "owned_by": "openai"},
            {"id": "qwen", "max_model_len": 32768},  # vLLM
            {"id": "llama", "context_length": 131072, "name": "Llama 3.1"},  # OpenRouter
            {"id": "x", "context_window": True},  # not a number
            {"object": "model"},  # no id: skipped
            "junk",
        ],
    }
    models, cursor = parse_page(body, ListFormat.OPENAI)
    assert models == [
        ModelInfo("gpt-4o"),
        ModelInfo("qwen", None, 32768),
        ModelInfo("llama", "Llama 3.1", 131072),
        ModelInfo("x"),
    ]
    assert cursor is None
    assert parse_page([{"id": "bare"}], ListFormat.OPENAI) == ([ModelInfo("bare")], None)


def test_an_anthropic_page_and_its_cursor() -> None:
    body = {
        "data": [{"type": "model", "id": "claude-x", "display_name": "Claude X", "max_input_tokens": 200000}],
        "has_more": True,
        "last_id": "claude-x",
    }
    assert parse_page(body, ListFormat.ANTHROPIC) == ([ModelInfo("claude-x", "Claude X", 200000)], "claude-x")
    assert parse_page({**body, "has_more": False}, ListFormat.ANTHROPIC)[1] is None


@pytest.mark.parametrize("body", [{}, {"data": "no"}, None, "text"])
def test_an_answer_without_a_list_is_an_error(body: object) -> None:
    with pytest.raises(ModelListError, match="no `data` list"):
        parse_page(body, ListFormat.OPENAI)


def test_the_operator_s_patterns_limit_what_is_offered() -> None:
    models = [ModelInfo("gpt-4o"), ModelInfo("gpt-4o-mini"), ModelInfo("o3"), ModelInfo("gpt-4o")]
    assert [m.id for m in offered(models, [])] == ["gpt-4o", "gpt-4o-mini", "o3"]
    assert [m.id for m in offered(models, ["gpt-4o*"])] == ["gpt-4o", "gpt-4o-mini"]
    assert [m.id for m in offered(models, ["o3", "claude-*"])] == ["o3"]


@pytest.mark.parametrize(
    ("fetched_at", "failed", "now", "ttl", "stale"),
    [
        (None, False, 0.0, 600.0, True),  # never asked
        (None, False, 0.0, 0.0, False),  # listing off
        (100.0, False, 699.0, 600.0, False),
        (100.0, False, 700.0, 600.0, True),
        (100.0, True, 100.0 + RETRY_AFTER_FAILURE_S - 1, 600.0, False),  # a failure waits a minute
        (100.0, True, 100.0 + RETRY_AFTER_FAILURE_S, 600.0, True),
        (100.0, True, 130.0, 30.0, True),  # or the TTL, if shorter
    ],
)
def test_when_the_list_is_asked_for_again(
    fetched_at: float | None, failed: bool, now: float, ttl: float, stale: bool
) -> None:
    assert is_stale(fetched_at, failed, now, ttl) is stale


async def test_the_catalogue_lists_keeps_its_list_through_a_failure_and_recovers() -> None:
    now = [1000.0]
    async with FakeOpenAI() as fake:
        fake.models = [{"id": "gpt-4o", "context_window": 128000}, {"id": "o3"}]
        provider = OpenAIProvider(base_url=fake.base_url, api_key="sk-test", model="gpt-4o")
        catalogue = ModelCatalogue(provider, 600.0, [], clock=lambda: now[0])
        assert catalogue.stale() and catalogue.models() == []
        await asyncio.gather(catalogue.refresh(), catalogue.refresh())  # one request for both
        assert [m.id for m in catalogue.models()] == ["gpt-4o", "o3"]
        assert catalogue.context_window("gpt-4o") == 128000 and catalogue.context_window("o3") is None
        assert len(fake.models_requests) == 1
        assert fake.models_requests[0].headers["authorization"] == "Bearer sk-test"
        assert not catalogue.stale()

        fake.models_status = 503
        now[0] += 600
        await catalogue.fresh(wait_s=30)
        assert catalogue.error == "HTTP 503"
        assert [m.id for m in catalogue.models()] == ["gpt-4o", "o3"]  # what was known stays
        now[0] += RETRY_AFTER_FAILURE_S - 1
        assert catalogue.refresh_soon() is None  # not asked again at once

        fake.models_status = 200
        fake.models = [{"id": "gpt-5"}]
        now[0] += 1
        await catalogue.fresh(wait_s=30)
        assert catalogue.error is None and [m.id for m in catalogue.models()] == ["gpt-5"]
        assert len(fake.models_requests) == 3
        await provider.aclose()


async def test_anthropic_s_pages_are_followed_with_its_headers() -> None:
    async with FakeAnthropic() as fake:
        fake.models = [{"id": f"claude-{i}"} for i in range(5)]
        fake.models_page_size = 2
        provider = AnthropicProvider(base_url=fake.base_url, api_key="sk-ant", model="claude-0")
        catalogue = catalogue_for(provider, 600.0, ["claude-[0-3]"])
        await catalogue.refresh()
        assert [m.id for m in catalogue.models()] == ["claude-0", "claude-1", "claude-2", "claude-3"]
        assert [r.body.get("after_id") for r in fake.models_requests] == [None, "claude-1", "claude-3"]
        assert all(r.headers["x-api-key"] == "sk-ant" for r in fake.models_requests)
        assert all(r.headers["anthropic-version"] for r in fake.models_requests)
        await provider.aclose()


async def test_a_provider_that_cannot_list_has_an_empty_catalogue_and_asks_nothing() -> None:
    catalogue = catalogue_for(ScriptedProvider.demo(), 600.0, [])
    assert not catalogue.enabled and not catalogue.stale()
    await catalogue.refresh()
    assert catalogue.models() == [] and catalogue.fetched_at is None


def test_the_context_window_is_the_operator_s_then_the_provider_s_then_the_default() -> None:
    settings = Settings(context_window=100_000, context_windows={"pinned": 5000})
    catalogue = ModelCatalogue(None, 600.0)
    catalogue._served = [ModelInfo("pinned", None, 9000), ModelInfo("listed", None, 32768)]
    services = ActorServices(
        settings=settings,
        writer=None,
        provider=None,
        render=None,
        make_kit=None,
        models=catalogue,  # type: ignore[arg-type]
    )
    assert services.context_window_for("pinned") == 5000
    assert services.context_window_for("listed") == 32768
    assert services.context_window_for("unknown") == 100_000


class _Hanging:
    """A provider whose models endpoint never answers (the web site's `/hang`)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def models_endpoint(self) -> ModelsEndpoint:
        return ModelsEndpoint(self.url, {}, ListFormat.OPENAI)


async def test_a_provider_that_does_not_answer_delays_no_more_than_the_wait_and_shutdown_ends_it() -> None:
    async with WebSite() as site:
        catalogue = ModelCatalogue(_Hanging(f"{site.base_url}/hang"), 600.0)
        await catalogue.fresh(wait_s=0.2)  # returns: the request goes on behind it
        assert catalogue.models() == [] and catalogue.fetched_at is None
        assert catalogue.refresh_soon() is not None  # still the one request under way
        await catalogue.aclose()
        assert catalogue.refresh_soon() is not None  # stale still: the next need asks again
        await catalogue.aclose()


def test_listing_goes_through_the_providers_client_without_loading_httpcore() -> None:
    """Asked on a server's first session (the model picker): on httpx's default client this
    one GET imported httpcore, HTTP/2 and anyio's streams for the server's life (issue 32
    item 3). Nobody listens on the port: the answer is an error, the point is what loaded."""
    import subprocess
    import sys

    code = (
        "import asyncio, sys\n"
        "from agentd.providers.http.catalogue import ListFormat, ModelsEndpoint, fetch_models\n"
        "try:\n"
        "    endpoint = ModelsEndpoint('http://127.0.0.1:9/v1/models', {}, ListFormat.OPENAI)\n"
        "    asyncio.run(fetch_models(endpoint))\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'httpcore', 'h2', 'hpack'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split("\n")[:2] == ["ConnectError", "[]"]
