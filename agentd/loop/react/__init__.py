"""The public names of `agentd.loop.react`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.loop.react.base import run_compaction as run_compaction
    from agentd.loop.react.run import run_react as run_react
    from agentd.loop.react.state import TurnState as TurnState
    from agentd.loop.react.step import NextStepStop as NextStepStop
    from agentd.loop.react.toolrun import execute_tool_round as execute_tool_round

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "execute_tool_round": "agentd.loop.react.toolrun",
    "NextStepStop": "agentd.loop.react.step",
    "run_compaction": "agentd.loop.react.base",
    "run_react": "agentd.loop.react.run",
    "TurnState": "agentd.loop.react.state",
}


__all__ = [
    "NextStepStop",
    "TurnState",
    "execute_tool_round",
    "run_compaction",
    "run_react",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
