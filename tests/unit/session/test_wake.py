"""Waking an idle session when a background task finishes (agentd/session/wake.py): the
pure decision and the streak that caps wake turns in a row."""

from __future__ import annotations

import dataclasses

import pytest

from agentd.session.commands import PromptSource
from agentd.session.wake import WakeDecision, WakeState, WakeStreak, decide_wake, should_wake

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
