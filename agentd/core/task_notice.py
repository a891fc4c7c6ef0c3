"""Background-task notifications: what the model and the clients are told when a task
that runs beside the conversation (a background `bash`, a background sub-agent) finishes.

The seed (000) treats a finished background job as news the agent must get without asking:
a "后台通知" (background notification) is one of the sources of input the loop knows
(001: "根据 prompt_id 判断这条输入从哪来（用户、定时任务、后台通知、goal 等）"), and the
loop's answer to "the model did not notice" is always the same — "注入一条提醒消息"
(inject a reminder message), because "契约违约的主因是模型没注意到要求" (the model failed
to notice, not to reason). So a finished task becomes a system reminder written into the
conversation before the next sampling round (L3 step 2, beside pending interjections),
and a `background_task` event for the clients as soon as it finishes.

Pure: the record of one completion, the reminder text and the event payload. Where the
completions come from is a `CompletionSource` (`agentd/tools/shell/background.py` for shell
tasks; `agentd/loop/subagents/registry.py` for background sub-agents).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Protocol

from agentd.core.kinds import EventKind


class TaskKind(StrEnum):
    BASH = "bash"  # `bash` with run_in_background
    AGENT = "agent"  # a `task` sub-agent with run_in_background (R-T11)


class TaskEnd(StrEnum):
    """How the task ended, for clients (the model reads `status`)."""

    COMPLETED = "completed"  # exit code 0
    FAILED = "failed"  # non-zero exit, could not start, stopped by its timeout or output cap
    KILLED = "killed"  # killed or terminated by a signal
    INTERRUPTED = "interrupted"  # the session's process died (or stopped) while it ran: lost

    @property
    def on_its_own(self) -> bool:
        """It ended by itself (not killed, not lost with its process): news worth a turn."""
        return self in (TaskEnd.COMPLETED, TaskEnd.FAILED)


@dataclass(frozen=True)
class TaskCompletion:
    """One finished background task, as announced once to the model and to clients."""

    kind: ClassVar[EventKind] = EventKind.BACKGROUND_TASK

    task_id: str
    task_kind: TaskKind
    summary: str  # the command (or, for a sub-agent, its description)
    end: TaskEnd
    status: str  # one line for the model: "task bg-1 finished with exit code 3"
    exit_code: int | None
    read_with: str  # how the model reads the output: a tool call it can make

    def payload(self) -> dict[str, Any]:
        """The `background_task` event (rendered as `_agentd/event`, docs/protocol.md)."""
        return {
            "taskId": self.task_id,
            "taskKind": self.task_kind.value,
            "summary": self.summary,
            "status": self.end.value,
            "exitCode": self.exit_code,
            "message": self.status,
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> TaskCompletion:
        """A stored `background_task` event read back (raises KeyError / ValueError)."""
        task_id = str(p["taskId"])
        exit_code = p.get("exitCode")
        return cls(
            task_id,
            TaskKind(p["taskKind"]),
            str(p.get("summary", "")),
            TaskEnd(p["status"]),
            str(p.get("message", "")),
            exit_code if isinstance(exit_code, int) else None,
            output_call(task_id),
        )


@dataclass(frozen=True)
class TaskStart:
    """A background task that started: logged durably at once, so a session whose process
    dies while it runs still knows of it after the restart (`agentd/core/task_history.py`)."""

    kind: ClassVar[EventKind] = EventKind.BACKGROUND_TASK_STARTED

    task_id: str
    task_kind: TaskKind
    summary: str
    started_at: str  # ISO 8601, UTC
    turn_id: str | None = None  # the turn whose tool call started it

    def payload(self) -> dict[str, Any]:
        """The `background_task_started` event (`_agentd/event`, docs/protocol.md)."""
        payload = {
            "taskId": self.task_id,
            "taskKind": self.task_kind.value,
            "summary": self.summary,
            "startedAt": self.started_at,
        }
        if self.turn_id is not None:
            payload["turnId"] = self.turn_id
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> TaskStart:
        turn_id = p.get("turnId")
        return cls(
            str(p["taskId"]),
            TaskKind(p["taskKind"]),
            str(p.get("summary", "")),
            str(p.get("startedAt", "")),
            turn_id if isinstance(turn_id, str) else None,
        )

    def interrupted(self) -> TaskCompletion:
        """How it ended when its process died with it: lost, and said so."""
        noun = "task" if self.task_kind is TaskKind.BASH else "agent"
        status = (
            f"{noun} {self.task_id} was interrupted: the server stopped while it ran "
            f"(started {self.started_at}); it is not running any more and its output is lost"
        )
        end, call = TaskEnd.INTERRUPTED, output_call(self.task_id)
        return TaskCompletion(self.task_id, self.task_kind, self.summary, end, status, None, call)


def output_call(task_id: str) -> str:
    """The tool call that shows a task's output (or, for a lost one, its status)."""
    return f'task_output (task_id "{task_id}")'


class CompletionSource(Protocol):
    """Where finished tasks are taken from. `take_completions` hands each finished task
    out at most once, and leaves out a task whose end the model already saw (a `wait` or
    `task_output` that returned it): that is the model learning it too."""

    def take_completions(self) -> list[TaskCompletion]: ...


MAX_SUMMARY = 200  # characters of the command shown in the reminder


def _short(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= MAX_SUMMARY else one_line[: MAX_SUMMARY - 1] + "…"


def render_reminder(completions: Sequence[TaskCompletion]) -> str:
    """The system reminder the model reads before its next sampling round: which task,
    what it ran, how it ended, and the call that shows its output."""
    lines = ["<system-reminder>"]
    for c in completions:
        noun = "Background task" if c.task_kind is TaskKind.BASH else "Background agent"
        lines.append(f"{noun} {c.task_id} has finished: {c.status}.")
        label = "Command" if c.task_kind is TaskKind.BASH else "Task"
        lines.append(f"  {label}: {_short(c.summary)}")
        lines.append(f"  Read its output with {c.read_with}.")
    lines.append(
        "This is an automatic notice, not a message from the user; each finished task is announced once."
    )
    lines.append("</system-reminder>")
    return "\n".join(lines)


async def wait_for_any(
    futures: set[asyncio.Future[Any]], timeout_s: float, interrupted: asyncio.Event | None
) -> None:
    """Until one of `futures` is done, `interrupted` is set or `timeout_s` has passed (the
    `wait`/`task_output` tools of background shells and sub-agents). `asyncio.wait` never
    cancels what it watches, so the tasks' futures stay intact."""
    watched = set(futures)
    waiter = asyncio.ensure_future(interrupted.wait()) if interrupted is not None else None
    if waiter is not None:
        watched.add(waiter)
    try:
        await asyncio.wait(watched, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if waiter is not None:
            waiter.cancel()


async def stop_runners(runners: Iterable[asyncio.Future[Any]], grace_s: float) -> None:
    """Wait up to `grace_s` for the runners still going (background shells and sub-agents
    closing with their session: they were told to stop), then cancel the stragglers and wait
    until they ended. A runner's failure or cancellation is its own: none escapes here."""
    running = [r for r in runners if not r.done()]
    if not running:
        return
    _, pending = await asyncio.wait(running, timeout=grace_s)
    for r in pending:
        r.cancel()
    for r in pending:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await r


# The `task` / `task_output` tools' raw outputs for a sub-agent (clients read them as data).


def agent_started_output(task_id: str, agent: str) -> dict[str, Any]:
    return {"taskId": task_id, "agent": agent, "background": True}


def agent_result_output(task_id: str, agent: str, status: str, reason: str | None) -> dict[str, Any]:
    raw: dict[str, Any] = {"taskId": task_id, "agent": agent, "status": status}
    if reason is not None:
        raw["reason"] = reason
    return raw


def agent_report_output(task_id: str, agent: str, done: bool, status: str | None) -> dict[str, Any]:
    raw: dict[str, Any] = {"taskId": task_id, "agent": agent, "done": done}
    if status is not None:
        raw["status"] = status
    return raw
