"""Waking an idle session when a background task finishes (agentd/session/wake.py): the
pure decision and the streak that caps wake turns in a row."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from agentd.core import TaskCompletion
from agentd.core.task_notice import TaskEnd, TaskKind
from agentd.loop.subagents import Subagents
from agentd.loop.turn import run_turn
from agentd.session.commands import PromptSource
from agentd.session.wake import WakeDecision, WakeState, WakeStreak, decide_wake, should_wake, wake_state
from agentd.tools.shell.background import BackgroundTasks

IDLE_WITH_NEWS = WakeState(
    enabled=True, turn_running=False, queued=0, stopping=False, news=1, streak=0, cap=3, paused=False
)


def test_an_idle_session_with_news_wakes() -> None:
    assert decide_wake(IDLE_WITH_NEWS) is WakeDecision.WAKE
    assert should_wake(IDLE_WITH_NEWS)


@pytest.mark.parametrize(
    ("change", "decision"),
    [
        pytest.param({"enabled": False}, WakeDecision.OFF, id="setting-off"),
        pytest.param({"turn_running": True}, WakeDecision.BUSY, id="turn-running"),
        pytest.param({"queued": 1}, WakeDecision.BUSY, id="prompt-waiting"),  # held ones too
        pytest.param({"stopping": True}, WakeDecision.BUSY, id="stopping"),
        pytest.param({"news": 0}, WakeDecision.NOTHING, id="no-news"),
        pytest.param({"paused": True}, WakeDecision.PAUSED, id="after-cancel"),
        pytest.param({"streak": 3}, WakeDecision.CAPPED, id="at-cap"),
        pytest.param({"streak": 2}, WakeDecision.WAKE, id="below-cap"),
        pytest.param({"cap": 0}, WakeDecision.CAPPED, id="cap-zero"),
    ],
)
def test_what_keeps_a_session_from_waking(change: dict[str, object], decision: WakeDecision) -> None:
    state = dataclasses.replace(IDLE_WITH_NEWS, **change)  # type: ignore[arg-type]
    assert decide_wake(state) is decision
    assert should_wake(state) is (decision is WakeDecision.WAKE)


def test_off_wins_over_everything_and_busy_over_the_cap() -> None:
    everything = dataclasses.replace(IDLE_WITH_NEWS, enabled=False, turn_running=True, streak=9, paused=True)
    assert decide_wake(everything) is WakeDecision.OFF
    # A running turn carries the news itself: not a capped wake, no notice.
    assert decide_wake(dataclasses.replace(IDLE_WITH_NEWS, turn_running=True, streak=9)) is WakeDecision.BUSY


def test_the_streak_counts_wake_turns_and_a_user_turn_resets_it() -> None:
    streak = WakeStreak()
    streak.turn_started(PromptSource.TASK_NOTIFICATION)
    streak.turn_started(PromptSource.TASK_NOTIFICATION)
    assert streak.count == 2
    streak.paused, streak.told_capped = True, True
    streak.turn_started(PromptSource.USER)
    assert (streak.count, streak.paused, streak.told_capped) == (0, False, False)


async def test_the_news_counts_tasks_that_ended_on_their_own_and_none_without_tasks() -> None:
    """`wake_state` reads the session's unseen ends: none at all (most sessions), then an
    earlier life's lost task (not news: it did not end by itself) and one that completed."""
    background = BackgroundTasks()
    host = SimpleNamespace(
        services=SimpleNamespace(settings=SimpleNamespace(wake_on_task_finish=True, wake_max_consecutive=3)),
        background=background,
        loop_state=SimpleNamespace(subagents=Subagents(agents={}, run_turn=run_turn)),
        running=None,
        queue=[],
        stop_state=SimpleNamespace(stopping=False),
        wake=WakeStreak(),
    )
    assert wake_state(host).news == 0  # type: ignore[arg-type]
    lost = TaskCompletion("bg-1", TaskKind.BASH, "make", TaskEnd.INTERRUPTED, "lost", None, "task_output")
    background.earlier.add(lost, announce=True)
    assert wake_state(host).news == 0  # type: ignore[arg-type]
    done = TaskCompletion("bg-2", TaskKind.BASH, "make", TaskEnd.COMPLETED, "done", 0, "task_output")
    background.earlier.add(done, announce=True)
    state = wake_state(host)  # type: ignore[arg-type]
    assert state.news == 1 and decide_wake(state) is WakeDecision.WAKE
