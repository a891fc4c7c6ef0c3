"""`BackgroundTasks` announces each finished task once: `on_finished` right after it ends,
`take_completions` for the model's reminder unless it already saw the end (wait/output)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentd.core.task_notice import TaskEnd, TaskKind
from agentd.tools.shell.background import BackgroundTasks


@pytest.fixture
async def bg() -> AsyncIterator[tuple[BackgroundTasks, list[str]]]:
    seen: list[str] = []
    tasks = BackgroundTasks(on_finished=seen.append)
    try:
        yield tasks, seen
    finally:
        await tasks.close()


@pytest.mark.parametrize(
    ("command", "end", "rc"),
    [
        pytest.param("true", TaskEnd.COMPLETED, 0, id="exit-0"),
        pytest.param("exit 4", TaskEnd.FAILED, 4, id="exit-4"),
        pytest.param("kill -TERM $$", TaskEnd.KILLED, -15, id="signal"),
    ],
)
async def test_completion_of_a_finished_task(
    bg: tuple[BackgroundTasks, list[str]], tmp_path: Path, command: str, end: TaskEnd, rc: int
) -> None:
    tasks, seen = bg
    task_id = tasks.start(command, tmp_path)
    assert tasks.take_completions() == []  # still running (or not even spawned)
    await tasks.wait(task_id, 30, None)
    tasks._tasks[task_id].reported = False  # as if nobody had waited
    c = tasks.completion(task_id)
    assert (c.task_id, c.task_kind, c.summary, c.end, c.exit_code) == (
        task_id,
        TaskKind.BASH,
        command,
        end,
        rc,
    )
    assert c.status == tasks.status(task_id)
    assert c.read_with == f'task_output (task_id "{task_id}")'
    assert seen == [task_id]


async def test_each_finished_task_is_taken_once(
    bg: tuple[BackgroundTasks, list[str]], tmp_path: Path
) -> None:
    tasks, seen = bg
    first = tasks.start("exit 1", tmp_path)
    second = tasks.start("true", tmp_path)
    finished = asyncio.gather(*(tasks._tasks[t].finished for t in (first, second)))
    await finished
    assert [c.task_id for c in tasks.take_completions()] == [first, second]
    assert tasks.take_completions() == []
    # Announced: a wait for any task does not hand it out again either.
    assert (await tasks.wait(None, 0, None)).reason == "idle"
    assert sorted(seen) == sorted([first, second])


async def test_a_task_the_model_saw_is_not_announced(
    bg: tuple[BackgroundTasks, list[str]], tmp_path: Path
) -> None:
    tasks, seen = bg
    waited = tasks.start("echo a", tmp_path)
    read = tasks.start("echo b", tmp_path)
    assert (await tasks.wait(waited, 30, None)).reason == "done"
    await tasks._tasks[read].finished
    tasks.output(read)  # task_output on a finished task
    assert tasks.take_completions() == []
    assert sorted(seen) == sorted([waited, read])


async def test_killed_task_is_reported_once(bg: tuple[BackgroundTasks, list[str]], tmp_path: Path) -> None:
    tasks, seen = bg
    blocked = tasks.start("exec sleep 1000", tmp_path)  # ends only by the kill
    assert tasks.kill(blocked)
    await tasks._tasks[blocked].finished
    assert not tasks.kill(blocked)  # already finished: nothing more to report
    assert seen == [blocked]
    [c] = tasks.take_completions()
    assert (c.task_id, c.end) == (blocked, TaskEnd.KILLED)
