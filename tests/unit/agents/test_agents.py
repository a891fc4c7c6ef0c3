"""Agent definitions (R-M4): builder validation, completion pacing (R-L2b), file loading."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd.agents import (
    DEFAULT_AGENT,
    AgentBuilder,
    AgentDefinition,
    AgentDefinitionError,
    CompletionRequirement,
    default_definitions,
    load_definitions,
    select_agent,
)
from agentd.tools.registry import builtin_tools

KNOWN_TOOLS = tuple(builtin_tools())
KNOWN_MODELS = ("gpt-4o", "gpt-4o-mini")
SCHEMA = {"type": "object", "properties": {"verdict": {"type": "string"}}, "required": ["verdict"]}


def build(builder: AgentBuilder, *, known_models=KNOWN_MODELS) -> AgentDefinition:
    return builder.build(known_tools=KNOWN_TOOLS, known_models=known_models)


def build_error(builder: AgentBuilder, **kwargs) -> AgentDefinitionError:
    with pytest.raises(AgentDefinitionError) as info:
        build(builder, **kwargs)
    return info.value


def load(folder: Path) -> dict[str, AgentDefinition]:
    return load_definitions(folder, known_tools=KNOWN_TOOLS, known_models=KNOWN_MODELS)


def load_error(folder: Path) -> AgentDefinitionError:
    with pytest.raises(AgentDefinitionError) as info:
        load(folder)
    return info.value


# --- builder ---


def test_builder_success() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    definition = build(
        AgentBuilder()
        .name("code-reviewer")
        .description("Reviews code")
        .system_prompt("You review code.")
        .tools("read_file", "grep", "read_file")
        .model("gpt-4o")
        .max_turns(12)
        .completion("StructuredOutput", max_retries=2, base_delay_ms=100, max_delay_ms=1000)
        .output_schema(schema)
    )
    assert definition == AgentDefinition(
        name="code-reviewer",
        description="Reviews code",
        system_prompt="You review code.",
        tools=("read_file", "grep"),
        model="gpt-4o",
        max_turns=12,
        completion=CompletionRequirement("StructuredOutput", 2, 100, 1000),
        output_schema=schema,
        source=None,
    )
    schema["properties"] = {}  # the definition keeps its own copy
    assert definition.output_schema == {"type": "object", "properties": {"x": {"type": "integer"}}}
    hash(definition)  # immutable and hashable despite the schema dict
    with pytest.raises(AttributeError):
        definition.name = "other"  # type: ignore[misc]


def test_builder_minimal_defaults() -> None:
    definition = build(AgentBuilder().name("plain"), known_models=None)
    assert definition.tools is None and definition.model is None and definition.completion is None
    assert definition.max_turns is None and definition.output_schema is None
    assert definition.system_prompt == "" and definition.description == ""


def test_builder_collects_without_validating() -> None:
    builder = AgentBuilder().name("Bad Name").tools("nope").max_turns(0)  # no exception yet
    error = build_error(builder)
    assert set(error.fields) == {"name", "tools", "max_turns"}


def test_unknown_tool_names_it_and_the_known_ones() -> None:
    error = build_error(AgentBuilder().name("a").tools("read_file", "nonexistent_tool", "frobnicate"))
    assert error.fields == ("tools",)
    message = str(error)
    assert "'a'" in message
    assert "'nonexistent_tool'" in message and "'frobnicate'" in message
    unknown_part, known_part = message.split("; known tools: ")
    assert "'read_file'" not in unknown_part
    for name in KNOWN_TOOLS:
        assert name in known_part


def test_structured_output_without_schema() -> None:
    error = build_error(AgentBuilder().name("a").tools("read_file", "StructuredOutput"))
    assert error.fields == ("tools",)
    assert "StructuredOutput" in str(error) and "output_schema" in str(error)
    # with a schema it is fine
    build(AgentBuilder().name("a").tools("read_file", "StructuredOutput").output_schema(SCHEMA))


def test_completion_structured_output_needs_schema() -> None:
    error = build_error(AgentBuilder().name("a").completion("StructuredOutput"))
    assert error.fields == ("completion.tool",)
    assert "requires an output_schema" in str(error)
    ok = build(AgentBuilder().name("a").tools("grep").completion("StructuredOutput").output_schema(SCHEMA))
    assert ok.completion == CompletionRequirement("StructuredOutput")


def test_completion_tool_not_in_tools() -> None:
    error = build_error(AgentBuilder().name("a").tools("read_file", "grep").completion("todo_write"))
    assert error.fields == ("completion.tool",)
    assert "'todo_write' is not among the agent's tools (read_file, grep)" in str(error)
    # with all tools allowed, any known tool works, an unknown one does not
    assert build(AgentBuilder().name("a").completion("todo_write")).completion.tool == "todo_write"
    error = build_error(AgentBuilder().name("a").completion("nope"))
    assert error.fields == ("completion.tool",) and "'nope' is not a known tool" in str(error)


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"max_retries": 0}, "completion.max_retries"),
        ({"base_delay_ms": -1}, "completion.base_delay_ms"),
        ({"max_delay_ms": 0}, "completion.max_delay_ms"),
        ({"base_delay_ms": 2000, "max_delay_ms": 1000}, "completion.base_delay_ms"),
    ],
)
def test_completion_numbers(values: dict, field: str) -> None:
    error = build_error(AgentBuilder().name("a").completion("grep", **values))
    assert error.fields == (field,)


def test_bad_schema() -> None:
    error = build_error(AgentBuilder().name("a").output_schema({"type": "object", "properties": 5}))
    assert error.fields == ("output_schema",)
    assert "not a valid JSON Schema" in str(error)
    error = build_error(AgentBuilder().name("a").output_schema({"type": "no-such-type"}))
    assert "not a valid JSON Schema" in str(error)
    error = build_error(AgentBuilder().name("a").output_schema("not a dict"))  # type: ignore[arg-type]
    assert "must be a JSON object" in str(error)


def test_non_object_schema() -> None:
    error = build_error(AgentBuilder().name("a").output_schema({"type": "array", "items": {}}))
    assert error.fields == ("output_schema",)
    assert '"type": "object"' in str(error) and "'array'" in str(error)
    error = build_error(AgentBuilder().name("a").output_schema({"properties": {}}))
    assert '"type": "object"' in str(error)


def test_unknown_model() -> None:
    error = build_error(AgentBuilder().name("a").model("gpt-9"))
    assert error.fields == ("model",)
    assert "unknown model 'gpt-9'" in str(error) and "gpt-4o, gpt-4o-mini" in str(error)
    # no model registry → not checked
    assert build(AgentBuilder().name("a").model("gpt-9"), known_models=None).model == "gpt-9"


def test_max_turns_zero() -> None:
    error = build_error(AgentBuilder().name("a").max_turns(0))
    assert error.fields == ("max_turns",)
    assert "max_turns: must be an integer >= 1, got 0" in str(error)
    assert build_error(AgentBuilder().name("a").max_turns(True)).fields == ("max_turns",)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", "Code", "-lead", "has space", "a" * 65, "x\n"])
def test_bad_names(name: str) -> None:
    assert build_error(AgentBuilder().name(name)).fields == ("name",)


def test_name_required() -> None:
    error = build_error(AgentBuilder().tools("grep"))
    assert error.fields == ("name",) and "name: required" in str(error)


def test_several_errors_listed_together() -> None:
    error = build_error(
        AgentBuilder()
        .name("multi")
        .tools("nope", "StructuredOutput")
        .model("gpt-9")
        .max_turns(0)
        .completion("grep", max_retries=0)
        .output_schema({"type": "string"})
    )
    message = str(error)
    assert message.startswith("agent definition 'multi' is invalid (")
    assert set(error.fields) == {
        "output_schema",
        "tools",
        "model",
        "max_turns",
        "completion.tool",
        "completion.max_retries",
    }
    bullets = [line for line in message.splitlines() if line.startswith("  - ")]
    assert len(bullets) == len(error.problems) >= 6
    for needle in ("'nope'", "gpt-9", "max_turns", "'grep' is not among", "max_retries", "object"):
        assert needle in message


# --- completion pacing ---


def test_delay_s_defaults() -> None:
    req = CompletionRequirement("StructuredOutput")
    assert (req.max_retries, req.base_delay_ms, req.max_delay_ms) == (3, 500, 8000)
    assert [req.delay_s(n) for n in range(1, 7)] == [0.5, 1, 2, 4, 8, 8]
    assert CompletionRequirement("x", base_delay_ms=300, max_delay_ms=1000).delay_s(3) == 1.0
    with pytest.raises(ValueError):
        req.delay_s(0)


# --- loading ---

REVIEWER_TOML = """\
name = "reviewer"
description = "Reviews a diff"
model = "gpt-4o"
tools = ["read_file", "grep"]
max_turns = 20
system_prompt = \"\"\"
You review code.
Be terse.\"\"\"
output_schema = { type = "object", properties = { verdict = { type = "string" } }, required = ["verdict"] }

[completion]
tool = "StructuredOutput"
max_retries = 5
base_delay_ms = 250
max_delay_ms = 4000
"""

EXPLORER_MD = """\
---
# a comment
name: explorer
description: "Read-only explorer: looks, never touches"
model: gpt-4o-mini  # the small one
tools: [read_file, 'glob', "grep"]
max_turns: 7
completion: StructuredOutput
completion.max_retries: 2
output_schema: {"type": "object", "properties": {"summary": {"type": "string"}}}
---

You explore the repository.

Never change a file.
"""


def test_load_toml_and_markdown(tmp_path: Path) -> None:
    (tmp_path / "reviewer.toml").write_text(REVIEWER_TOML)
    (tmp_path / "explorer.md").write_text(EXPLORER_MD)
    (tmp_path / "notes.txt").write_text("ignored")
    (tmp_path / ".hidden.toml").write_text("garbage = = =")
    definitions = load(tmp_path)
    assert sorted(definitions) == ["explorer", "reviewer"]

    reviewer = definitions["reviewer"]
    assert reviewer == AgentDefinition(
        name="reviewer",
        description="Reviews a diff",
        system_prompt="You review code.\nBe terse.",
        tools=("read_file", "grep"),
        model="gpt-4o",
        max_turns=20,
        completion=CompletionRequirement("StructuredOutput", 5, 250, 4000),
        output_schema={
            "type": "object",
            "properties": {"verdict": {"type": "string"}},
            "required": ["verdict"],
        },
        source=str(tmp_path / "reviewer.toml"),
    )

    explorer = definitions["explorer"]
    assert explorer == AgentDefinition(
        name="explorer",
        description="Read-only explorer: looks, never touches",
        system_prompt="You explore the repository.\n\nNever change a file.",
        tools=("read_file", "glob", "grep"),
        model="gpt-4o-mini",
        max_turns=7,
        completion=CompletionRequirement("StructuredOutput", max_retries=2),
        output_schema={"type": "object", "properties": {"summary": {"type": "string"}}},
        source=str(tmp_path / "explorer.md"),
    )


def test_toml_output_schema_as_json_string_and_name_from_stem(tmp_path: Path) -> None:
    (tmp_path / "summarizer.toml").write_text(
        'output_schema = \'{"type": "object"}\'\ncompletion = "StructuredOutput"\n'
    )
    definition = load(tmp_path)["summarizer"]
    assert definition.output_schema == {"type": "object"}
    assert definition.completion == CompletionRequirement("StructuredOutput")
    assert definition.tools is None


def test_duplicate_names_across_files(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text('name = "same"\n')
    (tmp_path / "b.md").write_text("---\nname: same\n---\nbody\n")
    error = load_error(tmp_path)
    assert error.agent == "same"
    assert str(tmp_path / "a.toml") in str(error) and str(tmp_path / "b.md") in str(error)
    assert "duplicate" in str(error)


def test_malformed_toml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text('name = "broken"\ntools = ["read_file"\nmax_turns = 3\n')
    error = load_error(tmp_path)
    assert error.source == str(path)
    assert str(path) in str(error) and "malformed TOML" in str(error)
    assert error.line is not None and f"line {error.line}" in str(error)


def test_front_matter_missing_closing_fence(tmp_path: Path) -> None:
    path = tmp_path / "open.md"
    path.write_text("---\nname: open\ntools: [grep]\n\nYou never close the front matter.\n")
    error = load_error(tmp_path)
    assert error.source == str(path)
    assert "never closed" in str(error) and "'---'" in str(error) and str(path) in str(error)


def test_markdown_without_front_matter(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# Agents\n")
    assert "must start with a '---' line" in str(load_error(tmp_path))


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        # an unfinished list, quote or table: the line where it began, not the end of the text
        ("tools: [grep, ", "while parsing a flow node"),
        ('description: "unterminated', "while scanning a quoted scalar"),
        ("tools: [grep,, glob]", "expected the node content, but found ','"),
        ("  nested: 1", "mapping values are not allowed here"),
        ("description: Use it when: asked", "needs quotes"),
        ("name:explorer", "could not find expected ':'"),
        ("\tmodel: gpt-4o", "cannot start any token"),
        ("- grep", "expected <block end>"),
        ("model: *small", "undefined alias 'small'"),
        # safe loading: no tag builds a Python object
        ("description: !!python/object/apply:os.system [echo pwned]", "could not determine a constructor"),
        ("tools: [grep]\ntools: [glob]", "duplicate key 'tools' (first set on line 3)"),
        ("completion: {tool: grep, tool: glob}", "duplicate key 'completion.tool'"),
    ],
)
def test_front_matter_syntax_errors_name_file_and_line(tmp_path: Path, line: str, needle: str) -> None:
    path = tmp_path / "x.md"
    path.write_text(f"---\nmax_turns: 3\n{line}\n---\nbody\n")
    error = load_error(tmp_path)
    assert needle in str(error)
    expected = 4 if line.startswith("tools: [grep]\n") else 3
    assert error.line == expected and f"{path} (line {expected})" in str(error)


def test_front_matter_duplicate_key(tmp_path: Path) -> None:
    (tmp_path / "x.md").write_text("---\nmodel: gpt-4o\nmodel: gpt-4o-mini\n---\n")
    error = load_error(tmp_path)
    assert "duplicate key 'model' (first set on line 2)" in str(error) and error.line == 3


def test_file_problems_name_file_line_and_all_problems(tmp_path: Path) -> None:
    path = tmp_path / "x.md"
    path.write_text("---\nname: x\ntools: [grep, nope]\nmax_turn: 3\n---\nbody\n")
    error = load_error(tmp_path)
    message = str(error)
    assert message.startswith(f"agent definition 'x' in {path} is invalid (2 problems):")
    assert "tools (line 3): unknown tool 'nope'" in message
    assert "max_turn (line 4): unknown key (did you mean 'max_turns'?)" in message


def test_toml_unknown_keys_and_bad_types(tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_text('tools = 3\nmax_turns = "3"\n[completion]\ntool = "grep"\nretries = 2\n')
    error = load_error(tmp_path)
    assert set(error.fields) == {"tools", "max_turns", "completion.retries"}
    assert error.agent == "x"


def test_markdown_completion_dotted_keys_any_order(tmp_path: Path) -> None:
    (tmp_path / "x.md").write_text(
        "---\ntools: [grep]  # one\ncompletion.max_retries: 2\ncompletion: grep\n---\n"
    )
    definition = load(tmp_path)["x"]
    assert definition.completion == CompletionRequirement("grep", max_retries=2)
    assert definition.tools == ("grep",) and definition.system_prompt == ""


def test_markdown_system_prompt_twice(tmp_path: Path) -> None:
    (tmp_path / "x.md").write_text("---\nsystem_prompt: inline\n---\nand a body\n")
    assert "both in the front matter and as the body" in str(load_error(tmp_path))


def test_missing_folder(tmp_path: Path) -> None:
    error = load_error(tmp_path / "nope")
    assert "does not exist" in str(error) and str(tmp_path / "nope") in str(error)


# --- defaults and selection ---


def test_default_definitions(tmp_path: Path) -> None:
    assert DEFAULT_AGENT.name == "default" and DEFAULT_AGENT.tools is None
    assert DEFAULT_AGENT.completion is None and DEFAULT_AGENT.model is None
    assert default_definitions() == {"default": DEFAULT_AGENT}
    assert default_definitions(tmp_path / "missing") == {"default": DEFAULT_AGENT}

    (tmp_path / "reviewer.toml").write_text(REVIEWER_TOML)
    merged = default_definitions(tmp_path, known_models=KNOWN_MODELS)
    assert sorted(merged) == ["default", "reviewer"] and merged["default"] is DEFAULT_AGENT

    (tmp_path / "default.md").write_text("---\nname: default\ntools: [read_file]\n---\nCustom.\n")
    overridden = default_definitions(tmp_path)["default"]
    assert overridden.tools == ("read_file",) and overridden.system_prompt == "Custom."


def test_select_agent_and_tools() -> None:
    reviewer = build(AgentBuilder().name("reviewer").tools("grep", "read_file"))
    definitions = {"default": DEFAULT_AGENT, "reviewer": reviewer}
    assert select_agent(definitions, None) is DEFAULT_AGENT
    assert select_agent(definitions, "reviewer") is reviewer
    with pytest.raises(
        AgentDefinitionError, match=r"unknown agent 'nope'; available agents: default, reviewer"
    ):
        select_agent(definitions, "nope")

    tools = builtin_tools()
    assert list(reviewer.select_tools(tools)) == ["grep", "read_file"]
    assert list(DEFAULT_AGENT.select_tools(tools)) == list(tools)
    assert reviewer.allows_tool("grep") and not reviewer.allows_tool("bash")
