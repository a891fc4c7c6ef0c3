"""Background tasks of an earlier life of the session's process, read back from its log.

A background task (a `bash` with run_in_background, a background sub-agent) lives in the
process that started it; nothing of it survives a `kill -9` or a restart. What does survive
is the log: a `background_task_started` event when it starts and a `background_task` event
when it ends. `replay` pairs them (pure): a start without an end is a task that was running
when the process died, and crash repair (`agentd/session/eventlog/recovery.py`) ends it `interrupted`
durably. `EarlierTasks` then answers for those ids in the new life — `task_output` gets
their status instead of "unknown task", and an interrupted task is announced to the model
once, like any finished task (it is a `CompletionSource`). Children are never resumed
mid-run (000 has no such promise; a half-run command cannot be picked up again).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agentd.core.kinds import EventKind
from agentd.core.task_notice import TaskCompletion, TaskKind, TaskStart

_ID = re.compile(r"^(bg|agent)-(\d+)$")
_PREFIX = {"bg": TaskKind.BASH, "agent": TaskKind.AGENT}


@dataclass
class TaskHistory:
    """What the log says about the session's background tasks, oldest first."""

    open: list[TaskStart] = field(default_factory=list)  # started, never ended
    ended: dict[str, TaskCompletion] = field(default_factory=dict)  # task id → its last end
    last_ids: dict[TaskKind, int] = field(default_factory=dict)  # highest `bg-N` / `agent-N` seen


def replay(events: Iterable[tuple[str, dict[str, Any]]]) -> TaskHistory:
    """Pair starts and ends by task id, in log order (ids may repeat across lives of an
    older server, so a later start opens the id again). Unreadable events are skipped."""
    running: dict[str, TaskStart] = {}
    history = TaskHistory()
    for kind, payload in events:
        try:
            if kind == EventKind.BACKGROUND_TASK_STARTED.value:
                start = TaskStart.from_payload(payload)
                running[start.task_id] = start
                _note_id(history, start.task_id)
            elif kind == EventKind.BACKGROUND_TASK.value:
                done = TaskCompletion.from_payload(payload)
                running.pop(done.task_id, None)
                history.ended[done.task_id] = done
                _note_id(history, done.task_id)
        except (KeyError, ValueError, TypeError):
            continue
    history.open = list(running.values())
    return history


def _note_id(history: TaskHistory, task_id: str) -> None:
    if (m := _ID.match(task_id)) is not None:
        kind = _PREFIX[m.group(1)]
        history.last_ids[kind] = max(history.last_ids.get(kind, 0), int(m.group(2)))


@dataclass
class _Earlier:
    completion: TaskCompletion
    reported: bool


class EarlierTasks:
    """The background tasks of the session's earlier lives: known by id, their end
    announced once if the model never saw it (an interrupted task)."""

    def __init__(self) -> None:
        self._tasks: dict[str, _Earlier] = {}

    def add(self, completion: TaskCompletion, *, announce: bool) -> None:
        self._tasks[completion.task_id] = _Earlier(completion, reported=not announce)

    def knows(self, task_id: str) -> bool:
        return task_id in self._tasks

    def report(self, task_id: str) -> tuple[str, dict[str, Any]]:
        """What `task_output` shows for it: the end it had, and that its output is gone."""
        earlier = self._tasks[task_id]
        earlier.reported = True
        c = earlier.completion
        raw: dict[str, Any] = {
            "taskId": c.task_id,
            "done": True,
            "status": c.end.value,
            "exitCode": c.exit_code,
            "earlierRun": True,
        }
        text = "(its output was not kept across the server restart)"
        return f"{text}\n[{c.status}]", raw

    def unreported(self) -> list[TaskCompletion]:
        if not self._tasks:
            return []  # asked every turn; most sessions ran no background task
        return [e.completion for e in self._tasks.values() if not e.reported]

    def take_completions(self) -> list[TaskCompletion]:
        if not self._tasks:
            return []  # (`unreported`'s own check, without its call: asked every round)
        out = self.unreported()
        for c in out:
            self._tasks[c.task_id].reported = True
        return out
