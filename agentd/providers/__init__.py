"""The public names of `agentd.providers`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentd.providers.factory import close_providers as close_providers
    from agentd.providers.factory import make_lanes as make_lanes
    from agentd.providers.factory import make_provider as make_provider
    from agentd.providers.scripted import ScriptedProvider as ScriptedProvider

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "ScriptedProvider": "agentd.providers.scripted",
    "close_providers": "agentd.providers.factory",
    "make_lanes": "agentd.providers.factory",
    "make_provider": "agentd.providers.factory",
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
    "ScriptedProvider",
    "close_providers",
    "make_lanes",
    "make_provider",
]
