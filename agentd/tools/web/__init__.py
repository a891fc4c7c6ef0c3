"""The public names of `agentd.tools.web`: the `web_fetch` tool and where it may go."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.tools.web.policy import WebFetchPolicy as WebFetchPolicy
    from agentd.tools.web.policy import build_fetch_policy as build_fetch_policy
    from agentd.tools.web.tool import FetchLimits as FetchLimits
    from agentd.tools.web.tool import WebFetch as WebFetch

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "build_fetch_policy": "agentd.tools.web.policy",
    "FetchLimits": "agentd.tools.web.tool",
    "WebFetch": "agentd.tools.web.tool",
    "WebFetchPolicy": "agentd.tools.web.policy",
}


__all__ = [
    "FetchLimits",
    "WebFetch",
    "WebFetchPolicy",
    "build_fetch_policy",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
