"""Agent files written for other agent tools, read as agentd definitions.

People paste agent files from Claude Code (`.claude/agents/*.md`: `name`, `description`,
`tools: Read, Grep`, `model: inherit`, `color`), opencode (`.opencode/agent/*.md`: `mode`,
`temperature`, `tools: {write: false}`, `permission`, `maxSteps`) and Codex
(`.codex/agents/*.toml`: `developer_instructions`, `sandbox_mode`, `nickname_candidates`).
The policy, pure and table-driven:

- a key that means one of ours is renamed (`KEY_ALIASES`: `prompt` → `system_prompt`);
- a key another tool uses with no meaning here is ignored and noted (`FOREIGN_KEYS`, with why);
- any other unknown key is still an error with a "did you mean" (a typo must not pass);
- tool names map to ours (`TOOL_ALIASES`: `Read` → `read_file`); another tool's tool with no
  equivalent here is dropped with a note (`FOREIGN_TOOLS`); an unknown name stays an error;
- `tools` may be a list, a comma-separated string (Claude Code) or a `{name: true|false}`
  table (opencode: every tool but the `false` ones).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Another tool's key → ours.
KEY_ALIASES = {
    "prompt": "system_prompt",  # opencode, Gemini CLI
    "instructions": "system_prompt",  # OpenAI Agents SDK, Codex
    "developer_instructions": "system_prompt",  # Codex
    "maxSteps": "max_turns",  # opencode
    "maxTurns": "max_turns",  # Claude Agent SDK
    "disallowedTools": "denied_tools",  # Claude Code
    "disallowed_tools": "denied_tools",
}

# Keys other tools write that mean nothing to agentd: ignored, with the reason in the note.
FOREIGN_KEYS = {
    "color": "a colour in another tool's interface",
    "mode": "every agentd definition serves both as a session's agent and as a sub-agent",
    "temperature": "sampling is the provider's setting",
    "top_p": "sampling is the provider's setting",
    "reasoningEffort": "reasoning effort is the provider's setting",
    "model_reasoning_effort": "reasoning effort is the provider's setting",
    "permission": "permissions are the server's (AGENTD_PERMISSION_MODE) and the session's",
    "permissionMode": "permissions are the server's (AGENTD_PERMISSION_MODE) and the session's",
    "approval_policy": "permissions are the server's (AGENTD_PERMISSION_MODE) and the session's",
    "sandbox_mode": "the sandbox is the server's (AGENTD_SANDBOX)",
    "hooks": "hooks are configured for the server (AGENTD_HOOKS_FILE)",
    "skills": "skills are the server's (AGENTD_SKILLS_DIR)",
    "disable": "a definition agentd should not load is a file not in AGENTD_AGENTS_DIR",
    "hidden": "every definition is listed",
    "nickname_candidates": "a display name in another tool",
    "web_search": "agentd has no web search tool",
    "mcp_servers": "MCP servers are the session's (session/new mcpServers)",
    "mcpServers": "MCP servers are the session's (session/new mcpServers)",
}

# Other tools' tool names → ours (names already ours are kept as they are).
TOOL_ALIASES = {
    # Claude Code
    "Read": "read_file",
    "Write": "write_file",
    "Edit": "edit_file",
    "MultiEdit": "edit_file",
    "LS": "list_dir",
    "Bash": "bash",
    "Glob": "glob",
    "Grep": "grep",
    "TodoWrite": "todo_write",
    "Task": "task",
    # opencode
    "read": "read_file",
    "write": "write_file",
    "edit": "edit_file",
    "patch": "edit_file",
    "list": "list_dir",
    "todowrite": "todo_write",
    # Gemini CLI, Codex
    "list_directory": "list_dir",
    "replace": "edit_file",
    "run_shell_command": "bash",
    "search_file_content": "grep",
    "shell": "bash",
    "apply_patch": "edit_file",
}

# Other tools' tools with nothing like them here: dropped from a list, with a note.
FOREIGN_TOOLS = frozenset(
    {
        "WebFetch",
        "WebSearch",
        "NotebookEdit",
        "NotebookRead",
        "BashOutput",
        "KillShell",
        "KillBash",
        "SlashCommand",
        "ExitPlanMode",
        "webfetch",
        "websearch",
        "todoread",
        "web_fetch",
        "google_web_search",
        "save_memory",
    }
)


@dataclass
class Translated:
    """A definition's keys in agentd's terms, what was ignored, and what is wrong."""

    data: dict[str, Any] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    problems: list[tuple[str, str, int | None]] = field(default_factory=list)  # (field, message, line)


def translate(data: Mapping[Any, Any], lines: Mapping[str, int]) -> Translated:
    """Rename aliases, drop (and note) foreign keys; keys neither ours nor known elsewhere are
    returned as they are for the caller to refuse."""
    out = Translated(lines=dict(lines))
    for raw_key, value in data.items():
        key = str(raw_key)
        line = lines.get(key)
        if key in FOREIGN_KEYS:
            out.notes.append(f"ignored {key!r}: {FOREIGN_KEYS[key]}")
            continue
        ours = KEY_ALIASES.get(key, key)
        if ours in out.data:
            first = next(k for k in data if KEY_ALIASES.get(str(k), str(k)) == ours)
            message = f"set twice, as {first!r} and as {key!r}; keep one"
            out.problems.append((ours, message, lines.get(str(first), line)))
            continue
        out.data[ours] = value
        if ours != key and line is not None:
            out.lines[ours] = line
    if "tools" in out.data:
        _translate_tools(out)
    if "denied_tools" in out.data:
        out.data["denied_tools"] = _names(out, "denied_tools", out.data["denied_tools"])
    if out.data.get("model") == "inherit":  # Claude Code: the main conversation's model
        out.data["model"] = None
        out.notes.append("model 'inherit': the server's model")
    return out


def _translate_tools(out: Translated) -> None:
    tools = out.data["tools"]
    if isinstance(tools, Mapping):  # opencode: {name: true|false}, every tool but the false ones
        del out.data["tools"]
        not_bool = {k: v for k, v in tools.items() if not isinstance(v, bool)}
        if not_bool:
            out.problems.append(
                (
                    "tools",
                    f"a tools table maps names to true or false, got {not_bool!r}",
                    out.lines.get("tools"),
                )
            )
            return
        denied = [str(name) for name, on in tools.items() if not on]
        if denied:
            out.data["denied_tools"] = _names(out, "tools", [*out.data.get("denied_tools", ()), *denied])
        return
    out.data["tools"] = _names(out, "tools", tools)


def _names(out: Translated, key: str, value: Any) -> Any:
    """A list of tool names in our terms; a string is comma-separated. Anything else is
    returned as it is (the builder reports it)."""
    if isinstance(value, str):
        value = [name.strip() for name in value.split(",") if name.strip()]
    if not isinstance(value, list):
        return value
    names: list[Any] = []
    for name in value:
        if name in FOREIGN_TOOLS:
            out.notes.append(f"{key}: dropped {name!r} (another tool's; agentd has no equivalent)")
            continue
        names.append(TOOL_ALIASES.get(name, name) if isinstance(name, str) else name)
    return names
