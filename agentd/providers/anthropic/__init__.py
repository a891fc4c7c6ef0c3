"""The public names of `agentd.providers.anthropic`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.providers.anthropic.provider import AnthropicProvider as AnthropicProvider

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "AnthropicProvider": "agentd.providers.anthropic.provider",
}


__all__ = [
    "AnthropicProvider",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
