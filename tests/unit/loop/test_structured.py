"""The one structured-output decision (`judge_structured`), table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from server.loop.structured import (
    OutputSchema,
    StructuredAccepted,
    StructuredGaveUp,
    StructuredOutputLimits,
    StructuredRetry,
    StructuredVerdict,
    judge_structured,
    parse_shim_arguments,
)

SCHEMA = OutputSchema.check({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})


@pytest.mark.parametrize(
    ("value", "error", "failed_before", "max_attempts", "expected"),
    [
        ({"n": 1}, None, 0, 3, StructuredAccepted({"n": 1})),
        ({"n": 1}, None, 2, 3, StructuredAccepted({"n": 1})),
        (None, "bad", 0, 3, StructuredRetry("bad", 1)),
        (None, "bad", 1, 3, StructuredRetry("bad", 2)),
        (None, "bad", 2, 3, StructuredGaveUp("bad", 3)),
        (None, "bad", 0, 1, StructuredGaveUp("bad", 1)),
    ],
)
def test_judge_structured(
    value: Any, error: str | None, failed_before: int, max_attempts: int, expected: StructuredVerdict
) -> None:
    assert judge_structured(value, error, failed_before, StructuredOutputLimits(max_attempts)) == expected


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
