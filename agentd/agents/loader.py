"""Loading agent definitions from files: a folder of `*.toml` files and `*.md` files with a
front matter block (`load_definitions`); `default_definitions` adds the built-in `default` agent.

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

import json
import logging
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, cast

from agentd.agents.builder import AgentBuilder, join_names
from agentd.agents.definition import DEFAULT_AGENT, AgentDefinition, AgentDefinitionError, Problem
from agentd.agents.dialects import translate
from agentd.agents.frontmatter import parse_markdown
from agentd.loop import TASK_TOOL
from agentd.tools import BUILTIN_TOOLS

log = logging.getLogger(__name__)

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
    "denied_tools",
)
COMPLETION_KEYS = ("tool", "max_retries", "base_delay_ms", "max_delay_ms")


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
        data, lines = parse_markdown(text, path)
    else:
        raise AgentDefinitionError(
            Problem("file", f"unsupported file type {path.suffix!r} (use .toml or .md)"), source=path
        )
    definition = _builder_from_mapping(data, path, lines).build(
        known_tools=known_tools, known_models=known_models
    )
    for note in definition.notes:  # what another tool's file said that agentd does not use
        log.info("agent definition %s: %s", path, note)
    return definition


def default_definitions(
    folder: Path | None = None,
    *,
    known_tools: Collection[str] | None = None,
    known_models: Collection[str] | None = None,
) -> dict[str, AgentDefinition]:
    """`{"default": DEFAULT_AGENT}` merged with the definitions in `folder` (a file may
    override `default`). A missing folder, or `None`, just yields the built-in default.
    `known_tools` defaults to the built-in tool names; the sub-agents' `task` tool is
    always known."""
    names = known_tools if known_tools is not None else [cls.name for cls in BUILTIN_TOOLS]
    known_tools = [*names, TASK_TOOL]
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
            Problem("agent", f"unknown agent {name!r}; available agents: {join_names(definitions)}")
        ) from None


def _builder_from_mapping(data: Mapping[str, Any], path: Path, lines: Mapping[str, int]) -> AgentBuilder:
    """The file's keys (other tools' spellings translated, `dialects.py`) into a builder; keys
    that are wrong in themselves (unknown, not a table) are its problems already."""
    t = translate(data, lines)
    b = AgentBuilder(source=path).lines(t.lines)
    for problem in t.problems:
        b.problem(*problem)
    for note in t.notes:
        b.note(note)
    for key in t.data:
        if key not in TOP_LEVEL_KEYS:
            import difflib  # only for a key that is wrong: not with every first session

            hint = difflib.get_close_matches(key, TOP_LEVEL_KEYS, n=1)
            suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
            b.problem(
                key, f"unknown key{suggestion}; allowed keys: {', '.join(TOP_LEVEL_KEYS)}", t.lines.get(key)
            )
    values = {k: v for k, v in t.data.items() if k in TOP_LEVEL_KEYS}
    b.name(values.pop("name", path.stem))
    _set_lists(b, values, t.lines)
    _set_completion(b, values.pop("completion", None), t.lines)
    _set_schema(b, values.pop("output_schema", None), t.lines)
    for key, value in values.items():  # the plain ones: description, system_prompt, model, max_turns
        getattr(b, key)(value)
    return b


def _set_lists(b: AgentBuilder, values: dict[str, Any], lines: Mapping[str, int]) -> None:
    for key, setter in (("tools", b.tools), ("denied_tools", b.denied_tools)):
        if key not in values:
            continue
        names = values.pop(key)
        if isinstance(names, list):
            setter(*names)
        else:
            b.problem(key, f"must be a list of tool names, got {names!r}", lines.get(key))


def _set_completion(b: AgentBuilder, completion: Any, lines: Mapping[str, int]) -> None:
    if completion is None:
        return
    if isinstance(completion, str):
        completion = {"tool": completion}
    if not isinstance(completion, dict):
        b.problem(
            "completion",
            f"must be a tool name or a table with {', '.join(COMPLETION_KEYS)}, got {completion!r}",
            lines.get("completion"),
        )
        return
    for key in completion:
        if key not in COMPLETION_KEYS:
            b.problem(
                f"completion.{key}",
                f"unknown key; allowed keys: {', '.join(COMPLETION_KEYS)}",
                lines.get(f"completion.{key}") or lines.get("completion"),
            )
    b.completion(
        cast(str, completion.get("tool")),  # any value: build() reports a bad one
        **{k: completion[k] for k in COMPLETION_KEYS[1:] if k in completion},
    )


def _set_schema(b: AgentBuilder, schema: Any, lines: Mapping[str, int]) -> None:
    if isinstance(schema, str):  # TOML: a JSON object written as a string
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as exc:
            b.problem("output_schema", f"not valid JSON: {exc}", lines.get("output_schema"))
            schema = None
    b.output_schema(schema)


def _parse_toml(text: str, path: Path) -> dict[str, Any]:
    import tomllib  # with the first TOML file: not with every first session (issue 32 item 3)

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        line = int(match.group(1)) if match else None
        raise AgentDefinitionError(
            Problem("toml", f"malformed TOML: {exc}", line), source=path, line=line
        ) from exc
