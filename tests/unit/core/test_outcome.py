"""Turn-end reasons are enums whose values are the wire strings; `local_command:<name>` is a
small value type. Parsing every wire string gives back the typed reason."""

from __future__ import annotations

import dataclasses
import json

import orjson
import pytest

from agentd.core import (
    BudgetStopKind,
    DegenerationReason,
    EndReason,
    LocalCommandReason,
    OutcomeKind,
    Reason,
    StationarityReason,
    TurnOutcome,
    parse_reason,
)
from agentd.core.errors import ErrorKind, HarnessError

ALL_ENUM_REASONS: list[Reason] = [
    *EndReason,
    *ErrorKind,
    *BudgetStopKind,
    *StationarityReason,
    *DegenerationReason,
]


def test_no_wire_string_belongs_to_two_reasons() -> None:
    values = [r.value for r in ALL_ENUM_REASONS if not isinstance(r, LocalCommandReason)]
    assert len(values) == len(set(values))


@pytest.mark.parametrize("reason", ALL_ENUM_REASONS, ids=str)
def test_parse_reason_round_trips(reason: Reason) -> None:
    assert parse_reason(str(reason)) is reason


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("user_cancelled", EndReason.USER_CANCELLED),
        ("server_shutdown", EndReason.SERVER_SHUTDOWN),
        ("permission_rejected", EndReason.PERMISSION_REJECTED),
        ("max_iterations", BudgetStopKind.MAX_ITERATIONS),
        ("identical_steps", StationarityReason.IDENTICAL_STEPS),
        ("tool_execution", ErrorKind.TOOL_EXECUTION),
    ],
)
def test_strings_passed_to_turn_outcome_become_enums(wire: str, expected: Reason) -> None:
    outcome = TurnOutcome(OutcomeKind.CANCELLED, reason=wire)
    assert outcome.reason is expected
    assert outcome.wire_reason == wire


@pytest.mark.parametrize("wire", ["local_command:compact", "local_command:", "local_command:a:b"])
def test_local_command_keeps_its_wire_string(wire: str) -> None:
    outcome = TurnOutcome(OutcomeKind.COMPLETED, reason=wire)
    assert isinstance(outcome.reason, LocalCommandReason)
    assert outcome.reason.code is EndReason.LOCAL_COMMAND
    assert outcome.reason.command == wire.removeprefix("local_command:")
    assert outcome.wire_reason == wire
    # it serialises as the plain string, with both JSON encoders the server uses
    assert orjson.loads(orjson.dumps({"reason": outcome.reason})) == {"reason": wire}
    assert json.loads(json.dumps({"reason": outcome.reason})) == {"reason": wire}


def test_local_command_constructor() -> None:
    outcome = TurnOutcome.local_command("help")
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.wire_reason == "local_command:help"


def test_unknown_reason_is_refused_but_a_stored_one_is_tolerated() -> None:
    with pytest.raises(ValueError):
        parse_reason("because")
    with pytest.raises(ValueError):
        TurnOutcome(OutcomeKind.CANCELLED, reason="because")
    replayed = TurnOutcome.from_event({"outcome": "cancelled", "reason": "because"})
    assert replayed.reason is None


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (
            {"outcome": "cancelled", "reason": "user_cancelled", "stopReason": "cancelled"},
            EndReason.USER_CANCELLED,
        ),
        ({"outcome": "completed", "reason": "local_command:model"}, LocalCommandReason("model")),
        (
            {
                "outcome": "failed",
                "reason": "rate_limited",
                "error": {"kind": "rate_limited", "message": "slow"},
            },
            ErrorKind.RATE_LIMITED,
        ),
        ({"outcome": "completed"}, None),
    ],
)
def test_from_event_types_the_reason(payload: dict[str, object], reason: Reason | None) -> None:
    outcome = TurnOutcome.from_event(payload)
    assert outcome.reason == reason
    assert outcome.wire_reason == payload.get("reason")


def test_failed_carries_the_error_kind() -> None:
    outcome = TurnOutcome.failed(HarnessError(ErrorKind.NETWORK, "down"))
    assert outcome.reason is ErrorKind.NETWORK


def test_with_turn_is_replace_for_every_field() -> None:
    """`with_turn` (written out, once per turn) is `dataclasses.replace(outcome, turn=...)`:
    every field but `turn` carried over — a field added to TurnOutcome and not to it fails."""
    rich = TurnOutcome(
        OutcomeKind.FAILED,
        reason=EndReason.USER_CANCELLED,
        refusal=True,
        max_tokens=True,
        tools_called=3,
        error=HarnessError(ErrorKind.INTERNAL, "x"),
        turn={"old": 1},
        structured_output={"value": 2},
    )
    for outcome in (rich, TurnOutcome.completed(tools_called=0)):
        summary = {"iterations": 1}
        made = outcome.with_turn(summary)
        assert made == dataclasses.replace(outcome, turn=summary)
        assert made.turn is summary
        for f in dataclasses.fields(TurnOutcome):
            if f.name != "turn":
                assert getattr(made, f.name) is getattr(outcome, f.name), f.name
