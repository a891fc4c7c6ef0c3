"""The public names of `agentd.providers.http`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.providers.http.catalogue import ListFormat as ListFormat
    from agentd.providers.http.catalogue import ListsModels as ListsModels
    from agentd.providers.http.catalogue import ModelCatalogue as ModelCatalogue
    from agentd.providers.http.catalogue import ModelInfo as ModelInfo
    from agentd.providers.http.catalogue import ModelsEndpoint as ModelsEndpoint
    from agentd.providers.http.catalogue import catalogue_for as catalogue_for
    from agentd.providers.http.common import parse_retry_after as parse_retry_after
    from agentd.providers.http.provider import FoldingHttpProvider as FoldingHttpProvider
    from agentd.providers.http.provider import HttpOptions as HttpOptions
    from agentd.providers.http.provider import HttpProvider as HttpProvider
    from agentd.providers.http.provider import StreamFold as StreamFold
    from agentd.providers.http.sse import Event as Event
    from agentd.providers.http.sse import SSEReader as SSEReader
    from agentd.providers.http.sse import parse_event as parse_event
    from agentd.providers.http.sse import parse_json as parse_json

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "FoldingHttpProvider": "agentd.providers.http.provider",
    "catalogue_for": "agentd.providers.http.catalogue",
    "Event": "agentd.providers.http.sse",
    "HttpOptions": "agentd.providers.http.provider",
    "HttpProvider": "agentd.providers.http.provider",
    "ListFormat": "agentd.providers.http.catalogue",
    "ListsModels": "agentd.providers.http.catalogue",
    "ModelCatalogue": "agentd.providers.http.catalogue",
    "ModelInfo": "agentd.providers.http.catalogue",
    "ModelsEndpoint": "agentd.providers.http.catalogue",
    "parse_event": "agentd.providers.http.sse",
    "parse_json": "agentd.providers.http.sse",
    "parse_retry_after": "agentd.providers.http.common",
    "SSEReader": "agentd.providers.http.sse",
    "StreamFold": "agentd.providers.http.provider",
}


__all__ = [
    "Event",
    "FoldingHttpProvider",
    "HttpOptions",
    "HttpProvider",
    "ListFormat",
    "ListsModels",
    "ModelCatalogue",
    "ModelInfo",
    "ModelsEndpoint",
    "SSEReader",
    "StreamFold",
    "catalogue_for",
    "parse_event",
    "parse_json",
    "parse_retry_after",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
