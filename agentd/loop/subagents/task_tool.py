"""The `task` tool (R-T11): the model starts a sub-agent — one of the server's agent
definitions, picked by name — on a self-contained task (`agentd/loop/subagents/registry.py`).

It is a tool like any other on the wire (a `tool_call` the child's events then nest under)
but it is built per turn, bound (`bind`) to the `TurnContext` of the agent that may call it,
to the session's `Subagents` and to the tools a child may choose from; the running call's id
(`ToolContext.tool_call_id`) is where the child's events nest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agentd.core import CompletionRequirement
from agentd.loop.subagents.limits import DEFAULT_CHILD_MAX_TURNS, child_max_turns
from agentd.tools import Access, Tool, ToolContext, ToolError, ToolKind, ToolResult

if TYPE_CHECKING:
    from agentd.loop.context import TurnContext

TASK_TOOL = "task"


class AgentSpec(Protocol):
    """What a child is made of — the shape of `agentd.agents.AgentDefinition` (a layer above,
    so it is described here, not imported)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def system_prompt(self) -> str: ...
    @property
    def model(self) -> str | None: ...
    @property
    def max_turns(self) -> int | None: ...
    @property
    def completion(self) -> CompletionRequirement | None: ...
    @property
    def output_schema(self) -> dict[str, Any] | None: ...

    def allows_tool(self, name: str) -> bool: ...

    def select_tools(self, available: Mapping[str, Tool]) -> dict[str, Tool]: ...


@dataclass(frozen=True)
class ChildRequest:
    """One `task` call, checked: which agent, what to do, and how."""

    spec: AgentSpec
    prompt: str
    description: str
    max_turns: int | None
    background: bool


class ChildSpawner(Protocol):
    """What the tool needs of the session's sub-agents (`Subagents`): the agents it may pick,
    and running one."""

    @property
    def agents(self) -> Mapping[str, AgentSpec]: ...

    async def start(
        self, parent: TurnContext, request: ChildRequest, tool_call_id: str, available: dict[str, Tool]
    ) -> ToolResult: ...


DESCRIPTION_CHARS = 80


def _guidance(agents: dict[str, str]) -> str:
    listed = "; ".join(f"{name}: {text}" if text else name for name, text in agents.items())
    return (
        "Use task to hand a self-contained piece of work to a sub-agent, which works with its own "
        "context and tools and returns only its final answer (keep your own context small: give it "
        "everything it needs in the prompt, it does not see this conversation). Pick the agent by "
        f"name ({listed}). max_turns caps its tool rounds (never above the agent's own cap; "
        f"default: the agent's cap, else {DEFAULT_CHILD_MAX_TURNS}). With run_in_background=true the call "
        "returns the agent's id at once; you are told when it finishes, and task_output (with "
        "wait=true to wait) shows its answer."
    )


class TaskTool:
    name = TASK_TOOL
    kind = ToolKind.OTHER
    access = Access.READ  # the child's own tool calls ask for permission, one by one
    description = "Run a sub-agent on a self-contained task and get its final answer."

    def __init__(self, subagents: ChildSpawner, available: dict[str, Tool]) -> None:
        self.subagents = subagents
        self.available = available  # the tools a child's allow-list picks from
        self.parent: TurnContext | None = None  # bound by `bind` for the turn that offers it
        self.agents = subagents.agents  # what its guidance and schema were made from
        names = {name: spec.description for name, spec in subagents.agents.items()}
        self.guidance = _guidance(names)
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                "agent": {"type": "string", "enum": list(names), "description": "The agent to run."},
                "prompt": {"type": "string", "minLength": 1, "description": "The task, self-contained."},
                "description": {
                    "type": "string",
                    "maxLength": DESCRIPTION_CHARS,
                    "description": "A few words saying what it does (shown to the user).",
                },
                "max_turns": {
                    "type": "integer",
                    "minimum": 1,
                    "description": (
                        "Tool rounds it may run (default: the agent's own cap, "
                        f"else {DEFAULT_CHILD_MAX_TURNS})."
                    ),
                },
                "run_in_background": {
                    "type": "boolean",
                    "description": "Return at once and let it run beside you (default false).",
                },
            },
            "required": ["agent", "prompt"],
            "additionalProperties": False,
        }

    def bind(self, parent: TurnContext) -> TaskTool:
        self.parent = parent
        return self

    def title(self, args: dict[str, Any]) -> str:
        what = args.get("description") or args.get("agent") or "sub-agent"
        return f"Agent: {what}"

    def locations(self, args: dict[str, Any], ctx: ToolContext) -> list[dict[str, Any]]:
        return []

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        parent = self.parent
        if parent is None or ctx.tool_call_id is None:
            raise ToolError("sub-agents are not available here")
        spec = self.subagents.agents.get(str(args.get("agent")))
        if spec is None:
            known = ", ".join(self.subagents.agents)
            raise ToolError(f"unknown agent {args.get('agent')!r}; known agents: {known}")
        request = ChildRequest(
            spec=spec,
            prompt=str(args["prompt"]),
            description=str(args.get("description") or spec.name),
            max_turns=child_max_turns(args.get("max_turns"), spec.max_turns),
            background=args.get("run_in_background") is True,
        )
        return await self.subagents.start(parent, request, ctx.tool_call_id, self.available)
