"""The one structured-output decision (`judge_structured`), table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.loop.structured import (
    OutputSchema,
    StructuredAccepted,
    StructuredGaveUp,
    StructuredOutputLimits,
    StructuredRetry,
    StructuredVerdict,
    judge_structured,
    parse_shim_arguments,
    retry_text,
)

SCHEMA = OutputSchema.check({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})


@pytest.mark.parametrize(
    ("value", "error", "failed_before", "max_retries", "expected"),
    [
        ({"n": 1}, None, 0, 3, StructuredAccepted({"n": 1})),
        ({"n": 1}, None, 3, 3, StructuredAccepted({"n": 1})),
        (None, "bad", 0, 3, StructuredRetry("bad", 1)),
        (None, "bad", 1, 3, StructuredRetry("bad", 2)),
        (None, "bad", 2, 3, StructuredRetry("bad", 3)),  # the third retry is still given
        (None, "bad", 3, 3, StructuredGaveUp("bad", 4)),  # the fourth failure gives up
        (None, "bad", 0, 1, StructuredRetry("bad", 1)),
        (None, "bad", 1, 1, StructuredGaveUp("bad", 2)),
        (None, "bad", 0, 0, StructuredGaveUp("bad", 1)),  # no retries: the first failure ends it
    ],
)
def test_judge_structured(
    value: Any, error: str | None, failed_before: int, max_retries: int, expected: StructuredVerdict
) -> None:
    assert judge_structured(value, error, failed_before, StructuredOutputLimits(max_retries)) == expected


def test_three_retries_mean_four_attempts() -> None:
    """000: "STRUCTURED_OUTPUT_MAX_RETRIES = 3 （turn.rs:10）用尽后，turn 仍以 Completed 结束" —
    three *retries* after the first attempt: the model gets four attempts in all."""
    assert StructuredOutputLimits().max_retries == 3
    failed = 0
    verdicts: list[StructuredVerdict] = []
    while not verdicts or isinstance(verdicts[-1], StructuredRetry):
        verdicts.append(judge_structured(None, "bad", failed, StructuredOutputLimits()))
        failed += 1
    assert [type(v) for v in verdicts] == [StructuredRetry] * 3 + [StructuredGaveUp]


@pytest.mark.parametrize(
    ("attempt", "left"), [(1, 3), (2, 2), (3, 1)], ids=["after-first", "after-second", "after-third"]
)
def test_retry_text_counts_the_attempts_left(attempt: int, left: int) -> None:
    assert f"({left} attempt(s) left)" in retry_text("bad", attempt)
    assert f"({left} attempt(s) left)" in retry_text("bad", attempt, native=True)


@pytest.mark.parametrize(
    ("arguments", "value", "error_part"),
    [
        ('{"n": 2}', {"n": 2}, None),
        ("", {}, "(root)"),
        ('{"n": "x"}', {"n": "x"}, "at n"),
        ("{", None, "not valid JSON"),
    ],
)
def test_parse_shim_arguments(arguments: str, value: Any, error_part: str | None) -> None:
    got_value, error = parse_shim_arguments(SCHEMA, arguments)
    assert got_value == value
    if error_part is None:
        assert error is None
    else:
        assert error is not None and error_part in error
