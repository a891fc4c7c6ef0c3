"""How a prompt ended, as its turn's `turn_ended` update says it: what the transport
renders the prompt's answer from (`agentd/core/answers.py`) without reading the
loop's outcome itself."""

from __future__ import annotations

from agentd.core import TurnEnded
from agentd.session.commands import PromptDone
from agentd.session.eventlog import turn_ended


def ended_turn(done: PromptDone) -> TurnEnded:
    """The `turn_ended` update of the prompt's turn: as logged, when the turn's end logged
    one for this outcome; else made alike (no session usage: not answered)."""
    if done.ended is not None:
        return done.ended
    return turn_ended(done.turn_id or "", done.prompt_id, done.outcome, None, {})
