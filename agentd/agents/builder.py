"""`AgentBuilder`: collects a definition piece by piece, then validates all of it at once.

It separates *collecting* from *validating*: the setters accept anything and check nothing;
`build()` sees everything at once (including the tool and model registries that exist only
then) and reports every problem in one `AgentDefinitionError`.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any, TypeGuard

from agentd.agents.definition import (
    NAME_PATTERN,
    NAME_RE,
    AgentDefinition,
    AgentDefinitionError,
    Problem,
)
from agentd.core.completion import CompletionRequirement
from agentd.loop.structured import STRUCTURED_OUTPUT_TOOL

_UNSET: Any = object()


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


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
        self._name: Any = _UNSET
        self._description: Any = ""
        self._system_prompt: Any = ""
        self._tools: tuple[Any, ...] | None = None
        self._model: Any = None
        self._max_turns: Any = None
        self._completion: dict[str, Any] | None = None
        self._output_schema: Any = None
        # Loader support: problems found before the builder (unknown keys, bad JSON) and the
        # front-matter line of each key, so build() can point at the line.
        self._pending: list[Problem] = []
        self._lines: dict[str, int] = {}

    # fluent setters: collect only

    def name(self, name: str) -> AgentBuilder:
        self._name = name
        return self

    def description(self, text: str) -> AgentBuilder:
        self._description = text
        return self

    def system_prompt(self, text: str) -> AgentBuilder:
        self._system_prompt = text
        return self

    def tools(self, *names: str) -> AgentBuilder:
        """The tool allow-list (order kept, duplicates dropped). Never called → all built-in
        tools; called with no names → no tools."""
        self._tools = tuple(dict.fromkeys(names)) if all(isinstance(n, str) for n in names) else names
        return self

    def model(self, model: str | None) -> AgentBuilder:
        self._model = model
        return self

    def max_turns(self, max_turns: int | None) -> AgentBuilder:
        self._max_turns = max_turns
        return self

    def completion(
        self,
        tool: str,
        *,
        max_retries: int = CompletionRequirement.max_retries,
        base_delay_ms: int = CompletionRequirement.base_delay_ms,
        max_delay_ms: int = CompletionRequirement.max_delay_ms,
    ) -> AgentBuilder:
        self._completion = {
            "tool": tool,
            "max_retries": max_retries,
            "base_delay_ms": base_delay_ms,
            "max_delay_ms": max_delay_ms,
        }
        return self

    def output_schema(self, schema: dict[str, Any] | None) -> AgentBuilder:
        self._output_schema = schema
        return self

    def _problem(self, field_: str, message: str, line: int | None = None) -> None:
        self._pending.append(Problem(field_, message, line))

    # validation

    def build(self, *, known_tools: Collection[str], known_models: Collection[str] | None) -> AgentDefinition:
        """Validate everything and return the definition, or raise one `AgentDefinitionError`
        listing every problem. `known_models=None` skips the model check."""
        problems = list(self._pending)

        def bad(field_: str, message: str) -> None:
            line = self._lines.get(field_, self._lines.get(field_.split(".")[0]))
            problems.append(Problem(field_, message, line))

        known_tools = set(known_tools)

        # name
        name = self._name
        if name is _UNSET or name is None:
            bad("name", "required")
        elif not isinstance(name, str) or not NAME_RE.fullmatch(name):
            bad(
                "name",
                f"must match {NAME_PATTERN} (lowercase letters, digits, '_' and '-', at most 64 "
                f"characters, starting with a letter or digit), got {name!r}",
            )

        for field_, value in (("description", self._description), ("system_prompt", self._system_prompt)):
            if not isinstance(value, str):
                bad(field_, f"must be a string, got {type(value).__name__}")

        # output schema (first: other checks depend on whether there is a usable one)
        schema = self._output_schema
        has_schema = schema is not None
        if schema is not None:
            if not isinstance(schema, dict):
                bad("output_schema", f"must be a JSON object (a dict), got {type(schema).__name__}")
            else:
                import jsonschema  # only for a definition with a schema (idle memory)

                try:
                    jsonschema.Draft202012Validator.check_schema(schema)
                except jsonschema.SchemaError as exc:
                    at = "/".join(str(p) for p in exc.absolute_path)
                    where = f" at {at!r}" if at else ""
                    bad("output_schema", f"not a valid JSON Schema{where}: {exc.message}")
                if schema.get("type") != "object":
                    bad("output_schema", f'must have "type": "object", got "type": {schema.get("type")!r}')

        # tools
        tools = self._tools
        if tools is not None:
            non_str = [t for t in tools if not isinstance(t, str) or not t]
            if non_str:
                bad("tools", f"tool names must be non-empty strings, got {non_str!r}")
            names = [t for t in tools if isinstance(t, str) and t]
            unknown = [t for t in names if t not in known_tools and t != STRUCTURED_OUTPUT_TOOL]
            if unknown:
                listed = ", ".join(repr(t) for t in unknown)
                bad(
                    "tools",
                    f"unknown tool{'s' if len(unknown) > 1 else ''} {listed}; known tools: "
                    f"{join_names(known_tools)}"
                    + (f" (and {STRUCTURED_OUTPUT_TOOL} with an output_schema)" if not has_schema else ""),
                )
            if STRUCTURED_OUTPUT_TOOL in names and not has_schema:
                bad("tools", f"{STRUCTURED_OUTPUT_TOOL!r} is only allowed together with an output_schema")

        # model
        model = self._model
        if model is not None:
            if not isinstance(model, str) or not model:
                bad("model", f"must be a non-empty string, got {model!r}")
            elif known_models is not None and model not in known_models:
                bad("model", f"unknown model {model!r}; known models: {join_names(known_models)}")

        # max_turns
        max_turns = self._max_turns
        if max_turns is not None and (not _is_int(max_turns) or max_turns < 1):
            bad("max_turns", f"must be an integer >= 1, got {max_turns!r}")

        # completion requirement
        completion = self._completion
        if completion is not None:
            tool = completion.get("tool")
            if not isinstance(tool, str) or not tool:
                bad("completion.tool", f"must be a non-empty tool name, got {tool!r}")
            elif tool == STRUCTURED_OUTPUT_TOOL:
                if not has_schema:
                    bad("completion.tool", f"{STRUCTURED_OUTPUT_TOOL!r} requires an output_schema")
            elif tools is None:
                if tool not in known_tools:
                    bad(
                        "completion.tool",
                        f"{tool!r} is not a known tool; known tools: {join_names(known_tools)}",
                    )
            elif tool not in tools:
                allowed = ", ".join(t for t in tools if isinstance(t, str))
                where = f"the agent's tools ({allowed})" if allowed else "the agent's tools (it has none)"
                bad("completion.tool", f"{tool!r} is not among {where}")
            numbers_ok = True
            for key in ("max_retries", "base_delay_ms", "max_delay_ms"):
                value = completion.get(key)
                if not _is_int(value) or value < 1:
                    bad(f"completion.{key}", f"must be a positive integer, got {value!r}")
                    numbers_ok = False
            if numbers_ok and completion["base_delay_ms"] > completion["max_delay_ms"]:
                bad(
                    "completion.base_delay_ms",
                    f"must not exceed completion.max_delay_ms "
                    f"({completion['base_delay_ms']} > {completion['max_delay_ms']})",
                )

        if problems:
            agent = name if isinstance(name, str) and name else None
            raise AgentDefinitionError(problems, agent=agent, source=self._source)

        return AgentDefinition(
            name=name,
            description=self._description,
            system_prompt=self._system_prompt,
            tools=tuple(tools) if tools is not None else None,
            model=model,
            max_turns=max_turns,
            completion=CompletionRequirement(**completion) if completion is not None else None,
            output_schema=copy.deepcopy(schema),
            source=self._source,
        )
