"""What a tool is, what it gets to work with, and what it returns.

A tool is a small object with a name, a JSON Schema for its arguments, prose guidance
for the system prompt (dual-track description, seed 004), an ACP `kind`, and an async
`run`. Whether a call needs permission is the permission policy's decision, fed by
`Tool.access`; the tool itself only does the work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from agentd.tools.agent_tasks import AgentTasks
    from agentd.tools.client_bridge import ClientBridge
    from agentd.tools.shell import ShellLauncher


class BackgroundShell(Protocol):
    """What `bash` needs of the session's background tasks (`BackgroundTasks`, which runs
    `bash` itself, so it is named here by what it does)."""

    def start(
        self, command: str, cwd: Path, timeout: float | None = None, *, shell: ShellLauncher | None = None
    ) -> str: ...


class TodoStore(Protocol):
    """What `todo_write` needs of the session's todo list (`agentd.tools.todo.TodoList`)."""

    def replace(self, entries: list[dict[str, Any]]) -> None: ...

    def as_plan(self) -> list[dict[str, str]]: ...


class ToolKind(StrEnum):
    """ACP ToolKind values."""

    READ = "read"
    EDIT = "edit"
    DELETE = "delete"
    MOVE = "move"
    SEARCH = "search"
    EXECUTE = "execute"
    THINK = "think"
    FETCH = "fetch"
    OTHER = "other"


class Access(StrEnum):
    """What a call may do to the world; the permission policy keys off this."""

    READ = "read"  # never asks
    WRITE = "write"  # file edits: asks in `default`, allowed in `accept_edits`, refused in `plan`
    EXECUTE = "execute"  # commands: asks in `default` and `accept_edits`, refused in `plan`


@dataclass
class ToolResult:
    output: str  # what the model sees
    is_error: bool = False
    # ACP ToolCallContent items (camelCase dicts), e.g. {"type": "diff", "path", "oldText", "newText"}
    content: list[dict[str, Any]] = field(default_factory=list)
    locations: list[dict[str, Any]] = field(default_factory=list)  # ACP ToolCallLocation
    raw_output: dict[str, Any] | None = None
    # Set by `todo_write`: the complete plan to publish as an ACP `plan` update.
    plan: list[dict[str, Any]] | None = None


@dataclass
class ToolContext:
    """What a running tool may touch. `cwd` is the session's workspace root (absolute)."""

    cwd: Path
    session_id: str
    # Streams interim output to clients (a `tool_call_update` with content); optional.
    report_progress: Callable[[str], Awaitable[None]] | None = None
    # Shows ACP tool-call content while the call runs (e.g. the client terminal it runs in).
    report_content: Callable[[list[dict[str, Any]]], Awaitable[None]] | None = None
    # Set while user input waits to be interjected: long waits return early (R-T7).
    interrupted: asyncio.Event | None = None
    # The session's background tasks (`bash` run_in_background, `wait`, `task_output`).
    background: BackgroundShell | None = None
    # The session's todo list (`todo_write`, TodoGate).
    todos: TodoStore | None = None
    # The prompting editor's files and terminal, when it offered them (R-T6).
    client: ClientBridge | None = None
    # The session's sub-agents (`task`, and `task_output` for `agent-N` ids; R-T11).
    agents: AgentTasks | None = None
    tool_call_id: str | None = None  # the running call's id (a sub-agent's events nest under it)


class Tool(Protocol):
    name: ClassVar[str]
    kind: ClassVar[ToolKind]
    access: ClassVar[Access]
    description: ClassVar[str]  # one line for the tools parameter
    guidance: ClassVar[str]  # when/how to use it, for the system prompt
    parameters: ClassVar[dict[str, Any]]  # JSON Schema of the arguments

    def title(self, args: dict[str, Any]) -> str:
        """Human-readable title for the tool_call event, e.g. "Read src/app.py"."""
        ...

    def locations(self, args: dict[str, Any], ctx: ToolContext) -> list[dict[str, Any]]:
        """ACP locations known before running (paths the call touches)."""
        ...

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Do the work. Raise `ToolError` for a readable failure; cancellation must clean up."""
        ...

    # Optional: `async def preview(self, args, ctx) -> ToolPreview` (agentd/tools/files/preview.py)
    # says what the call will do before it is approved — an edit's diff, a command's cwd.
