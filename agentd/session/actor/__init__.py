"""The public names of `agentd.session.actor`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.session.actor.session_actor import SessionActor as SessionActor

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "SessionActor": "agentd.session.actor.session_actor",
}


__all__ = [
    "SessionActor",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
