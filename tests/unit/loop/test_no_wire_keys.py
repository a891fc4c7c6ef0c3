"""No wire key in `agentd/loop/` (issue 27 item 4): the camelCase keys clients read belong
to the typed updates' encoding (`agentd/core/updates/`) or the protocol, not to the loop.
This scans every module of the loop for camelCase string literals used as keys — dict
literal keys, subscripts, `.get` / `.pop` / `.setdefault` — and fails on any not allowed
below.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import agentd

LOOP = Path(agentd.__file__).parent / "loop"
CAMEL = re.compile(r"^_?[a-z]+(?:[A-Z][a-z0-9]*)+$")

# Not wire keys: JSON Schema's own words, in the input schemas of tools the loop defines
# (the `task` tool, the goal evaluator's structured verdict) — the model reads those.
JSON_SCHEMA = {"additionalProperties", "minLength", "maxLength"}


def wire_keys(source: str) -> set[str]:
    """The camelCase string literals `source` uses as keys."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        keys: list[ast.expr | None] = []
        if isinstance(node, ast.Dict):
            keys = list(node.keys)
        elif isinstance(node, ast.Subscript):
            keys = [node.slice]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault")
            and node.args
        ):
            keys = [node.args[0]]
        for key in keys:
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and CAMEL.match(key.value):
                found.add(key.value)
    return found


def test_the_loop_writes_no_wire_key() -> None:
    found = {}
    for path in sorted(LOOP.rglob("*.py")):
        name = path.relative_to(LOOP).as_posix()
        extra = wire_keys(path.read_text()) - JSON_SCHEMA
        if extra:
            found[name] = sorted(extra)
    assert not found, f"wire keys in agentd/loop/ (they belong to agentd/core/updates/): {found}"


def test_the_scan_sees_each_way_of_writing_a_key() -> None:
    source = 'a = {"toolCallId": 1}\nb = x["sessionUpdate"]\nc = y.get("rawInput")\nd = {"plain": 1}'
    assert wire_keys(source) == {"toolCallId", "sessionUpdate", "rawInput"}
