"""Pick the provider the settings ask for."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TypedDict

from agentd.core import Lane, Provider
from agentd.infra import HttpTransport, ProviderName, Settings, redact_url

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


class StreamTimeouts(TypedDict):
    first_token_timeout: float | None
    stream_idle_timeout: float | None
    http_transport: HttpTransport


def stream_timeouts(settings: Settings) -> StreamTimeouts:
    """The stream timeouts every HTTP provider takes (0 in the settings: off), and its
    HTTP transport."""
    return StreamTimeouts(
        first_token_timeout=settings.first_token_timeout_s or None,
        stream_idle_timeout=settings.stream_idle_timeout_s or None,
        http_transport=settings.http_transport,
    )


def make_provider(settings: Settings) -> Provider:
    if settings.provider is ProviderName.OPENAI:
        from agentd.providers.openai import OpenAIProvider

        base = redact_url(settings.openai_base_url)
        log.info("provider: openai-compatible at %s, model %s", base, settings.model)
        return OpenAIProvider(
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key,
            model=settings.model,
            token_field=settings.openai_token_field,
            reasoning_effort=settings.reasoning_effort,
            **stream_timeouts(settings),
        )
    if settings.provider is ProviderName.OPENAI_RESPONSES:
        from agentd.providers.openai import OpenAIResponsesProvider

        base = redact_url(settings.openai_base_url)
        log.info("provider: openai responses API at %s, model %s", base, settings.model)
        return OpenAIResponsesProvider(
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key,
            model=settings.model,
            reasoning_effort=settings.reasoning_effort,
            **stream_timeouts(settings),
        )
    if settings.provider is ProviderName.ANTHROPIC:
        from agentd.providers.anthropic import AnthropicProvider

        base = redact_url(settings.anthropic_base_url)
        log.info("provider: anthropic at %s, model %s", base, settings.model)
        return AnthropicProvider(
            base_url=settings.anthropic_base_url,
            api_key=settings.anthropic_api_key,
            model=settings.model,
            prompt_cache=settings.anthropic_prompt_cache,
            thinking_budget=settings.anthropic_thinking_budget,
            adaptive_thinking=settings.anthropic_adaptive_thinking,
            **stream_timeouts(settings),
        )
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
