"""The public names of `agentd.providers.openai`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.providers.openai.chat import OpenAIProvider as OpenAIProvider
    from agentd.providers.openai.responses import OpenAIResponsesProvider as OpenAIResponsesProvider

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "OpenAIProvider": "agentd.providers.openai.chat",
    "OpenAIResponsesProvider": "agentd.providers.openai.responses",
}


__all__ = [
    "OpenAIProvider",
    "OpenAIResponsesProvider",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
