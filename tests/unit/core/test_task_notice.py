"""The background-task notice (agentd/core/task_notice.py): the reminder the model reads
and the event clients get — "注入一条提醒消息" (000)."""

from __future__ import annotations

import pytest

from agentd.core.events import EventKind
from agentd.core.task_notice import MAX_SUMMARY, TaskCompletion, TaskEnd, TaskKind, render_reminder


def done(task_id: str = "bg-1", command: str = "make test", rc: int | None = 0) -> TaskCompletion:
    end = TaskEnd.COMPLETED if rc == 0 else TaskEnd.FAILED
    status = f"task {task_id} finished with exit code {rc}"
    return TaskCompletion(
        task_id, TaskKind.BASH, command, end, status, rc, f'task_output (task_id "{task_id}")'
    )


def test_reminder_names_task_command_status_and_how_to_read_it() -> None:
    text = render_reminder([done(rc=2)])
    assert text.startswith("<system-reminder>\n") and text.endswith("\n</system-reminder>")
    assert "Background task bg-1 has finished: task bg-1 finished with exit code 2." in text
    assert "Command: make test" in text
    assert 'Read its output with task_output (task_id "bg-1").' in text
    assert "not a message from the user" in text


def test_one_reminder_holds_every_task_in_order() -> None:
    text = render_reminder([done("bg-1"), done("bg-2", "npm run build")])
    assert text.count("<system-reminder>") == 1
    assert text.index("bg-1 has finished") < text.index("bg-2 has finished")
    assert "Command: npm run build" in text


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        pytest.param("echo a\necho  b", "echo a echo b", id="one-line"),
        pytest.param("x" * (MAX_SUMMARY + 50), "x" * (MAX_SUMMARY - 1) + "…", id="capped"),
    ],
)
def test_command_is_shown_on_one_bounded_line(command: str, shown: str) -> None:
    assert f"Command: {shown}\n" in render_reminder([done(command=command)])


def test_sub_agents_are_named_as_agents() -> None:
    agent = TaskCompletion("agent-1", TaskKind.AGENT, "review the diff", TaskEnd.COMPLETED, "done", None, "x")
    assert "Background agent agent-1 has finished: done." in render_reminder([agent])


def test_event_payload() -> None:
    c = done(rc=3)
    assert c.kind is EventKind.BACKGROUND_TASK
    assert c.payload() == {
        "taskId": "bg-1",
        "taskKind": "bash",
        "summary": "make test",
        "status": "failed",
        "exitCode": 3,
        "message": "task bg-1 finished with exit code 3",
    }
