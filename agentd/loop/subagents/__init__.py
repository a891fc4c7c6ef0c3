"""The public names of `agentd.loop.subagents`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.loop.subagents.limits import DEFAULT_CHILD_MAX_TURNS as DEFAULT_CHILD_MAX_TURNS

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "DEFAULT_CHILD_MAX_TURNS": "agentd.loop.subagents.limits",
}


__all__ = [
    "DEFAULT_CHILD_MAX_TURNS",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
