"""The public names of `agentd.loop`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.loop.context import TurnContext as TurnContext
    from agentd.loop.limits import LoopLimits as LoopLimits
    from agentd.loop.react.base import run_compaction as run_compaction
    from agentd.loop.session_state import SessionLoopState as SessionLoopState
    from agentd.loop.structured import STRUCTURED_OUTPUT_TOOL as STRUCTURED_OUTPUT_TOOL
    from agentd.loop.structured import OutputSchema as OutputSchema
    from agentd.loop.subagents.task_tool import TASK_TOOL as TASK_TOOL
    from agentd.loop.turn import run_bang as run_bang
    from agentd.loop.turn import run_compaction_job as run_compaction_job
    from agentd.loop.turn import run_turn as run_turn

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "LoopLimits": "agentd.loop.limits",
    "OutputSchema": "agentd.loop.structured",
    "run_compaction": "agentd.loop.react.base",
    "run_bang": "agentd.loop.turn",
    "run_compaction_job": "agentd.loop.turn",
    "SessionLoopState": "agentd.loop.session_state",
    "run_turn": "agentd.loop.turn",
    "STRUCTURED_OUTPUT_TOOL": "agentd.loop.structured",
    "TASK_TOOL": "agentd.loop.subagents.task_tool",
    "TurnContext": "agentd.loop.context",
}


__all__ = [
    "STRUCTURED_OUTPUT_TOOL",
    "TASK_TOOL",
    "LoopLimits",
    "OutputSchema",
    "SessionLoopState",
    "TurnContext",
    "run_bang",
    "run_compaction",
    "run_compaction_job",
    "run_turn",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
