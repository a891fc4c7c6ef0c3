"""argcheck's quick yes (issue 32): it says "valid" only where jsonschema agrees, it does say
it for the plain calls of the built-in tools (or it would save nothing), and schemas outside
its subset go to jsonschema whole. `AGENTD_TOOL_ARGS_CHECK=jsonschema` turns it off."""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema
import pytest

from agentd.loop.react import argcheck, slot
from agentd.loop.react.argcheck import compile_check
from agentd.loop.react.slot import argument_error
from agentd.tools import builtin_tools

SCHEMAS: list[dict[str, Any]] = [
    *(tool.parameters for tool in builtin_tools().values()),
    {
        "type": "object",
        "properties": {
            "s": {"type": "string", "minLength": 2, "maxLength": 4},
            "e": {"type": "string", "enum": ["a", "b"]},
            "i": {"type": "integer", "minimum": 1, "maximum": 5},
            "n": {"type": "number", "minimum": 0.5},
            "b": {"type": "boolean"},
        },
        "required": ["s"],
        "additionalProperties": False,
    },
    {"type": "object", "properties": {"i": {"type": "integer"}}},  # extra keys allowed
    {"type": "object", "properties": {"x": {"type": "string", "pattern": "^a"}}},  # outside the subset
    {"type": "object", "properties": {"x": {"enum": [1, True]}}},
]

VALUES: list[Any] = [None, True, False, 0, 1, 3, 7, -1, 2.0, 2.5, 0.25, float("inf"), "", "a", "ab", "abcde",
                     "x" * 9, [], {}, ["a"]]  # fmt: skip


def _args_for(schema: dict[str, Any]) -> list[dict[str, Any]]:
    names = [*schema.get("properties", {}), *schema.get("required", []), "unknown"]
    out: list[dict[str, Any]] = [{}]
    for name, value in itertools.product(dict.fromkeys(names), VALUES):
        out.append({name: value})
    required = schema.get("required", [])
    pool = VALUES if len(required) <= 2 else ["ab", 3, None]  # three required: fewer tries
    for values in itertools.product(pool, repeat=len(required)):
        base = dict(zip(required, values, strict=True))
        out.append(base)
        for name, value in itertools.product(schema.get("properties", {}), VALUES[:12]):
            out.append({**base, name: value})
    return out


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: ",".join(s.get("properties", {}))[:40])
def test_a_quick_yes_is_a_yes_of_jsonschema(schema: dict[str, Any]) -> None:
    check = compile_check(schema)
    validator = jsonschema.validators.validator_for(schema)(schema)
    said_yes = 0
    for args in _args_for(schema):
        valid = validator.is_valid(args)
        if check is not None and check(args):
            assert valid, (schema, args)
            said_yes += 1
        got = argument_error(args, schema)
        assert (got is None) == valid, (schema, args)
    if check is not None:
        assert said_yes > 0  # it does answer, not only defer


def test_plain_calls_of_the_file_tools_are_answered_quickly() -> None:
    tools = builtin_tools()
    calls: dict[str, dict[str, Any]] = {
        "read_file": {"path": "a.py", "offset": 3, "limit": 10},
        "write_file": {"path": "a.py", "content": "x"},
        "list_dir": {"path": "."},
    }
    for name, args in calls.items():
        check = compile_check(tools[name].parameters)
        assert check is not None and check(args), name


def test_outside_the_subset_there_is_no_quick_check() -> None:
    assert compile_check({"type": "object", "properties": {"x": {"type": "string", "pattern": "^a"}}}) is None
    assert compile_check({"type": "object", "properties": {"x": {"type": "array"}}}) is None
    assert compile_check({"type": "object", "patternProperties": {}}) is None
    assert compile_check({"type": "object", "properties": {"x": {"enum": [1, 2]}}}) is None
    assert compile_check({"type": "array"}) is None


def test_the_switch_sends_every_call_to_jsonschema(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(argcheck, "LIBRARY_ONLY", True)
    slot._validator.cache_clear()
    try:
        schema = builtin_tools()["read_file"].parameters
        assert compile_check(schema) is None
        assert argument_error({"path": "a.py"}, schema) is None
        err = argument_error({"path": 3}, schema)
        assert err is not None and list(err.absolute_path) == ["path"]
    finally:
        slot._validator.cache_clear()  # the next test's validators get their quick checks back
