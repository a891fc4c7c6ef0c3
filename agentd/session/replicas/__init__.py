"""The public names of `agentd.session.replicas`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentd.session.replicas.leases import SessionLeases as SessionLeases
    from agentd.session.replicas.live import LiveFeed as LiveFeed
    from agentd.session.replicas.live import LivePublisher as LivePublisher

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "LiveFeed": "agentd.session.replicas.live",
    "LivePublisher": "agentd.session.replicas.live",
    "SessionLeases": "agentd.session.replicas.leases",
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
    "LiveFeed",
    "LivePublisher",
    "SessionLeases",
]
