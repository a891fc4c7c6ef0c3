"""One tool call on its way through a round (`Slot`: the call, its tool and arguments once
parsed, whether it was approved, its result), and how its arguments are parsed and checked
against the tool's JSON schema (`parse_call`, `argument_error`)."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import jsonschema

from agentd.core import ToolCall
from agentd.loop.context import TurnContext
from agentd.loop.react.argcheck import Check, compile_check
from agentd.tools import Tool, ToolResult


@dataclass
class Slot:
    call: ToolCall
    tool: Tool | None = None
    args: dict[str, Any] | None = None
    approved: bool = False
    result: ToolResult | None = None
    crashed: bool = False


def parse_call(ctx: TurnContext, slot: Slot) -> None:
    """Resolve the tool and arguments; a problem becomes the call's (error) result."""
    tool = ctx.tools.get(slot.call.name)
    if tool is None:
        known = ", ".join(sorted(ctx.tools))
        slot.result = ToolResult(f"Unknown tool {slot.call.name!r}. Available tools: {known}.", is_error=True)
        return
    slot.tool = tool
    try:
        args = json.loads(slot.call.arguments or "{}")
    except json.JSONDecodeError as exc:
        slot.result = ToolResult(f"Arguments are not valid JSON ({exc.msg} at {exc.pos}).", is_error=True)
        return
    if not isinstance(args, dict):
        slot.result = ToolResult("Arguments must be a JSON object.", is_error=True)
        return
    error = argument_error(args, tool.parameters)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "arguments"
        slot.result = ToolResult(
            f"Invalid arguments for {tool.name} ({where}): {error.message}", is_error=True
        )
        return
    slot.args = args


def argument_error(args: dict[str, Any], schema: dict[str, Any]) -> jsonschema.ValidationError | None:
    """The error `jsonschema.validate(args, schema)` would raise (its best match), or None.
    `validate` checks the schema against its metaschema and builds a validator on every
    call — ~2 ms per tool call; the checked validator is kept per schema instead (keyed by
    its JSON text, so a tool whose schema changes gets a new one). An invalid schema still
    raises `SchemaError`, every time."""
    import jsonschema  # loaded at the first tool call, not at start-up (idle memory)

    try:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not JSON-serialisable (no tool's schema is): the uncached way
        try:
            jsonschema.validate(args, schema)
        except jsonschema.ValidationError as exc:
            return exc
        return None
    validator, quick = _validator(key)
    if quick is not None and quick(args):
        return None  # plainly valid (`argcheck`): jsonschema would find nothing either
    error: jsonschema.ValidationError | None = jsonschema.exceptions.best_match(validator.iter_errors(args))
    return error


@functools.lru_cache(maxsize=256)
def _validator(schema_json: bytes) -> tuple[Any, Check | None]:
    """The checked validator of a schema, and its quick check when it has one."""
    import jsonschema

    schema = orjson.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema), compile_check(schema)
