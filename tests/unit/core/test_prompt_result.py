"""A prompt's answer comes from one function over its turn's end (issue 27 item 4): the
direct answer (the session's `PromptDone`) and the one rebuilt from a stored `turn_ended`
event render the same result."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

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
from agentd.session.commands import Prompt, PromptDone
from agentd.session.eventlog.journal import turn_ended
from agentd.session.prompt_answer import ended_turn
from agentd.session.queue import QueuedPrompt
from agentd.session.turn_launch import answer_turn


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


def test_the_logged_turn_end_is_the_answer_and_renders_as_one_made_alike() -> None:
    """The session answers from the `turn_ended` update its journal logged (no second one
    made per prompt); its session usage and request id are not part of any answer."""
    outcome = TurnOutcome(OutcomeKind.COMPLETED, turn={"usage": {"calls": 2}})
    logged = turn_ended("turn_3", "p3", outcome, "r3", {"calls": 40}, "digest")
    direct = ended_turn(PromptDone("p3", "turn_3", outcome, logged))
    assert direct is logged
    made = ended_turn(PromptDone("p3", "turn_3", outcome))
    assert made is not logged
    assert prompt_result(direct) == prompt_result(made)
    assert enqueue_result(direct) == enqueue_result(made)
    failed = TurnOutcome.failed(HarnessError(ErrorKind.NETWORK, "down"))
    logged_failure = turn_ended("turn_4", "p4", failed, None, {})
    assert prompt_failure(ended_turn(PromptDone("p4", "turn_4", failed, logged_failure))) == prompt_failure(
        ended_turn(PromptDone("p4", "turn_4", failed))
    )


async def test_a_turns_answer_carries_its_logged_end_only_once_it_recorded_one() -> None:
    loop = asyncio.get_running_loop()

    def turn(outcome: TurnOutcome | None, ended: TurnEnded | None) -> Any:
        prompt = QueuedPrompt("p5", Prompt([], loop.create_future()))
        ctx = SimpleNamespace(take_interjections=list)
        return SimpleNamespace(id="turn_5", prompt=prompt, outcome=outcome, ended=ended, ctx=ctx)

    outcome = TurnOutcome(OutcomeKind.COMPLETED)
    logged = turn_ended("turn_5", "p5", outcome, None, {})
    recorded = turn(outcome, logged)
    answer_turn(recorded, None)
    done = recorded.prompt.command.reply.result()
    assert done.ended is logged and ended_turn(done) is logged

    # Killed before its end was recorded: answered as interrupted, never with an end of
    # another outcome.
    unrecorded = turn(None, logged)
    answer_turn(unrecorded, None)
    done = unrecorded.prompt.command.reply.result()
    assert done.ended is None and ended_turn(done).outcome == "interrupted"
