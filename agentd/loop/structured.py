"""Structured output (R-L3e): a prompt's JSON Schema for the final answer.

Providers with native schema support get it on the request. For the rest the schema
becomes the parameters of a pseudo-tool, `StructuredOutput`, which the model must call
exactly once after all real work; the call's arguments are validated with `jsonschema`
and a validation error goes back as the tool result so the model can fix it, up to
`max_retries` times (`STRUCTURED_OUTPUT_MAX_RETRIES = 3`: the first attempt plus three
retries). When the retries are used up the turn still *completes*, carrying the error: a
long task is not thrown away for a formatting slip, and the caller decides what to do.

`judge_structured` is the one decision over an attempt (accept, retry, give up), whichever
path — native JSON text or the shim call — produced the value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentd.core import ToolSpec

STRUCTURED_OUTPUT_TOOL = "StructuredOutput"


@dataclass(frozen=True)
class StructuredOutputLimits:
    # Retries after the first failed attempt (the seeds' STRUCTURED_OUTPUT_MAX_RETRIES): a
    # model gets `max_retries + 1` attempts in all before the turn completes with the error.
    max_retries: int = 3


DEFAULT_LIMITS = StructuredOutputLimits()

SHIM_REMINDER = (
    f"When all real work is done, call the `{STRUCTURED_OUTPUT_TOOL}` tool exactly once with your "
    "final answer as its arguments; they must match its schema. Do not call it together with "
    "other tools, and do not write the answer as plain text instead."
)
MISSING_CALL_TEXT = (
    f"You stopped without calling `{STRUCTURED_OUTPUT_TOOL}`. Call it now, exactly once, with your "
    "final answer as arguments matching its schema."
)
MIXED_CALL_TEXT = (
    f"Rejected: `{STRUCTURED_OUTPUT_TOOL}` must be called alone, after the other tool calls have "
    "finished. The other calls in this step were run; call it again when you are done."
)
ACCEPTED_TEXT = "Structured output accepted."


@dataclass(frozen=True)
class OutputSchema:
    """A user's schema, checked once. `error` is set when the schema itself is unusable:
    every attempt then short-circuits with that error instead of validating."""

    schema: dict[str, Any]
    error: str | None = None

    @classmethod
    def check(cls, schema: dict[str, Any]) -> OutputSchema:
        import jsonschema  # loaded by the first structured turn, not at start-up (idle memory)

        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as exc:
            return cls(schema, f"the output schema is not a valid JSON Schema: {exc.message}")
        if schema.get("type") != "object":
            return cls(schema, 'the output schema must describe an object ("type": "object")')
        return cls(schema)

    def tool_spec(self) -> ToolSpec:
        parameters = self.schema if self.error is None else {"type": "object"}
        return ToolSpec(
            STRUCTURED_OUTPUT_TOOL,
            # 000's description of the pseudo-tool, then how to call it.
            "Return your final answer as JSON matching the required schema. "
            "Call exactly once, after all real work.",
            parameters,
        )

    def validate(self, value: Any) -> str | None:
        """None when `value` is acceptable, else a readable reason."""
        if self.error is not None:
            return self.error
        import jsonschema

        errors = sorted(
            jsonschema.Draft202012Validator(self.schema).iter_errors(value), key=lambda e: list(e.path)
        )
        if not errors:
            return None
        lines = []
        for err in errors[:5]:
            where = "/".join(str(p) for p in err.absolute_path) or "(root)"
            lines.append(f"- at {where}: {err.message}")
        return "The output does not match the schema:\n" + "\n".join(lines)

    def validate_json_text(self, text: str) -> tuple[Any, str | None]:
        """Native path: the final text must be JSON matching the schema."""
        if self.error is not None:
            return None, self.error
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            return None, f"The answer is not valid JSON ({exc.msg} at position {exc.pos})."
        return value, self.validate(value)


def retry_text(
    error: str, attempt: int, limits: StructuredOutputLimits = DEFAULT_LIMITS, *, native: bool = False
) -> str:
    left = limits.max_retries + 1 - attempt  # attempts still allowed, the next one included
    if native:  # no pseudo-tool on this path: the answer itself must be the JSON
        return (
            f"{error}\nAnswer again with only JSON that matches the required schema ({left} attempt(s) left)."
        )
    return f"{error}\nFix the output and call `{STRUCTURED_OUTPUT_TOOL}` again ({left} attempt(s) left)."


# ----------------------------------------------------------------------------- the decision


@dataclass(frozen=True)
class StructuredAccepted:
    """The value matches the schema: the turn completes with it."""

    value: Any

    def output(self) -> dict[str, Any]:
        return {"value": self.value}


@dataclass(frozen=True)
class StructuredRetry:
    """The attempt failed; tell the model why and let it try again."""

    error: str
    attempts: int  # failed attempts so far, this one included


@dataclass(frozen=True)
class StructuredGaveUp:
    """The retries are used up (this failure was the last allowed attempt): the turn still
    completes, carrying the error."""

    error: str
    attempts: int

    def output(self) -> dict[str, Any]:
        return {"error": self.error}


StructuredVerdict = StructuredAccepted | StructuredRetry | StructuredGaveUp


def judge_structured(
    value: Any, error: str | None, failed_before: int, limits: StructuredOutputLimits = DEFAULT_LIMITS
) -> StructuredVerdict:
    """Accept, retry or give up on one attempt; `failed_before` failed attempts came first.
    A failure is retried while retries remain: the first failure is not a retry yet, so
    `max_retries` retries give up on failure number `max_retries + 1`."""
    if error is None:
        return StructuredAccepted(value)
    attempts = failed_before + 1
    if attempts > limits.max_retries:
        return StructuredGaveUp(error, attempts)
    return StructuredRetry(error, attempts)


def parse_shim_arguments(schema: OutputSchema, arguments: str) -> tuple[Any, str | None]:
    """Shim path: the `StructuredOutput` call's arguments, and why they are unacceptable."""
    try:
        value: Any = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        return None, f"The arguments are not valid JSON ({exc.msg} at position {exc.pos})."
    return value, schema.validate(value)
