"""The public names of `agentd.providers`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.providers.factory import close_providers as close_providers
    from agentd.providers.factory import lazy_provider as lazy_provider
    from agentd.providers.factory import make_lanes as make_lanes
    from agentd.providers.factory import make_provider as make_provider
    from agentd.providers.http.catalogue import ModelCatalogue as ModelCatalogue
    from agentd.providers.http.catalogue import ModelInfo as ModelInfo
    from agentd.providers.http.catalogue import catalogue_for as catalogue_for
    from agentd.providers.scripted import ScriptedProvider as ScriptedProvider

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "catalogue_for": "agentd.providers.http.catalogue",
    "close_providers": "agentd.providers.factory",
    "lazy_provider": "agentd.providers.factory",
    "make_lanes": "agentd.providers.factory",
    "make_provider": "agentd.providers.factory",
    "ModelCatalogue": "agentd.providers.http.catalogue",
    "ModelInfo": "agentd.providers.http.catalogue",
    "ScriptedProvider": "agentd.providers.scripted",
}


__all__ = [
    "ModelCatalogue",
    "ModelInfo",
    "ScriptedProvider",
    "catalogue_for",
    "close_providers",
    "lazy_provider",
    "make_lanes",
    "make_provider",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
