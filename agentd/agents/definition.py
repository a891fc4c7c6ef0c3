"""The static agent definition (R-M4) and its errors.

Definition vs runtime agent (seed 004). An `AgentDefinition` is *static*: a name, a
system prompt, a tool allow-list, a model, a turn cap, a completion requirement (R-L2b)
and an output schema. It holds no conversation and no runtime state, so many sessions can
share one definition without leaking anything into each other. The *runtime* agent — the
conversation, the tool context, the rendered prompt, the running turn — is the session
actor (`agentd.session.actor.session_actor`); it is deliberately not in this package. A session picks
its definition by name (`select_agent`) when it is created and keeps a reference to it.

The definition's tool allow-list drives both tracks of the dual-track tool description:
the same subset (`AgentDefinition.select_tools`) feeds the API `tools` parameter (JSON
Schema: how to fill the arguments) and the "## Tools" section of the system prompt (prose:
when to use which tool), so the two never disagree.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from agentd.core import CompletionRequirement

T = TypeVar("T")

NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
NAME_PATTERN = "^[a-z0-9][a-z0-9_-]{0,63}$"

# --- the static definition ---


@dataclass(frozen=True)
class AgentDefinition:
    """What an agent is allowed and told to do; immutable and shared, never per session.

    - `system_prompt`: empty → the server's configured system prompt (`Settings.system_prompt`).
    - `tools`: the allow-list in order; `None` → every built-in tool; `()` → no tools.
    - `denied_tools`: names (or `fnmatch` patterns) taken out of `tools` — how other tools'
      files say "everything but these" (opencode's `write: false`, Claude Code's `disallowedTools`).
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
    denied_tools: tuple[str, ...] = ()
    # What the file said that agentd does not use (another tool's keys), for the log.
    notes: tuple[str, ...] = field(default=(), compare=False)

    def allows_tool(self, name: str) -> bool:
        if self.denied_tools and any(fnmatch.fnmatchcase(name, p) for p in self.denied_tools):
            return False
        return self.tools is None or name in self.tools

    def select_tools(self, available: Mapping[str, T]) -> dict[str, T]:
        """The subset of `available` (name → tool) this agent may use, in allow-list order.

        The pseudo-tool `StructuredOutput` is not a registry tool and is skipped; the loop adds
        it from `output_schema`.
        """
        names = available if self.tools is None else [n for n in self.tools if n in available]
        if not self.denied_tools:  # the usual case: no pattern to match each name against
            return {name: available[name] for name in names}
        return {name: available[name] for name in names if self.allows_tool(name)}


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
