"""A quick yes for tool arguments that are plainly valid (issue 32): most tools' schemas are
a flat object of strings, integers, numbers and booleans with a few bounds, and most calls
satisfy them. For such a schema a compiled check answers "valid" in one call, where
jsonschema's validator walks its keywords in some forty. Anything else — a keyword outside
that subset, a value the check is unsure of (a float where an integer is wanted, an enum of
non-strings), or any failure — goes to jsonschema, which gives the verdict and the error.
So the check never says "invalid" itself, and says "valid" only where jsonschema must agree.

`AGENTD_TOOL_ARGS_CHECK=jsonschema` turns it off (every call through jsonschema).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

LIBRARY_ONLY = os.environ.get("AGENTD_TOOL_ARGS_CHECK", "").strip().lower() == "jsonschema"

Check = Callable[[Mapping[str, Any]], bool]

_TOP_KEYS = frozenset({"type", "properties", "required", "additionalProperties", "description"})
_PROPERTY_KEYS = frozenset({"type", "description", "minimum", "maximum", "minLength", "maxLength", "enum"})
_SCALARS = frozenset({"string", "integer", "number", "boolean"})

# (name, type, minimum, maximum, minLength, maxLength, enum) per property
_Rule = tuple[str, str, float | None, float | None, int | None, int | None, frozenset[str] | None]


def compile_check(schema: Mapping[str, Any]) -> Check | None:
    """A check for `schema` that answers True only for arguments jsonschema finds valid, or
    None when the schema is outside the subset it understands."""
    if LIBRARY_ONLY or schema.get("type") != "object" or not _TOP_KEYS.issuperset(schema):
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    additional = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list) or not isinstance(additional, bool):
        return None
    if not all(isinstance(name, str) for name in required):
        return None
    rules: list[_Rule] = []
    for name, spec in properties.items():
        rule = _rule(name, spec)
        if rule is None:
            return None
        rules.append(rule)
    return _make_check(tuple(rules), tuple(required), frozenset(properties), additional)


def _rule(name: str, spec: Any) -> _Rule | None:
    if not isinstance(spec, dict) or not _PROPERTY_KEYS.issuperset(spec) or spec.get("type") not in _SCALARS:
        return None
    kind: str = spec["type"]
    bounds = [spec.get(k) for k in ("minimum", "maximum")]
    lengths = [spec.get(k) for k in ("minLength", "maxLength")]
    if any(b is not None and (isinstance(b, bool) or not isinstance(b, int | float)) for b in bounds):
        return None
    if any(n is not None and (isinstance(n, bool) or not isinstance(n, int)) for n in lengths):
        return None
    enum = spec.get("enum")
    if enum is not None:
        if kind != "string" or not isinstance(enum, list) or not all(isinstance(v, str) for v in enum):
            return None
        enum = frozenset(enum)
    return (name, kind, bounds[0], bounds[1], lengths[0], lengths[1], enum)


def _make_check(
    rules: tuple[_Rule, ...], required: tuple[str, ...], known: frozenset[str], additional: bool
) -> Check:
    def check(args: Mapping[str, Any]) -> bool:
        for name in required:
            if name not in args:
                return False
        if not additional and not known.issuperset(args):
            return False
        for name, kind, low, high, shortest, longest, enum in rules:
            if name not in args:
                continue
            value = args[name]
            if kind == "string":
                if type(value) is not str:
                    return False
                if shortest is not None and len(value) < shortest:
                    return False
                if longest is not None and len(value) > longest:
                    return False
                if enum is not None and value not in enum:
                    return False
                continue
            if kind == "boolean":
                if type(value) is not bool:
                    return False
                continue
            # integer: an int only (jsonschema also takes 2.0; that case goes to it); number:
            # an int or a float — never a bool, which JSON Schema does not count as a number
            if type(value) is not int and (kind == "integer" or type(value) is not float):
                return False
            if low is not None and value < low:
                return False
            if high is not None and value > high:
                return False
        return True

    return check
