"""The public names of `agentd.providers.http`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentd.providers.http.common import parse_retry_after as parse_retry_after
    from agentd.providers.http.provider import HttpProvider as HttpProvider
    from agentd.providers.http.sse import SSEReader as SSEReader
    from agentd.providers.http.sse import parse_json as parse_json

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "HttpProvider": "agentd.providers.http.provider",
    "SSEReader": "agentd.providers.http.sse",
    "parse_json": "agentd.providers.http.sse",
    "parse_retry_after": "agentd.providers.http.common",
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
    "HttpProvider",
    "SSEReader",
    "parse_json",
    "parse_retry_after",
]
