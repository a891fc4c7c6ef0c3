"""A prompt's answer comes from one function over its turn's end (issue 27 item 4): the
direct answer (the session's `PromptDone`) and the one rebuilt from a stored `turn_ended`
event render the same result."""

from __future__ import annotations

import orjson

from agentd.core import (
    EventKind,
    OutcomeKind,
    TurnEnded,
    TurnOutcome,
    decode,
    encode,
    enqueue_result,
    prompt_failure,
    prompt_result,
)
from agentd.core.errors import ErrorKind, HarnessError
from agentd.session.commands import PromptDone
from agentd.session.eventlog.journal import turn_ended
from agentd.session.prompt_answer import ended_turn


def test_the_direct_answer_and_the_stored_turn_end_render_the_same_result() -> None:
    outcome = TurnOutcome(
        OutcomeKind.COMPLETED, refusal=True, structured_output={"a": 1}, turn={"usage": {"calls": 1}}
    )
    direct = ended_turn(PromptDone("p1", "turn_1", outcome))
    stored = decode(EventKind.TURN_ENDED, encode(turn_ended("turn_1", "p1", outcome, "r1", {"calls": 9})))
    assert isinstance(stored, TurnEnded)
    assert (
        prompt_result(direct)
        == prompt_result(stored)
        == {
            "stopReason": "refusal",
            "_meta": {
                "agentd": {
                    "promptId": "p1",
                    "outcome": "completed",
                    "turnId": "turn_1",
                    "structuredOutput": {"a": 1},
                    "usage": {"calls": 1},
                }
            },
        }
    )
    assert prompt_failure(direct) is None
    assert enqueue_result(stored) == {
        "promptId": "p1",
        "stopReason": "refusal",
        "outcome": "completed",
        "turnId": "turn_1",
    }


def test_a_failed_turn_is_answered_with_its_error() -> None:
    outcome = TurnOutcome.failed(HarnessError(ErrorKind.NETWORK, "down"))
    ended = ended_turn(PromptDone("p2", None, outcome))
    failure = prompt_failure(ended)
    assert failure is not None
    message, data = failure
    assert message == "The turn failed: down"
    assert data == {"kind": "network", "promptId": "p2", "outcome": "failed", "reason": "network"}
    assert orjson.loads(orjson.dumps(data)) == data
