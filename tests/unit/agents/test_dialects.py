"""Agent files written for other agent tools (Claude Code, opencode, Codex-style TOML) load as
they are: their spellings translated, their own keys ignored with a note, typos still refused."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from agentd.agents import AgentDefinition, AgentDefinitionError, load_definitions
from agentd.agents.dialects import translate
from agentd.tools.registry import builtin_tools

KNOWN_TOOLS = (*builtin_tools(), "task")

CLAUDE_CODE_REVIEWER = """\
---
name: code-reviewer
description: Expert code review specialist. Proactively reviews code for quality and security.
tools: Read, Grep, Glob, Bash, WebFetch
model: inherit
color: blue
---

You are a senior code reviewer ensuring high standards of code quality and security.

When invoked:
1. Run git diff to see recent changes
2. Focus on modified files
"""

CLAUDE_CODE_DEBUGGER = """\
---
name: debugger
description: >
  Debugging specialist for errors, test failures, and unexpected behavior.
  Use proactively when encountering any issues.
tools:
  - Read
  - Edit
  - MultiEdit
  - Bash
  - Grep
disallowedTools: Write
model: sonnet
---
You are an expert debugger specializing in root cause analysis.
"""

OPENCODE_REVIEW = """\
---
description: Reviews code for quality and best practices
mode: subagent
model: anthropic/claude-sonnet-4-20250514
temperature: 0.1
maxSteps: 12
tools:
  write: false
  edit: false
  bash: false
  read: true
permission:
  edit: deny
  bash:
    "git diff": allow
    "*": ask
---
You are in code review mode. Focus on:

- Code quality and best practices
- Potential bugs and edge cases
"""

CODEX_PLANNER = """\
name = "code_planner"
description = "Plans before anyone writes code"
nickname_candidates = ["Atlas", "Compass"]
model = "gpt-5-codex"
model_reasoning_effort = "high"
sandbox_mode = "read-only"
tools = ["read_file", "shell", "apply_patch"]
developer_instructions = \"\"\"
You plan. You never write code yourself.\"\"\"
"""


def load(folder: Path) -> dict[str, AgentDefinition]:
    # As the server loads them: no model registry (a provider's model names pass through).
    return load_definitions(folder, known_tools=KNOWN_TOOLS, known_models=None)


def load_error(folder: Path) -> AgentDefinitionError:
    with pytest.raises(AgentDefinitionError) as info:
        load(folder)
    return info.value


@pytest.mark.parametrize(
    ("raw", "data", "notes"),
    [
        ({"tools": "Read, Grep,  ,Bash"}, {"tools": ["read_file", "grep", "bash"]}, 0),
        ({"tools": ["glob", "WebSearch"]}, {"tools": ["glob"]}, 1),
        ({"tools": {"write": False, "read": True}}, {"denied_tools": ["write_file"]}, 0),
        ({"tools": {"read": True}}, {}, 0),  # nothing false: every tool
        ({"prompt": "p", "maxSteps": 3}, {"system_prompt": "p", "max_turns": 3}, 0),
        ({"disallowedTools": "Bash", "color": "red"}, {"denied_tools": ["bash"]}, 1),
        ({"model": "inherit", "temperature": 0.2}, {"model": None}, 2),
        ({"max_turn": 3}, {"max_turn": 3}, 0),  # not another tool's key: left for the loader to refuse
    ],
)
def test_translate(raw: dict, data: dict, notes: int) -> None:
    out = translate(raw, {})
    assert out.data == data and len(out.notes) == notes and out.problems == []


def test_claude_code_agent_with_a_comma_separated_tool_string(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "code-reviewer.md").write_text(CLAUDE_CODE_REVIEWER)
    with caplog.at_level(logging.INFO, logger="agentd.agents.loader"):
        reviewer = load(tmp_path)["code-reviewer"]
    assert reviewer.tools == ("read_file", "grep", "glob", "bash")
    assert reviewer.model is None  # inherit: the server's model
    assert reviewer.description.startswith("Expert code review specialist.")
    assert reviewer.system_prompt.startswith("You are a senior code reviewer")
    assert reviewer.system_prompt.endswith("2. Focus on modified files")
    notes = "\n".join(reviewer.notes)
    assert "ignored 'color'" in notes and "dropped 'WebFetch'" in notes and "inherit" in notes
    assert "ignored 'color'" in caplog.text  # the operator sees what was not used


def test_claude_code_agent_with_block_lists_and_folded_text(tmp_path: Path) -> None:
    (tmp_path / "debugger.md").write_text(CLAUDE_CODE_DEBUGGER)
    debugger = load(tmp_path)["debugger"]
    assert debugger.tools == ("read_file", "edit_file", "bash", "grep")  # Edit and MultiEdit: one
    assert debugger.denied_tools == ("write_file",)
    assert debugger.model == "sonnet"
    assert debugger.description == (
        "Debugging specialist for errors, test failures, and unexpected behavior. "
        "Use proactively when encountering any issues.\n"
    )
    assert not debugger.allows_tool("write_file") and debugger.allows_tool("grep")


def test_opencode_agent_with_a_tools_table_denies_the_false_ones(tmp_path: Path) -> None:
    (tmp_path / "review.md").write_text(OPENCODE_REVIEW)
    review = load(tmp_path)["review"]  # the name: the file's
    assert review.tools is None and review.denied_tools == ("write_file", "edit_file", "bash")
    assert review.max_turns == 12 and review.model == "anthropic/claude-sonnet-4-20250514"
    assert review.system_prompt.endswith("- Potential bugs and edge cases")
    selected = review.select_tools(builtin_tools())
    assert "read_file" in selected and "grep" in selected
    assert not {"write_file", "edit_file", "bash"} & set(selected)
    assert {note.split(":")[0] for note in review.notes} == {
        "ignored 'mode'",
        "ignored 'temperature'",
        "ignored 'permission'",
    }


def test_codex_custom_agent_toml_with_developer_instructions(tmp_path: Path) -> None:
    (tmp_path / "code_planner.toml").write_text(CODEX_PLANNER)
    planner = load(tmp_path)["code_planner"]
    assert planner.system_prompt == "You plan. You never write code yourself."
    assert planner.tools == ("read_file", "bash", "edit_file")
    assert planner.model == "gpt-5-codex"
    assert len(planner.notes) == 3  # nickname_candidates, model_reasoning_effort, sandbox_mode


@pytest.mark.parametrize(
    ("front", "field", "needle"),
    [
        # A typo is not another tool's key: still refused, with the line.
        ("colour: blue", "colour", "unknown key"),
        ("tools: Read, Serch", "tools", "unknown tool 'Serch'"),
        ("tools:\n  write: nope", "tools", "maps names to true or false"),
        ("maxSteps: 0", "max_turns", "must be an integer >= 1, got 0"),
        ("prompt: inline", "system_prompt", "set twice, as 'prompt' and as 'system_prompt'"),
        ("tools: 7", "tools", "must be a list of tool names, got 7"),
    ],
)
def test_other_tools_spellings_still_report_mistakes_with_their_line(
    tmp_path: Path, front: str, field: str, needle: str
) -> None:
    path = tmp_path / "x.md"
    path.write_text(f"---\nname: x\n{front}\n---\nThe body.\n")
    error = load_error(tmp_path)
    assert error.fields == (field,)
    problem = error.problems[0]
    assert needle in problem.message and problem.line == 3
    assert f"{field} (line 3): " in str(error)


def test_a_yaml_block_scalar_and_block_map_in_agentds_own_keys(tmp_path: Path) -> None:
    (tmp_path / "x.md").write_text(
        "---\nname: x\nsystem_prompt: |\n  Line one.\n  Line two.\ncompletion:\n  tool: grep\n"
        "  max_retries: 2\noutput_schema:\n  type: object\n  properties:\n    a: {type: string}\n---\n"
    )
    definition = load(tmp_path)["x"]
    assert definition.system_prompt == "Line one.\nLine two.\n"
    assert definition.completion is not None and definition.completion.max_retries == 2
    assert definition.output_schema == {"type": "object", "properties": {"a": {"type": "string"}}}


def test_no_function_in_the_agents_package_is_complex() -> None:
    # The builder once validated in one function of cyclomatic complexity 59 (mccabe: 29).
    agents = Path(__file__).parents[3] / "agentd" / "agents"
    ruff = [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "C901"]
    result = subprocess.run(
        [*ruff, "--config", "lint.mccabe.max-complexity=10", str(agents)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
