"""tool_slot.argument_error: the same verdict as `jsonschema.validate`, from a validator
checked and built once per schema (issue 14: ~2 ms per tool call before)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from agentd.loop.react.slot import _validator, argument_error

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "limit": {"type": "integer", "minimum": 1},
        "opts": {"type": "object", "properties": {"mode": {"enum": ["a", "b"]}}},
    },
    "required": ["path"],
    "additionalProperties": False,
}


def validate_error(args: dict[str, Any], schema: dict[str, Any]) -> jsonschema.ValidationError | None:
    try:
        jsonschema.validate(args, schema)
    except jsonschema.ValidationError as exc:
        return exc
    return None


@pytest.mark.parametrize(
    "args",
    [
        {"path": "a"},
        {"path": "a", "limit": 3, "opts": {"mode": "b"}},
        {},
        {"path": 3},
        {"path": "a", "limit": 0},
        {"path": "a", "opts": {"mode": "c"}},
        {"path": "a", "extra": 1},
        {"limit": "x", "opts": {"mode": 1}},  # several errors: the same best match
    ],
)
def test_same_verdict_as_jsonschema_validate(args: dict[str, Any]) -> None:
    want = validate_error(args, SCHEMA)
    got = argument_error(args, SCHEMA)
    if want is None:
        assert got is None
    else:
        assert got is not None
        assert (got.message, list(got.absolute_path)) == (want.message, list(want.absolute_path))


def test_one_validator_per_schema_and_a_changed_schema_gets_its_own() -> None:
    _validator.cache_clear()
    for _ in range(3):
        argument_error({"path": "a"}, SCHEMA)
    assert _validator.cache_info().misses == 1
    stricter = {**SCHEMA, "properties": {**SCHEMA["properties"], "path": {"type": "string", "maxLength": 1}}}
    assert argument_error({"path": "ab"}, SCHEMA) is None
    err = argument_error({"path": "ab"}, stricter)
    assert err is not None and list(err.absolute_path) == ["path"]


def test_an_invalid_schema_raises_every_time() -> None:
    bad = {"type": "object", "properties": {"path": {"type": 12}}}
    for _ in range(2):
        with pytest.raises(jsonschema.SchemaError):
            argument_error({"path": "a"}, bad)
