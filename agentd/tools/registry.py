"""The built-in tool set and its system-prompt guidance."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping

from agentd.tools.base import Tool
from agentd.tools.files import EditFile, ReadFile, WriteFile
from agentd.tools.search import Glob, Grep, ListDir
from agentd.tools.shell import Bash, ShellLauncher, TaskOutput, Wait
from agentd.tools.todo import TodoWrite

BUILTIN_TOOLS: tuple[type[Tool], ...] = (
    ReadFile,
    WriteFile,
    EditFile,
    ListDir,
    Bash,
    Glob,
    Grep,
    TodoWrite,
    Wait,
    TaskOutput,
)


def builtin_tools(shell: ShellLauncher | None = None) -> dict[str, Tool]:
    """Fresh instances of the built-in tools, keyed by name (in `BUILTIN_TOOLS` order);
    `shell`: how `bash` starts commands (the sandbox chosen at start-up)."""
    tools: dict[str, Tool] = {cls.name: cls() for cls in BUILTIN_TOOLS}
    tools[Bash.name] = Bash(shell)
    return tools


def system_prompt_guidance(tools: Mapping[str, Tool] | Iterable[Tool]) -> str:
    """The "## Tools" section of the system prompt: one `- name: guidance` line per tool."""
    items = tools.values() if isinstance(tools, Mapping) else tools
    lines = ["## Tools"]
    lines += [_guidance_line(tool.name, tool.guidance) for tool in items]
    return "\n".join(lines)


# Built every model request (the system prompt), from the same few texts each time:
# collapsing a long guidance text's whitespace is done once per distinct text.
@functools.lru_cache(maxsize=512)
def _guidance_line(name: str, guidance: str) -> str:
    return f"- {name}: {' '.join(guidance.split())}"
