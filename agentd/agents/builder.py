"""`AgentBuilder`: collects a definition piece by piece, then validates all of it at once.

It separates *collecting* from *validating*: the setters accept anything and check nothing;
`build()` sees everything at once (including the tool and model registries that exist only
then) and reports every problem in one `AgentDefinitionError`. Each field on its own is
pydantic's (`fields.py`); the checks across fields and against the registries are here, one
small function each, run on the fields that passed.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from agentd.agents.definition import AgentDefinition, AgentDefinitionError, Problem
from agentd.agents.fields import DefinitionFields, validate_fields
from agentd.core import CompletionRequirement
from agentd.loop import STRUCTURED_OUTPUT_TOOL


def join_names(values: Iterable[str]) -> str:
    """Sorted and comma-separated, for messages that list what is known."""
    return ", ".join(sorted(values)) or "(none)"


class AgentBuilder:
    """Collects a definition piece by piece; `build()` validates all of it at once.

    The setters store whatever they are given (wrong types included) and never raise, so a
    definition can be assembled from several places — a file, overrides, defaults — before
    anything is judged. `build()` needs the registries, which only exist at that point.
    """

    def __init__(self, *, source: str | Path | None = None) -> None:
        self._source = str(source) if source is not None else None
        self._values: dict[str, Any] = {}
        self._notes: list[str] = []
        # Loader support: problems found before the builder (unknown keys, bad JSON) and the
        # file's line of each key, so build() can point at the line.
        self._pending: list[Problem] = []
        self._lines: dict[str, int] = {}

    # fluent setters: collect only

    def name(self, name: str) -> AgentBuilder:
        return self._set("name", name)

    def description(self, text: str) -> AgentBuilder:
        return self._set("description", text)

    def system_prompt(self, text: str) -> AgentBuilder:
        return self._set("system_prompt", text)

    def tools(self, *names: str) -> AgentBuilder:
        """The tool allow-list (order kept, duplicates dropped). Never called → all built-in
        tools; called with no names → no tools."""
        return self._set("tools", _dedupe(names))

    def denied_tools(self, *names: str) -> AgentBuilder:
        """Tools (names or `fnmatch` patterns) taken out of the allow-list, or out of all."""
        return self._set("denied_tools", _dedupe(names))

    def model(self, model: str | None) -> AgentBuilder:
        return self._set("model", model)

    def max_turns(self, max_turns: int | None) -> AgentBuilder:
        return self._set("max_turns", max_turns)

    def completion(
        self,
        tool: str,
        *,
        max_retries: int = CompletionRequirement.max_retries,
        base_delay_ms: int = CompletionRequirement.base_delay_ms,
        max_delay_ms: int = CompletionRequirement.max_delay_ms,
    ) -> AgentBuilder:
        return self._set(
            "completion",
            {
                "tool": tool,
                "max_retries": max_retries,
                "base_delay_ms": base_delay_ms,
                "max_delay_ms": max_delay_ms,
            },
        )

    def output_schema(self, schema: dict[str, Any] | None) -> AgentBuilder:
        return self._set("output_schema", schema)

    def note(self, text: str) -> AgentBuilder:
        """Something the source said that the definition does not use (kept for the log)."""
        self._notes.append(text)
        return self

    def problem(self, field_: str, message: str, line: int | None = None) -> AgentBuilder:
        """A problem found while collecting (by a loader); `build()` reports it with the rest."""
        self._pending.append(Problem(field_, message, line))
        return self

    def lines(self, lines: Mapping[str, int]) -> AgentBuilder:
        """The source line of each field (`completion.tool` style for nested ones)."""
        self._lines.update(lines)
        return self

    def _set(self, key: str, value: Any) -> AgentBuilder:
        self._values[key] = value
        return self

    # validation

    def build(self, *, known_tools: Collection[str], known_models: Collection[str] | None) -> AgentDefinition:
        """Validate everything and return the definition, or raise one `AgentDefinitionError`
        listing every problem. `known_models=None` skips the model check."""
        values = {k: v for k, v in self._values.items() if v is not None}
        fields, invalid = validate_fields(values)
        failed = {p.field for p in invalid}
        checks = Checks(values, failed, frozenset(known_tools), known_models)
        problems = [*self._pending, *(self._located(p) for p in (*invalid, *checks.run()))]
        if problems or fields is None:
            name = values.get("name")
            agent = name if isinstance(name, str) and name else None
            raise AgentDefinitionError(problems, agent=agent, source=self._source)
        return _definition(fields, self._source, tuple(self._notes))

    def _located(self, problem: Problem) -> Problem:
        if problem.line is not None:
            return problem
        line = self._lines.get(problem.field, self._lines.get(problem.field.split(".")[0]))
        return problem._replace(line=line)


def _dedupe(names: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(names)) if all(isinstance(n, str) for n in names) else names


def _definition(fields: DefinitionFields, source: str | None, notes: tuple[str, ...]) -> AgentDefinition:
    completion = fields.completion
    return AgentDefinition(
        name=fields.name,
        description=fields.description,
        system_prompt=fields.system_prompt,
        tools=fields.tools,
        model=fields.model,
        max_turns=fields.max_turns,
        completion=CompletionRequirement(**completion.model_dump()) if completion is not None else None,
        output_schema=copy.deepcopy(fields.output_schema),
        source=source,
        denied_tools=fields.denied_tools,
        notes=notes,
    )


class Checks:
    """What no single field shows: the registries, the JSON Schema, fields against each other.
    Each check looks only at fields that passed their own validation (`failed` lists the rest),
    so one mistake is reported once."""

    def __init__(
        self,
        values: Mapping[str, Any],
        failed: Collection[str],
        known_tools: frozenset[str],
        known_models: Collection[str] | None,
    ) -> None:
        self.values = values
        self.failed = failed
        self.known_tools = known_tools
        self.known_models = known_models
        # Whether there is a schema at all, valid or not: its own problems are reported once.
        self.has_schema = values.get("output_schema") is not None
        tools = values.get("tools")
        self.tools: tuple[str, ...] | None = tuple(tools) if tools is not None and self._ok("tools") else None

    def _ok(self, field_: str) -> bool:
        """Set, and valid including every part of it."""
        return field_ in self.values and not any(
            f == field_ or f.startswith(f"{field_}.") for f in self.failed
        )

    def run(self) -> list[Problem]:
        return [*self.schema(), *self.tool_names(), *self.model(), *self.completion_tool(), *self.pacing()]

    def schema(self) -> list[Problem]:
        if not self._ok("output_schema"):
            return []
        schema: dict[str, Any] = self.values["output_schema"]
        import jsonschema  # only for a definition with a schema (idle memory)

        problems = []
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as exc:
            at = "/".join(str(p) for p in exc.absolute_path)
            where = f" at {at!r}" if at else ""
            problems.append(Problem("output_schema", f"not a valid JSON Schema{where}: {exc.message}"))
        if schema.get("type") != "object":
            problems.append(
                Problem("output_schema", f'must have "type": "object", got "type": {schema.get("type")!r}')
            )
        return problems

    def tool_names(self) -> list[Problem]:
        if self.tools is None:
            return []
        problems = []
        unknown = [t for t in self.tools if t not in self.known_tools and t != STRUCTURED_OUTPUT_TOOL]
        if unknown:
            listed = ", ".join(repr(t) for t in unknown)
            also = "" if self.has_schema else f" (and {STRUCTURED_OUTPUT_TOOL} with an output_schema)"
            problems.append(
                Problem(
                    "tools",
                    f"unknown tool{'s' if len(unknown) > 1 else ''} {listed}; known tools: "
                    f"{join_names(self.known_tools)}{also}",
                )
            )
        if STRUCTURED_OUTPUT_TOOL in self.tools and not self.has_schema:
            problems.append(
                Problem("tools", f"{STRUCTURED_OUTPUT_TOOL!r} is only allowed together with an output_schema")
            )
        return problems

    def model(self) -> list[Problem]:
        model = self.values.get("model")
        if not self._ok("model") or self.known_models is None or model in self.known_models:
            return []
        return [Problem("model", f"unknown model {model!r}; known models: {join_names(self.known_models)}")]

    def completion_tool(self) -> list[Problem]:
        if "completion" not in self.values or {"completion", "completion.tool"} & set(self.failed):
            return []
        tool = self.values["completion"].get("tool")
        if tool == STRUCTURED_OUTPUT_TOOL:
            message = None if self.has_schema else f"{STRUCTURED_OUTPUT_TOOL!r} requires an output_schema"
        elif "tools" not in self.values:
            known = tool in self.known_tools
            message = (
                None
                if known
                else f"{tool!r} is not a known tool; known tools: {join_names(self.known_tools)}"
            )
        elif self.tools is not None and tool not in self.tools:
            allowed = ", ".join(self.tools)
            where = f"the agent's tools ({allowed})" if allowed else "the agent's tools (it has none)"
            message = f"{tool!r} is not among {where}"
        else:
            message = None
        return [Problem("completion.tool", message)] if message else []

    def pacing(self) -> list[Problem]:
        if not self._ok("completion"):
            return []
        base, top = self.values["completion"]["base_delay_ms"], self.values["completion"]["max_delay_ms"]
        if base <= top:
            return []
        return [
            Problem("completion.base_delay_ms", f"must not exceed completion.max_delay_ms ({base} > {top})")
        ]
