"""The `wait` tool: wait for a background shell task (or any of them) to finish (R-T7).

Split from `agentd/tools/shell/background.py` (which keeps the tasks and `task_output`)."""

from __future__ import annotations

from typing import Any, ClassVar

from agentd.tools.base import Access, ToolContext, ToolKind, ToolResult
from agentd.tools.shell.background import (
    DEFAULT_WAIT,
    INTERRUPTED_TEXT,
    MAX_WAIT,
    _background,
    _report,
    _still_running,
    _task_id_arg,
    _wait_timeout,
)


class Wait:
    name: ClassVar[str] = "wait"
    kind: ClassVar[ToolKind] = ToolKind.OTHER
    access: ClassVar[Access] = Access.READ
    description: ClassVar[str] = (
        "Wait for a background task (or any of them) to finish, up to a timeout; returns its output."
    )
    guidance: ClassVar[str] = (
        "Use wait after starting commands with bash run_in_background when you have nothing else to do "
        "until they finish: with task_id it waits for that task, without it for whichever task finishes "
        f"first (one that finished unnoticed returns at once), for at most timeout seconds (default "
        f"{DEFAULT_WAIT:g}, max {MAX_WAIT:g}). It returns the finished task's output and exit status, or "
        "says what is still running when the time is up. It returns early with "
        f'"{INTERRUPTED_TEXT}" when the user sends a message; read that message before waiting again.'
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "task_id": {
                "type": "string",
                "description": "Task to wait for (from bash run_in_background); default: any task.",
            },
            "timeout": {
                "type": "number",
                "minimum": 0,
                "maximum": MAX_WAIT,
                "description": f"Seconds to wait at most (default {DEFAULT_WAIT:g}, max {MAX_WAIT:g}).",
            },
        },
        "required": [],
        "additionalProperties": False,
    }

    def title(self, args: dict[str, Any]) -> str:
        task_id = args.get("task_id")
        return f"Wait for {task_id}" if isinstance(task_id, str) and task_id else "Wait for background tasks"

    def locations(self, args: dict[str, Any], ctx: ToolContext) -> list[dict[str, Any]]:
        return []

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        bg = _background(ctx)
        task_id = _task_id_arg(args)
        timeout = _wait_timeout(args)
        if task_id is not None and task_id not in bg.ids() and bg.earlier.knows(task_id):
            text, earlier = bg.earlier.report(task_id)  # it ended before a restart: nothing to wait for
            return ToolResult(output=text, raw_output={"reason": "done", **earlier})
        result = await bg.wait(task_id, timeout, ctx.interrupted)
        raw: dict[str, Any] = {"reason": result.reason, "taskId": result.task_id, "running": result.running}
        if result.reason == "done" and result.task_id is not None:
            output, task_raw = _report(bg, result.task_id)
            raw.update(task_raw)
        elif result.reason == "interrupted":
            output = f"{INTERRUPTED_TEXT}; {_still_running(result)}"
        elif result.reason == "idle":
            output = "no background tasks are running and none finished since you last checked"
        else:
            output = f"{_still_running(result)} after waiting {timeout:g} s"
        return ToolResult(output=output, raw_output=raw)
