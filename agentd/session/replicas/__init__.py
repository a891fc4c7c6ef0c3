"""The public names of `agentd.session.replicas`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

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


__all__ = [
    "LiveFeed",
    "LivePublisher",
    "SessionLeases",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
