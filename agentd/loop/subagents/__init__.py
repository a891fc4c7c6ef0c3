"""The public names of `agentd.loop.subagents`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.loop.subagents.limits import DEFAULT_CHILD_MAX_TURNS as DEFAULT_CHILD_MAX_TURNS
    from agentd.loop.subagents.limits import SubagentLimits as SubagentLimits
    from agentd.loop.subagents.registry import Subagents as Subagents
    from agentd.loop.subagents.task_tool import TASK_TOOL as TASK_TOOL
    from agentd.loop.subagents.task_tool import AgentSpec as AgentSpec

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "DEFAULT_CHILD_MAX_TURNS": "agentd.loop.subagents.limits",
    "AgentSpec": "agentd.loop.subagents.task_tool",
    "SubagentLimits": "agentd.loop.subagents.limits",
    "Subagents": "agentd.loop.subagents.registry",
    "TASK_TOOL": "agentd.loop.subagents.task_tool",
}


__all__ = [
    "DEFAULT_CHILD_MAX_TURNS",
    "TASK_TOOL",
    "AgentSpec",
    "SubagentLimits",
    "Subagents",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
