"""Pick the provider the settings ask for."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from agentd.core import Lane, Provider
from agentd.infra import ProviderName, Settings, redact_url

if TYPE_CHECKING:
    from pydantic import SecretStr

    from agentd.providers.http import HttpOptions

log = logging.getLogger(__name__)


def make_lanes(settings: Settings) -> list[Lane]:
    """The fallback lanes of the provider chain, in rotation order."""
    lanes = []
    for i, spec in enumerate(settings.fallbacks, start=1):
        lane_settings = settings.model_copy(update={"provider": spec.provider, "model": spec.model})
        if spec.base_url:
            key = "anthropic_base_url" if spec.provider is ProviderName.ANTHROPIC else "openai_base_url"
            lane_settings = lane_settings.model_copy(update={key: spec.base_url})
        if spec.api_key:
            key = "anthropic_api_key" if spec.provider is ProviderName.ANTHROPIC else "openai_api_key"
            lane_settings = lane_settings.model_copy(update={key: spec.api_key})
        lanes.append(
            Lane(make_provider(lane_settings), spec.model, f"fallback{i}:{spec.provider.value}/{spec.model}")
        )
    return lanes


# The HTTP providers' `name` and `supports_native_schema`, known without importing them.
LAZY_KINDS: dict[ProviderName, tuple[str, bool]] = {
    ProviderName.OPENAI: ("openai", True),
    ProviderName.OPENAI_RESPONSES: ("openai-responses", True),
    ProviderName.ANTHROPIC: ("anthropic", False),
}


def lazy_provider(settings: Settings) -> Provider:
    """The server's provider: an HTTP one is said in the log now and made at its first
    call (agentd/providers/lazy.py); the scripted one is made now (it is small, and a bad
    script is reported at start-up)."""
    kind = LAZY_KINDS.get(settings.provider) if settings.provider is not None else None
    if kind is None:
        return make_provider(settings)
    announce(settings)
    from agentd.providers.lazy import LazyProvider

    return LazyProvider(*kind, make=lambda: make_provider(settings, announced=True))


# How the log names each HTTP provider.
_LABELS = {
    ProviderName.ANTHROPIC: "anthropic",
    ProviderName.OPENAI_RESPONSES: "openai responses API",
    ProviderName.OPENAI: "openai-compatible",
}


def announce(settings: Settings) -> None:
    """The log line naming the HTTP provider in use (its URL without a password)."""
    if settings.provider in _LABELS:
        base_url, _ = _endpoint(settings)
        log.info(
            "provider: %s at %s, model %s", _LABELS[settings.provider], redact_url(base_url), settings.model
        )


def _endpoint(settings: Settings) -> tuple[str, SecretStr | None]:
    """The HTTP provider's base URL and API key: Anthropic's settings, or OpenAI's (both of
    its wire formats)."""
    if settings.provider is ProviderName.ANTHROPIC:
        return settings.anthropic_base_url, settings.anthropic_api_key
    return settings.openai_base_url, settings.openai_api_key


def make_provider(settings: Settings, *, announced: bool = False) -> Provider:
    if settings.provider not in LAZY_KINDS:
        return _scripted(settings)
    if not announced:
        announce(settings)
    base_url, api_key = _endpoint(settings)
    http: HttpOptions = {
        "api_key": api_key,
        "model": settings.model,
        # 0 in the settings: off.
        "first_token_timeout": settings.first_token_timeout_s or None,
        "stream_idle_timeout": settings.stream_idle_timeout_s or None,
        "http_transport": settings.http_transport,
    }
    if settings.provider is ProviderName.OPENAI:
        from agentd.providers.openai import OpenAIProvider

        return OpenAIProvider(
            base_url=base_url,
            token_field=settings.openai_token_field,
            reasoning_effort=settings.reasoning_effort,
            **http,
        )
    if settings.provider is ProviderName.OPENAI_RESPONSES:
        from agentd.providers.openai import OpenAIResponsesProvider

        return OpenAIResponsesProvider(base_url=base_url, reasoning_effort=settings.reasoning_effort, **http)
    from agentd.providers.anthropic import AnthropicProvider

    return AnthropicProvider(
        base_url=base_url,
        prompt_cache=settings.anthropic_prompt_cache,
        thinking_budget=settings.anthropic_thinking_budget,
        adaptive_thinking=settings.anthropic_adaptive_thinking,
        **http,
    )


def _scripted(settings: Settings) -> Provider:
    from agentd.providers.scripted import ScriptedProvider

    if settings.script is not None:
        log.info("provider: scripted, script %s", settings.script)
        return ScriptedProvider.from_file(settings.script, per_session=True)
    if settings.provider is None:
        log.warning("no provider configured (AGENTD_PROVIDER): using the scripted demo provider")
    else:
        log.info("provider: scripted demo script")
    return ScriptedProvider.demo()


async def close_providers(providers: Iterable[Provider]) -> None:
    """Close every distinct provider once (a lane may reuse the main provider). One that fails
    to close is logged and does not keep the others open."""
    seen: set[int] = set()
    for provider in providers:
        if id(provider) in seen:
            continue
        seen.add(id(provider))
        # A provider handed in by an embedding program or a test may predate `aclose`.
        aclose = getattr(provider, "aclose", None)
        if aclose is None:
            continue
        try:
            await aclose()
        except Exception:
            log.warning("closing provider %s failed", getattr(provider, "name", provider), exc_info=True)
