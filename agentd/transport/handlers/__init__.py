"""The ACP methods agentd implements (R-P2), one module per job; `registry.py` holds the table
the dispatcher serves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face
from agentd.transport.handlers.registry import METHODS, UNSUPPORTED

if TYPE_CHECKING:
    from agentd.transport.handlers.remote import stored_access as stored_access
    from agentd.transport.handlers.remote import watch_from_here as watch_from_here
    from agentd.transport.handlers.share import recheck_remote_access as recheck_remote_access

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "recheck_remote_access": "agentd.transport.handlers.share",
    "stored_access": "agentd.transport.handlers.remote",
    "watch_from_here": "agentd.transport.handlers.remote",
}


__all__ = [
    "METHODS",
    "UNSUPPORTED",
    "recheck_remote_access",
    "stored_access",
    "watch_from_here",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
