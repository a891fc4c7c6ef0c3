"""The status `session/list` gives a session (issue 17): from the live actor's state."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from agentd.transport.handlers.session_info import SessionStatus, status_of


def actor(turn: Any = None, pending: dict[str, Any] | None = None) -> Any:
    return SimpleNamespace(running=turn, permissions=SimpleNamespace(pending=pending or {}))


@pytest.mark.parametrize(
    ("live", "status"),
    [
        (None, SessionStatus.IDLE),  # not loaded: nothing runs
        (actor(), SessionStatus.IDLE),
        (actor(SimpleNamespace(outcome=None)), SessionStatus.RUNNING),
        # `turn_ended` is out: clients were told it ended, the actor lets go a step later.
        (actor(SimpleNamespace(outcome="end_turn")), SessionStatus.IDLE),
        (actor(SimpleNamespace(outcome=None), {"perm_1": object()}), SessionStatus.WAITING_PERMISSION),
    ],
)
def test_status_of(live: Any, status: SessionStatus) -> None:
    assert status_of(live) is status
