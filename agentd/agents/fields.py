"""The shape of a definition's fields, validated by pydantic, and its errors as `Problem`s.

`DefinitionFields` checks each field on its own (types, ranges, the name's pattern); what
needs the registries or several fields at once (known tools and models, the JSON Schema,
the completion tool among the agent's tools) is `builder.py`'s. A `ValidationError` becomes
one `Problem` per field, in the one-line wording the rest of the errors use (`problems`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from agentd.agents.definition import NAME_PATTERN, Problem
from agentd.core import CompletionRequirement

_Positive = Annotated[int, Field(strict=True, ge=1)]
_NonEmpty = Annotated[str, Field(strict=True, min_length=1)]


class CompletionFields(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: _NonEmpty
    max_retries: _Positive = CompletionRequirement.max_retries
    base_delay_ms: _Positive = CompletionRequirement.base_delay_ms
    max_delay_ms: _Positive = CompletionRequirement.max_delay_ms


class DefinitionFields(BaseModel):
    """Every field of an `AgentDefinition` as written, each valid on its own."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Annotated[str, Field(strict=True, pattern=NAME_PATTERN)]
    description: Annotated[str, Field(strict=True)] = ""
    system_prompt: Annotated[str, Field(strict=True)] = ""
    tools: tuple[_NonEmpty, ...] | None = None
    denied_tools: tuple[_NonEmpty, ...] = ()
    model: _NonEmpty | None = None
    max_turns: _Positive | None = None
    completion: CompletionFields | None = None
    output_schema: dict[str, Any] | None = None


# The one-line message per field, whatever pydantic found wrong with it ({value!r}: the input;
# filled by replacement: the name's pattern has braces of its own).
_MESSAGES = {
    "name": (
        f"must match {NAME_PATTERN} (lowercase letters, digits, '_' and '-', at most 64 "
        "characters, starting with a letter or digit), got {value!r}"
    ),
    "description": "must be a string, got {kind}",
    "system_prompt": "must be a string, got {kind}",
    "tools": "tool names must be non-empty strings, got {value!r}",
    "denied_tools": "tool names must be non-empty strings, got {value!r}",
    "model": "must be a non-empty string, got {value!r}",
    "max_turns": "must be an integer >= 1, got {value!r}",
    "completion": "must be a tool name or a table with tool, max_retries, base_delay_ms, max_delay_ms",
    "completion.tool": "must be a non-empty tool name, got {value!r}",
    "completion.max_retries": "must be a positive integer, got {value!r}",
    "completion.base_delay_ms": "must be a positive integer, got {value!r}",
    "completion.max_delay_ms": "must be a positive integer, got {value!r}",
    "output_schema": "must be a JSON object (a dict), got {kind}",
}


def validate_fields(values: dict[str, Any]) -> tuple[DefinitionFields | None, list[Problem]]:
    """The validated fields, or `None` and one problem per field that is wrong."""
    try:
        return DefinitionFields.model_validate(values), []
    except ValidationError as exc:
        return None, problems(exc, values)


def problems(exc: ValidationError, values: dict[str, Any]) -> list[Problem]:
    """One `Problem` per field (the first error of each), in the order pydantic found them."""
    found: dict[str, Problem] = {}
    for error in exc.errors():
        field_ = _field(error)
        if field_ not in found:
            found[field_] = Problem(field_, _message(field_, error, values))
    return list(found.values())


def _field(error: ErrorDetails) -> str:
    # ("tools", 2) → "tools" (which list item is in the message); ("completion", "tool") stays.
    return ".".join(str(part) for part in error["loc"] if isinstance(part, str))


def _message(field_: str, error: ErrorDetails, values: dict[str, Any]) -> str:
    if error["type"] == "missing":
        return "required"
    template = _MESSAGES.get(field_)
    if template is None:
        return str(error["msg"])
    value = _lookup(values, field_)
    return template.replace("{value!r}", repr(value)).replace("{kind}", type(value).__name__)


def _lookup(values: dict[str, Any], dotted: str) -> Any:
    value: Any = values
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value
