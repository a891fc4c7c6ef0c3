"""What `task_output` needs from the session's background sub-agents (R-T11).

The sub-agents themselves run the loop (`agentd/loop/subagents/registry.py`), which the tools layer
must not import; `task_output` sees them only through this protocol, the way it sees
background shell tasks through `BackgroundTasks`. Ids differ by prefix (`agent-N` vs `bg-N`).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol


class AgentTasks(Protocol):
    def knows(self, task_id: str) -> bool:
        """`task_id` names one of this session's sub-agents."""
        ...

    def report(self, task_id: str) -> tuple[str, dict[str, Any]]:
        """The child's answer so far (or its final answer) plus a status line, and raw output."""
        ...

    async def wait(self, task_id: str, timeout_s: float, interrupted: asyncio.Event | None) -> str:
        """Until the child ends, `timeout_s` passes or `interrupted` is set: `done`,
        `timeout` or `interrupted`."""
        ...
