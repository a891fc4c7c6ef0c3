"""Agent definitions (R-M4): the static contract of an agent, its builder and its files.

Definition vs runtime agent (seed 004). An `AgentDefinition` is *static*: a name, a
system prompt, a tool allow-list, a model, a turn cap, a completion requirement (R-L2b)
and an output schema. It holds no conversation and no runtime state, so many sessions can
share one definition without leaking anything into each other. The *runtime* agent — the
conversation, the tool context, the rendered prompt, the running turn — is the session
actor (`server.session.actor`); it is deliberately not in this module. A session picks
its definition by name (`select_agent`) when it is created and keeps a reference to it.

The definition's tool allow-list drives both tracks of the dual-track tool description:
the same subset (`AgentDefinition.select_tools`) feeds the API `tools` parameter (JSON
Schema: how to fill the arguments) and the "## Tools" section of the system prompt (prose:
when to use which tool), so the two never disagree.

`AgentBuilder` separates *collecting* from *validating*: the setters accept anything and
check nothing; `build()` sees everything at once (including the tool and model registries
that exist only then) and reports every problem in one `AgentDefinitionError`.

Definitions load from a folder of `*.toml` files and `*.md` files with a front matter
block (`load_definitions`); `default_definitions` adds the built-in `default` agent.

TOML::

    name = "reviewer"
    description = "Reviews a diff"
    model = "gpt-4o"
    tools = ["read_file", "grep"]
    max_turns = 20
    system_prompt = "You review code."
    output_schema = { type = "object", properties = { verdict = { type = "string" } } }

    [completion]
    tool = "StructuredOutput"
    max_retries = 3

Markdown (the body after the front matter is the system prompt)::

    ---
    name: explorer
    description: Read-only explorer
    tools: [read_file, grep, glob]
    max_turns: 10
    completion: StructuredOutput
    completion.max_retries: 2
    output_schema: {"type": "object", "properties": {"summary": {"type": "string"}}}
    ---
    You explore the repository and never change it.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
import tomllib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeGuard, TypeVar, cast

import jsonschema

from server.core.completion import CompletionRequirement  # re-exported from here too
from server.loop.structured import STRUCTURED_OUTPUT_TOOL
from server.tools.registry import BUILTIN_TOOLS

T = TypeVar("T")

NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
NAME_PATTERN = "^[a-z0-9][a-z0-9_-]{0,63}$"

DEFINITION_SUFFIXES = (".toml", ".md")
TOP_LEVEL_KEYS = (
    "name",
    "description",
    "model",
    "tools",
    "max_turns",
    "system_prompt",
    "completion",
    "output_schema",
)
COMPLETION_KEYS = ("tool", "max_retries", "base_delay_ms", "max_delay_ms")


# --- the static definition ---


@dataclass(frozen=True)
class AgentDefinition:
    """What an agent is allowed and told to do; immutable and shared, never per session.

    - `system_prompt`: empty → the server's configured system prompt (`Settings.system_prompt`).
    - `tools`: the allow-list in order; `None` → every built-in tool; `()` → no tools.
    - `model`: `None` → the server default (`Settings.model`).
    - `max_turns`: `None` → the loop's own budget.
    - `source`: the file the definition came from (`None` when built in code).

    Build instances with `AgentBuilder` (which validates); the constructor checks nothing.
    """

    name: str
    description: str = ""
    system_prompt: str = ""
    tools: tuple[str, ...] | None = None
    model: str | None = None
    max_turns: int | None = None
    completion: CompletionRequirement | None = None
    output_schema: dict[str, Any] | None = field(default=None, hash=False)
    source: str | None = None

    def allows_tool(self, name: str) -> bool:
        return self.tools is None or name in self.tools

    def select_tools(self, available: Mapping[str, T]) -> dict[str, T]:
        """The subset of `available` (name → tool) this agent may use, in allow-list order.

        The pseudo-tool `StructuredOutput` is not a registry tool and is skipped; the loop adds
        it from `output_schema`.
        """
        if self.tools is None:
            return dict(available)
        return {name: available[name] for name in self.tools if name in available}


DEFAULT_AGENT = AgentDefinition(
    name="default",
    description="The general-purpose coding agent: every built-in tool, the server's model and prompt.",
)


# --- errors ---


class Problem(NamedTuple):
    field: str  # e.g. "tools", "completion.max_retries", "front matter"
    message: str
    line: int | None = None


class AgentDefinitionError(ValueError):
    """An agent definition that cannot be used. The message names the agent (when known), the
    file and line (when loaded from one), and every problem with its field, as a bulleted list
    when there is more than one."""

    def __init__(
        self,
        problems: Iterable[Problem] | Problem,
        *,
        agent: str | None = None,
        source: str | Path | None = None,
        line: int | None = None,
    ) -> None:
        self.problems: tuple[Problem, ...] = (problems,) if isinstance(problems, Problem) else tuple(problems)
        self.agent = agent
        self.source = str(source) if source is not None else None
        self.line = line
        super().__init__(self._format())

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(p.field for p in self.problems)

    def _format(self) -> str:
        head = "agent definition"
        if self.agent:
            head += f" {self.agent!r}"
        if self.source:
            head += f" in {self.source}"
            if self.line is not None:
                head += f" (line {self.line})"
        head += " is invalid"
        items = [self._item(p) for p in self.problems]
        if len(items) == 1:
            return f"{head}: {items[0]}"
        return f"{head} ({len(items)} problems):\n" + "\n".join(f"  - {item}" for item in items)

    def _item(self, problem: Problem) -> str:
        where = problem.field
        if problem.line is not None and problem.line != self.line:
            where += f" (line {problem.line})"
        return f"{where}: {problem.message}"


# --- the builder ---

_UNSET: Any = object()


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _names(values: Iterable[str]) -> str:
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
                    f"{_names(known_tools)}"
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
                bad("model", f"unknown model {model!r}; known models: {_names(known_models)}")

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
                        f"{tool!r} is not a known tool; known tools: {_names(known_tools)}",
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


# --- loading from files ---


def load_definitions(
    folder: Path, *, known_tools: Collection[str], known_models: Collection[str] | None
) -> dict[str, AgentDefinition]:
    """Every `*.toml` and `*.md` definition directly in `folder` (hidden files skipped), keyed
    by name. Files are read in name order; the first bad file raises `AgentDefinitionError`
    (naming the file, and the line where known); two files with one name raise naming both."""
    folder = Path(folder)
    if not folder.is_dir():
        raise AgentDefinitionError(
            Problem("folder", "not a directory" if folder.exists() else "does not exist"), source=folder
        )
    found: dict[str, AgentDefinition] = {}
    paths = sorted(
        p
        for p in folder.iterdir()
        if p.suffix in DEFINITION_SUFFIXES and not p.name.startswith(".") and p.is_file()
    )
    for path in paths:
        definition = load_definition_file(path, known_tools=known_tools, known_models=known_models)
        previous = found.get(definition.name)
        if previous is not None:
            raise AgentDefinitionError(
                Problem("name", f"duplicate agent name: defined in both {previous.source} and {path}"),
                agent=definition.name,
                source=path,
            )
        found[definition.name] = definition
    return found


def load_definition_file(
    path: Path, *, known_tools: Collection[str], known_models: Collection[str] | None
) -> AgentDefinition:
    """One `.toml` or `.md` definition file. A missing `name` defaults to the file's stem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentDefinitionError(Problem("file", f"cannot be read: {exc}"), source=path) from exc
    lines: Mapping[str, int]
    if path.suffix == ".toml":
        data, lines = _parse_toml(text, path), {}
    elif path.suffix == ".md":
        data, lines = _parse_markdown(text, path)
    else:
        raise AgentDefinitionError(
            Problem("file", f"unsupported file type {path.suffix!r} (use .toml or .md)"), source=path
        )
    return _builder_from_mapping(data, path, lines).build(known_tools=known_tools, known_models=known_models)


def default_definitions(
    folder: Path | None = None,
    *,
    known_tools: Collection[str] | None = None,
    known_models: Collection[str] | None = None,
) -> dict[str, AgentDefinition]:
    """`{"default": DEFAULT_AGENT}` merged with the definitions in `folder` (a file may
    override `default`). A missing folder, or `None`, just yields the built-in default.
    `known_tools` defaults to the built-in tool names."""
    if known_tools is None:
        known_tools = [cls.name for cls in BUILTIN_TOOLS]
    definitions = {DEFAULT_AGENT.name: DEFAULT_AGENT}
    if folder is not None and Path(folder).exists():
        definitions.update(load_definitions(Path(folder), known_tools=known_tools, known_models=known_models))
    return definitions


def select_agent(definitions: Mapping[str, AgentDefinition], name: str | None) -> AgentDefinition:
    """The definition a session asked for; `None` → `default`. Unknown → a clear error."""
    name = name or DEFAULT_AGENT.name
    try:
        return definitions[name]
    except KeyError:
        raise AgentDefinitionError(
            Problem("agent", f"unknown agent {name!r}; available agents: {_names(definitions)}")
        ) from None


def _builder_from_mapping(data: Mapping[str, Any], path: Path, lines: Mapping[str, int]) -> AgentBuilder:
    b = AgentBuilder(source=path)
    b._lines.update(lines)

    def at(key: str) -> int | None:
        return lines.get(key)

    for key in data:
        if key not in TOP_LEVEL_KEYS:
            hint = difflib.get_close_matches(key, TOP_LEVEL_KEYS, n=1)
            suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
            b._problem(key, f"unknown key{suggestion}; allowed keys: {', '.join(TOP_LEVEL_KEYS)}", at(key))

    b.name(data.get("name", path.stem))
    if "description" in data:
        b.description(data["description"])
    if "system_prompt" in data:
        b.system_prompt(data["system_prompt"])
    if "model" in data:
        b.model(data["model"])
    if "max_turns" in data:
        b.max_turns(data["max_turns"])
    if "tools" in data:
        tools = data["tools"]
        if isinstance(tools, list):
            b.tools(*tools)
        else:
            b._problem("tools", f"must be a list of tool names, got {tools!r}", at("tools"))

    if "completion" in data:
        completion = data["completion"]
        if isinstance(completion, str):
            completion = {"tool": completion}
        if isinstance(completion, dict):
            for key in completion:
                if key not in COMPLETION_KEYS:
                    b._problem(
                        f"completion.{key}",
                        f"unknown key; allowed keys: {', '.join(COMPLETION_KEYS)}",
                        at(f"completion.{key}") or at("completion"),
                    )
            b.completion(
                cast(str, completion.get("tool")),  # any value: build() reports a bad one
                **{k: completion[k] for k in COMPLETION_KEYS[1:] if k in completion},
            )
        else:
            b._problem(
                "completion",
                f"must be a tool name or a table with {', '.join(COMPLETION_KEYS)}, got {completion!r}",
                at("completion"),
            )

    if "output_schema" in data:
        schema = data["output_schema"]
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except json.JSONDecodeError as exc:
                b._problem("output_schema", f"not valid JSON: {exc}", at("output_schema"))
                schema = None
        b.output_schema(schema)
    return b


def _parse_toml(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        line = int(match.group(1)) if match else None
        raise AgentDefinitionError(
            Problem("toml", f"malformed TOML: {exc}", line), source=path, line=line
        ) from exc


# --- the front matter subset ---

_KEY_LINE = re.compile(r"(?P<key>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)[ \t]*:(?P<rest>.*)")
_INT = re.compile(r"[-+]?[0-9]+")
_FENCE = "---"


class _FrontMatterError(Exception):
    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def _parse_markdown(text: str, path: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """Front matter (`key: value` lines between `---` fences) plus the body as system_prompt."""

    def fail(message: str, line: int) -> AgentDefinitionError:
        return AgentDefinitionError(Problem("front matter", message, line), source=path, line=line)

    lines = text.removeprefix("\ufeff").splitlines()
    if not lines or lines[0].rstrip() != _FENCE:
        raise fail(
            "a Markdown agent definition must start with a '---' line opening the front matter "
            "(key: value lines, closed by another '---' line)",
            1,
        )
    close = next((i for i in range(1, len(lines)) if lines[i].rstrip() == _FENCE), None)
    if close is None:
        raise fail(
            "the front matter opened on line 1 is never closed: add a '---' line after the last key",
            1,
        )

    data: dict[str, Any] = {}
    key_lines: dict[str, int] = {}  # key (and dotted key's parent) → line, for problem reports
    seen: dict[str, int] = {}  # keys as written → line, for duplicate detection
    try:
        for index in range(1, close):
            lineno = index + 1
            raw = lines[index]
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
            if raw[0] in " \t":
                raise _FrontMatterError(
                    "indented lines (nested values, multi-line strings) are not supported; "
                    "write each key on one line as 'key: value'",
                    lineno,
                )
            match = _KEY_LINE.fullmatch(raw.rstrip())
            if match is None or (match["rest"] and match["rest"][0] not in " \t"):
                raise _FrontMatterError(f"expected 'key: value', got {raw.strip()!r}", lineno)
            key = match["key"]
            if key in seen:
                raise _FrontMatterError(f"duplicate key {key!r} (first set on line {seen[key]})", lineno)
            value = _parse_value(match["rest"], lineno)
            seen[key] = key_lines[key] = lineno
            if "." in key:
                parent, child = key.split(".", 1)
                key_lines.setdefault(parent, lineno)
                holder = data.get(parent)
                if holder is None:
                    holder = data[parent] = {}
                elif isinstance(holder, str) and parent == "completion":
                    holder = data[parent] = {"tool": holder}
                if not isinstance(holder, dict):
                    raise _FrontMatterError(f"{parent!r} is already set to a plain value", lineno)
                holder[child] = value
            else:
                existing = data.get(key)
                if isinstance(existing, dict) and key == "completion" and isinstance(value, str):
                    existing.setdefault("tool", value)
                    if existing["tool"] != value:
                        raise _FrontMatterError("completion tool is set twice", lineno)
                elif existing is not None:
                    raise _FrontMatterError(f"{key!r} is already set by a dotted key", lineno)
                else:
                    data[key] = value
    except _FrontMatterError as exc:
        raise fail(exc.message, exc.line) from None

    body = "\n".join(lines[close + 1 :])
    body = re.sub(r"\A(?:[ \t]*\n)+", "", body).rstrip()
    if body:
        if "system_prompt" in data:
            raise fail(
                "system_prompt is set both in the front matter and as the body; keep one",
                key_lines["system_prompt"],
            )
        data["system_prompt"] = body
        key_lines["system_prompt"] = close + 2
    return data, key_lines


def _parse_value(rest: str, lineno: int) -> Any:
    """One front-matter value: a quoted or plain string, an int, a `[a, b]` list, or a JSON
    object (`{...}`, for output_schema). Plain values end at ` #` (a YAML comment)."""
    text = rest.strip()
    if not text or text[0] == "#":
        raise _FrontMatterError("missing value (nested blocks are not supported)", lineno)
    if text[0] == "{":
        try:
            value, end = json.JSONDecoder().raw_decode(text)
        except json.JSONDecodeError as exc:
            raise _FrontMatterError(f"invalid JSON object: {exc.msg} (column {exc.colno})", lineno) from None
        _expect_end(text[end:], lineno)
        return value
    if text[0] == "[":
        items: list[Any] = []
        pos = 1
        while True:
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            if pos >= len(text):
                raise _FrontMatterError("unterminated list: missing ']'", lineno)
            if text[pos] == "]" and not items:
                pos += 1
                break
            if text[pos] in ",]":
                raise _FrontMatterError("empty list item", lineno)
            item, pos = _scalar(text, pos, lineno, stop=",]")
            items.append(item)
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            if pos >= len(text):
                raise _FrontMatterError("unterminated list: missing ']'", lineno)
            if text[pos] == "]":
                pos += 1
                break
            pos += 1  # ","
        _expect_end(text[pos:], lineno)
        return items
    value, pos = _scalar(text, 0, lineno, stop="")
    _expect_end(text[pos:], lineno)
    return value


def _scalar(text: str, pos: int, lineno: int, *, stop: str) -> tuple[Any, int]:
    """A quoted string, an int or a plain string starting at `pos`; returns (value, end)."""
    first = text[pos]
    if first == '"':
        try:
            value, end = json.JSONDecoder().raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _FrontMatterError(f"invalid double-quoted string: {exc.msg}", lineno) from None
        return value, end
    if first == "'":
        out, i = [], pos + 1
        while i < len(text):
            if text[i] == "'":
                if text[i + 1 : i + 2] == "'":
                    out.append("'")
                    i += 2
                    continue
                return "".join(out), i + 1
            out.append(text[i])
            i += 1
        raise _FrontMatterError("unterminated single-quoted string", lineno)
    if first in "|>&*!%@`{[]," or (first == "-" and text[pos + 1 : pos + 2] in ("", " ")):
        raise _FrontMatterError(f"unsupported YAML syntax {first!r}; quote the value", lineno)
    end = pos
    while end < len(text) and text[end] not in stop:
        if text[end] == "#" and end > pos and text[end - 1] in " \t":
            break
        end += 1
    raw = text[pos:end].rstrip()
    if not raw:
        raise _FrontMatterError("empty value", lineno)
    return (int(raw) if _INT.fullmatch(raw) else raw), pos + len(raw)


def _expect_end(rest: str, lineno: int) -> None:
    rest = rest.strip()
    if rest and not rest.startswith("#"):
        raise _FrontMatterError(f"unexpected text after the value: {rest!r}", lineno)
