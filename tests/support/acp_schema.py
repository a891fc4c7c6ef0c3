"""Validate captured ACP frames against the pinned ACP JSON Schema (for end-to-end tests).

The schema (`tests/support/acp/schema-v1.json`, pinned in the repository, or
`$AGENTD_ACP_SCHEMA`) tags each method's
request/notification/response definition with `x-method` and `x-side` (the side that
*handles* the method). A frame is checked against the definition of its own method — never
against the top-level `anyOf`, which does not tie params to the method. The schema allows
extra properties, so `find_snake_case_keys` separately catches Python-style keys leaking
onto the wire, and `find_null_fields` catches optional fields sent as `null` instead of
being omitted.

Usage::

    v = AcpValidator.default()
    v.assert_valid_agent_frame(frame, request_methods)  # request_methods: {client id: method}
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SCHEMA_ENV = "AGENTD_ACP_SCHEMA"
SCHEMA_URI = "urn:agentd:acp-schema-v1"

# Values of these keys are free-form data (ACP extensibility and raw tool I/O): not checked.
FREE_FORM_KEYS = frozenset({"_meta", "rawInput", "rawOutput"})
JSONRPC_KEYS = frozenset({"jsonrpc", "id", "method", "params", "result", "error"})

# Where the schema gives `null` a meaning of its own (it is not just "absent"), so sending
# it is legitimate: patch semantics ("null clears"), exit status, and null request ids.
_NULL_MEANINGFUL_BY_UPDATE = {
    "session_info_update": frozenset({"title", "updatedAt"}),
    "compaction_update": frozenset({"summary", "error", "_meta"}),
}
_NULL_MEANINGFUL_KEYS = frozenset({"exitCode", "signal", "requestId"})

Side = Literal["agent", "client"]
RequestId = int | str


class AcpSchemaError(AssertionError):
    """A frame broke the ACP schema or the JSON-RPC envelope; the message lists every problem."""

    def __init__(self, frame: Any, problems: list[str]) -> None:
        self.frame = frame
        self.problems = problems
        shown = json.dumps(frame, default=str)
        if len(shown) > 2000:
            shown = shown[:2000] + "…"
        super().__init__("invalid ACP frame:\n  - " + "\n  - ".join(problems) + f"\nframe: {shown}")


def schema_path() -> Path:
    """The pinned schema: `$AGENTD_ACP_SCHEMA`, else the copy in `tests/support/acp/`."""
    override = os.environ.get(SCHEMA_ENV)
    if override:
        return Path(override)
    return Path(__file__).resolve().parent / "acp" / "schema-v1.json"


def _join(path: str, part: str | int) -> str:
    if isinstance(part, int):
        return f"{path}[{part}]"
    return f"{path}.{part}" if path else part


def find_snake_case_keys(obj: Any, path: str = "") -> list[str]:
    """Paths of keys containing `_` (e.g. `params.update.tool_call_id`).

    Allowed: keys starting with `_` (`_meta`, extension keys), and anything inside the
    free-form values of `_meta`, `rawInput` and `rawOutput`. Values are never checked
    (`"sessionUpdate": "agent_message_chunk"` is fine).
    """
    found: list[str] = []
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            here = _join(path, str(key))
            if isinstance(key, str) and "_" in key and not key.startswith("_"):
                found.append(here)
            if key not in FREE_FORM_KEYS:
                found += find_snake_case_keys(value, here)
    elif isinstance(obj, list):
        for i, item in enumerate(obj):
            found += find_snake_case_keys(item, _join(path, i))
    return found


def find_null_fields(obj: Any, path: str = "") -> list[str]:
    """Paths of keys whose value is `null`: optional fields must be omitted, not sent as null.

    Exempt are nulls the schema gives a meaning (patch "clear" semantics in
    `session_info_update`/`compaction_update`, `exitCode`/`signal`, `requestId`); the
    insides of free-form values (`_meta`, `rawInput`, `rawOutput`) are not checked.
    """
    found: list[str] = []
    if isinstance(obj, Mapping):
        update_kind = obj.get("sessionUpdate")
        meaningful = (
            _NULL_MEANINGFUL_BY_UPDATE.get(update_kind, frozenset()) if isinstance(update_kind, str) else ()
        )
        for key, value in obj.items():
            here = _join(path, str(key))
            if value is None:
                if key not in meaningful and key not in _NULL_MEANINGFUL_KEYS:
                    found.append(here)
            elif key not in FREE_FORM_KEYS:
                found += find_null_fields(value, here)
    elif isinstance(obj, list):
        for i, item in enumerate(obj):
            found += find_null_fields(item, _join(path, i))
    return found


def _where(error: ValidationError, prefix: str) -> str:
    where = prefix
    for part in error.absolute_path:
        where = _join(where, part)
    return where


def _describe(error: ValidationError, prefix: str) -> list[str]:
    """Readable lines for one schema error, pointing into the frame."""
    if not error.context:
        return [f"{_where(error, prefix)}: {error.message}"]
    # oneOf/anyOf failures only say "not valid under any of the given schemas"; the
    # per-branch errors in `context` say what is actually wrong.
    branches: dict[int | str, list[ValidationError]] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    if all(e.validator == "const" for e in error.context):
        # An enum spelled as oneOf of consts (e.g. StopReason): list the allowed values.
        allowed = [e.schema.get("const") for e in error.context]
        return [f"{_where(error, prefix)}: {error.instance!r} is not one of {allowed}"]
    # Tagged unions (SessionUpdate, ContentBlock, ...): the branches whose tag matched are
    # the ones the sender meant; report their errors rather than every branch's.
    tagged = [errs for errs in branches.values() if not any(_is_tag_error(e) for e in errs)]
    if len(tagged) == 1:
        return [line for sub in tagged[0] for line in _describe(sub, prefix)]
    if not tagged:
        tags = [e.schema.get("const") for e in error.context if _is_tag_error(e)]
        if tags:
            field = next(e for e in error.context if _is_tag_error(e)).absolute_path
            return [f"{_where(error, prefix)}: {field[-1]!s} must be one of {tags}"]
    deepest = best_match(error.context)
    return (
        _describe(deepest, prefix) if deepest is not None else [f"{_where(error, prefix)}: {error.message}"]
    )


def _is_tag_error(error: ValidationError) -> bool:
    """A failed `const` on a property (a union's tag), or a missing tag property."""
    return error.validator == "const" and len(error.relative_path) == 1


class AcpValidator:
    """Validates frames by method against the schema's `x-method`/`x-side` definitions."""

    find_snake_case_keys = staticmethod(find_snake_case_keys)
    find_null_fields = staticmethod(find_null_fields)

    def __init__(self, schema: dict[str, Any] | None = None, *, path: Path | None = None) -> None:
        if schema is None:
            source = path or schema_path()
            if not source.is_file():
                raise FileNotFoundError(f"ACP schema not found at {source} (set {SCHEMA_ENV} to override)")
            schema = json.loads(source.read_text(encoding="utf-8"))
        self.schema = schema
        self.defs: dict[str, Any] = schema["$defs"]
        resource = Resource.from_contents(schema, default_specification=DRAFT202012)
        self._registry: Registry = Registry().with_resource(SCHEMA_URI, resource)
        self._validators: dict[str, Draft202012Validator] = {}
        # (method, handling side, Request|Notification|Response) → definition name.
        self._by_method: dict[tuple[str, str, str], str] = {}
        for name, definition in self.defs.items():
            method, side = definition.get("x-method"), definition.get("x-side")
            if not (method and side):
                continue
            for kind in ("Request", "Notification", "Response"):
                if name.endswith(kind):
                    self._by_method[(method, side, kind)] = name

    @classmethod
    @functools.cache
    def default(cls) -> AcpValidator:
        """A shared instance for the pinned schema (parsing it once per test run)."""
        return cls()

    # -- schema lookups ----------------------------------------------------------------

    def validator_for(self, definition: str) -> Draft202012Validator:
        """A validator for one `$defs` entry, built on first use and cached."""
        validator = self._validators.get(definition)
        if validator is None:
            if definition not in self.defs:
                raise KeyError(f"no definition {definition!r} in the ACP schema")
            validator = Draft202012Validator(
                {"$ref": f"{SCHEMA_URI}#/$defs/{definition}"}, registry=self._registry
            )
            self._validators[definition] = validator
        return validator

    def definition_problems(self, definition: str, instance: Any, prefix: str = "") -> list[str]:
        """Every schema error of `instance` against `$defs[definition]`, as readable lines."""
        errors = sorted(self.validator_for(definition).iter_errors(instance), key=lambda e: list(e.path))
        return [line for e in errors for line in _describe(e, prefix or definition)]

    def _lookup(self, method: str, handler: Side, kind: str) -> str | None:
        return self._by_method.get((method, handler, kind)) or self._by_method.get((method, "protocol", kind))

    def _unknown_method(self, method: str, handler: Side, kind: str) -> str:
        sender: Side = "client" if handler == "agent" else "agent"
        if self._lookup(method, sender, kind):
            return f"method {method!r} is handled by the {sender}, so the {sender} must not send it"
        flipped = "Notification" if kind == "Request" else "Request"
        if self._lookup(method, handler, flipped):
            how = "without an id (a notification)" if flipped == "Notification" else "with an id (a request)"
            return f"method {method!r} must be sent {how}"
        return f"unknown ACP method {method!r} (extension methods must start with '_')"

    # -- frames ------------------------------------------------------------------------

    def frame_problems(self, frame: Any, request_methods: Mapping[Any, str], *, sender: Side) -> list[str]:
        """Schema and envelope problems of a frame sent by `sender` (empty when valid).

        `request_methods` maps the ids of requests the *other* side sent to their methods,
        so responses can be checked against the right `*Response` definition.
        """
        if not isinstance(frame, Mapping):
            return [f"frame must be a JSON object, got {type(frame).__name__}"]
        receiver: Side = "client" if sender == "agent" else "agent"
        problems: list[str] = []
        if frame.get("jsonrpc") != "2.0":
            problems.append(f'jsonrpc: must be "2.0", got {frame.get("jsonrpc")!r}')
        extra = sorted(set(frame) - JSONRPC_KEYS)
        if extra:
            problems.append(f"unexpected top-level keys {extra}")

        if "method" in frame:
            problems += self._message_problems(frame, sender=sender, receiver=receiver)
        elif "id" in frame:
            problems += self._response_problems(frame, request_methods, sender=sender)
        else:
            problems.append("frame is neither a request, a notification nor a response")
        return problems

    def _message_problems(self, frame: Mapping[str, Any], *, sender: Side, receiver: Side) -> list[str]:
        problems: list[str] = []
        method = frame["method"]
        if not isinstance(method, str) or not method:
            return [f"method: must be a non-empty string, got {method!r}"]
        if "result" in frame or "error" in frame:
            problems.append("a request/notification must not carry result or error")
        is_request = "id" in frame
        if is_request and not _is_request_id(frame["id"]):
            problems.append(f"id: must be an integer or a string, got {frame['id']!r}")
        params = frame.get("params", {})
        if "params" in frame and not isinstance(params, Mapping):
            problems.append(f"params: must be an object, got {params!r}")
            return problems
        problems += _null_problems(params, "params")
        if method.startswith("_"):  # extension method: not in the schema
            return problems
        kind = "Request" if is_request else "Notification"
        definition = self._lookup(method, receiver, kind)
        if definition is None:
            return [*problems, self._unknown_method(method, receiver, kind)]
        return problems + self.definition_problems(definition, params, "params")

    def _response_problems(
        self, frame: Mapping[str, Any], request_methods: Mapping[Any, str], *, sender: Side
    ) -> list[str]:
        problems: list[str] = []
        has_result, has_error = "result" in frame, "error" in frame
        if has_result == has_error:
            return ["a response must have exactly one of result and error"]
        frame_id = frame["id"]
        if has_error:
            # A null id is legal only here: the error answers a request whose id was unreadable.
            if frame_id is not None and not _is_request_id(frame_id):
                problems.append(f"id: must be an integer, a string or null, got {frame_id!r}")
            error = frame["error"]
            problems += _null_problems(error, "error")
            return problems + self.definition_problems("Error", error, "error")

        if not _is_request_id(frame_id):
            return [f"id: must be an integer or a string, got {frame_id!r}"]
        method = request_methods.get(frame_id)
        if method is None:
            known = sorted(map(str, request_methods))
            return [f"response id {frame_id!r} answers no known request (known ids: {known})"]
        result = frame["result"]
        if isinstance(result, Mapping):
            problems += _null_problems(result, "result")
        if method.startswith("_"):  # extension method: not in the schema
            return problems
        # The responder handles the method, so its x-side is the sender's own side.
        definition = self._lookup(method, sender, "Response")
        if definition is None:
            return [*problems, f"no response definition for method {method!r} answered by the {sender}"]
        return problems + self.definition_problems(definition, result, "result")

    def validate_agent_frame(self, frame: Any, request_methods: Mapping[Any, str]) -> None:
        """Check a frame the agent (our server) sent; `request_methods`: client request id → method."""
        problems = self.frame_problems(frame, request_methods, sender="agent")
        if problems:
            raise AcpSchemaError(frame, problems)

    def validate_client_frame(self, frame: Any, request_methods: Mapping[Any, str]) -> None:
        """Check a frame a client sent; `request_methods`: agent request id → method."""
        problems = self.frame_problems(frame, request_methods, sender="client")
        if problems:
            raise AcpSchemaError(frame, problems)

    def assert_valid_agent_frame(self, frame: Any, request_methods: Mapping[Any, str]) -> None:
        """Schema + envelope + snake_case checks for an agent frame; AssertionError lists all."""
        self._assert(frame, request_methods, sender="agent")

    def assert_valid_client_frame(self, frame: Any, request_methods: Mapping[Any, str]) -> None:
        """Schema + envelope + snake_case checks for a client frame; AssertionError lists all."""
        self._assert(frame, request_methods, sender="client")

    def _assert(self, frame: Any, request_methods: Mapping[Any, str], *, sender: Side) -> None:
        problems = self.frame_problems(frame, request_methods, sender=sender)
        problems += [f"{p}: snake_case key (ACP uses camelCase)" for p in find_snake_case_keys(frame)]
        if problems:
            raise AcpSchemaError(frame, problems)


def _null_problems(obj: Any, prefix: str) -> list[str]:
    return [
        f"{p}: null value (omit optional fields instead of sending null)"
        for p in find_null_fields(obj, prefix)
    ]


def _is_request_id(value: Any) -> bool:
    # bool is an int subclass in Python but not a valid JSON-RPC id.
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
