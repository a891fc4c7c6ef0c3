"""The public names of `agentd.providers.openai`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentd.providers.openai.chat import OpenAIProvider as OpenAIProvider
    from agentd.providers.openai.responses import OpenAIResponsesProvider as OpenAIResponsesProvider

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "OpenAIProvider": "agentd.providers.openai.chat",
    "OpenAIResponsesProvider": "agentd.providers.openai.responses",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "OpenAIProvider",
    "OpenAIResponsesProvider",
]
