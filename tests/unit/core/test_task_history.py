"""Background tasks of an earlier life, read back from the log (agentd/core/task_history.py):
a start without an end is a task that died with its process."""

from __future__ import annotations

from typing import Any

from agentd.core.events import EventKind
from agentd.core.task_history import EarlierTasks, replay
from agentd.core.task_notice import TaskCompletion, TaskEnd, TaskKind, TaskStart

STARTED = EventKind.BACKGROUND_TASK_STARTED.value
ENDED = EventKind.BACKGROUND_TASK.value


def start(task_id: str, kind: TaskKind = TaskKind.BASH) -> tuple[str, dict[str, Any]]:
    return STARTED, TaskStart(task_id, kind, f"job {task_id}", "2026-12-01T10:00:00+00:00").payload()


def end(task_id: str, rc: int = 0) -> tuple[str, dict[str, Any]]:
    status = TaskEnd.COMPLETED if rc == 0 else TaskEnd.FAILED
    payload = {
        "taskId": task_id,
        "taskKind": "bash",
        "summary": f"job {task_id}",
        "status": status.value,
        "exitCode": rc,
        "message": f"task {task_id} finished with exit code {rc}",
    }
    return ENDED, payload


def test_a_start_without_an_end_is_open_and_ended_ones_are_kept() -> None:
    history = replay([start("bg-1"), start("agent-1", TaskKind.AGENT), end("bg-1", 3), start("bg-2")])
    assert [s.task_id for s in history.open] == ["agent-1", "bg-2"]
    assert history.ended["bg-1"].end is TaskEnd.FAILED and history.ended["bg-1"].exit_code == 3
    assert history.last_ids == {TaskKind.BASH: 2, TaskKind.AGENT: 1}


def test_an_id_reused_by_a_later_life_is_paired_in_log_order() -> None:
    # An older server numbered from 1 again: the second start opens bg-1 anew.
    history = replay([start("bg-1"), end("bg-1"), start("bg-1")])
    assert [s.task_id for s in history.open] == ["bg-1"]
    assert replay([start("bg-1"), end("bg-1"), start("bg-1"), end("bg-1")]).open == []


def test_unreadable_events_are_skipped() -> None:
    broken = [(STARTED, {"taskKind": "bash"}), (ENDED, {"taskId": "bg-9", "taskKind": "nope"})]
    history = replay([*broken, start("bg-3"), ("turn_started", {"turnId": "t"})])
    assert [s.task_id for s in history.open] == ["bg-3"]
    assert history.ended == {}
    assert history.last_ids == {TaskKind.BASH: 3}


def test_an_interrupted_task_says_it_is_lost() -> None:
    lost = TaskStart(
        "agent-2", TaskKind.AGENT, "compute", "2026-12-01T10:00:00+00:00", "turn_1"
    ).interrupted()
    assert lost.end is TaskEnd.INTERRUPTED and not lost.end.on_its_own
    assert lost.exit_code is None
    assert lost.status.startswith("agent agent-2 was interrupted: the server stopped while it ran")
    assert lost.read_with == 'task_output (task_id "agent-2")'
    assert TaskCompletion.from_payload(lost.payload()) == lost


def test_a_start_round_trips_and_leaves_out_an_unknown_turn() -> None:
    s = TaskStart("bg-1", TaskKind.BASH, "make", "2026-12-01T10:00:00+00:00")
    assert "turnId" not in s.payload()
    assert TaskStart.from_payload(s.payload()) == s


def test_ends_on_their_own_are_completed_and_failed_only() -> None:
    assert {e for e in TaskEnd if e.on_its_own} == {TaskEnd.COMPLETED, TaskEnd.FAILED}


def test_earlier_tasks_announce_an_interrupted_one_once_and_report_any() -> None:
    earlier = EarlierTasks()
    lost = TaskStart("bg-2", TaskKind.BASH, "sleep 600", "2026-12-01T10:00:00+00:00").interrupted()
    finished = TaskCompletion.from_payload(end("bg-1", 0)[1])
    earlier.add(finished, announce=False)
    earlier.add(lost, announce=True)
    assert earlier.unreported() == [lost]
    assert earlier.take_completions() == [lost]
    assert earlier.take_completions() == []
    assert earlier.knows("bg-1") and not earlier.knows("bg-3")
    text, raw = earlier.report("bg-1")
    assert text.endswith("[task bg-1 finished with exit code 0]")
    assert raw == {"taskId": "bg-1", "done": True, "status": "completed", "exitCode": 0, "earlierRun": True}


def test_reading_an_interrupted_task_counts_as_seeing_it() -> None:
    earlier = EarlierTasks()
    earlier.add(TaskStart("bg-1", TaskKind.BASH, "x", "t").interrupted(), announce=True)
    earlier.report("bg-1")
    assert earlier.take_completions() == []
