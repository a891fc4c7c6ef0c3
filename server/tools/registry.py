"""The built-in tool set and its system-prompt guidance."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from server.tools.background import TaskOutput, Wait
from server.tools.base import Tool
from server.tools.bash import Bash
from server.tools.files import EditFile, ListDir, ReadFile, WriteFile
from server.tools.search import Glob, Grep
from server.tools.todo import TodoWrite

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


def builtin_tools() -> dict[str, Tool]:
    """Fresh instances of the built-in tools, keyed by name (in `BUILTIN_TOOLS` order)."""
    return {cls.name: cls() for cls in BUILTIN_TOOLS}


def system_prompt_guidance(tools: Mapping[str, Tool] | Iterable[Tool]) -> str:
    """The "## Tools" section of the system prompt: one `- name: guidance` line per tool."""
    items = tools.values() if isinstance(tools, Mapping) else tools
    lines = ["## Tools"]
    lines += [f"- {tool.name}: {' '.join(tool.guidance.split())}" for tool in items]
    return "\n".join(lines)
