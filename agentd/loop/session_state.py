"""The loop's side of one session, kept between its turns: the retry buckets, what the model
has been told (reminders), the sub-agent registry — and what the session asks of it around a
turn: the prompt's opening, the `task` tool, how a turn ended.

The session holds one `SessionLoopState` and hands its parts back to each `TurnContext`; it
never reaches into the reminders or the registry's types itself (issue 27: the session needs
only a handful of loop names).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentd.core import (
    GoalStatus,
    Message,
    TaskCompletion,
    TaskStart,
    TurnOutcome,
    UsageLedger,
    prompt_images,
    prompt_text,
)
from agentd.loop.retry import RetryState
from agentd.loop.subagents import TASK_TOOL, SubagentLimits, Subagents
from agentd.loop.turn import run_turn
from agentd.loop.turn_reminders import (
    NO_LIVE_TOOLS,
    NO_SERVERS,
    LiveTools,
    McpServerState,
    OpeningState,
    PreviousEnd,
    ReminderMemory,
    TurnOpening,
    opening_message,
    opening_reminders,
    previous_end_of,
    reminder_message,
)

if TYPE_CHECKING:
    from agentd.infra import Settings
    from agentd.loop.context import TurnContext
    from agentd.loop.limits import LoopLimits
    from agentd.loop.subagents import AgentSpec
    from agentd.protocol import ContentBlock
    from agentd.tools import McpConnections, StopHook, Tool


@dataclass
class SessionLoopState:
    retry: RetryState
    subagents: Subagents  # R-T11: the `task` tool's children
    reminders: ReminderMemory = field(default_factory=ReminderMemory)  # turn_reminders.py

    @classmethod
    def create(
        cls,
        settings: Settings,
        limits: LoopLimits,
        retry_state: Mapping[str, Any] | None,
        *,
        agents: Mapping[str, AgentSpec],
        stop_hooks: list[StopHook],
        client_stop_hooks: Callable[[], list[StopHook]],
        on_usage: Callable[[UsageLedger], None],
        on_started: Callable[[TaskStart], None],
        on_finished: Callable[[TaskCompletion], None],
    ) -> SessionLoopState:
        """A session's state, its retry buckets as persisted (`retry_state`): a crash-restart
        loop can never reset them into endless retries."""
        retry = (
            RetryState.from_dict(dict(retry_state), limits.retry) if retry_state else RetryState(limits.retry)
        )
        subagents = Subagents(
            agents=agents,
            run_turn=run_turn,
            limits=SubagentLimits(settings.subagent_max_depth, settings.subagent_max_concurrent),
            default_system_prompt=settings.system_prompt,
            stop_hooks=stop_hooks,
            client_stop_hooks=client_stop_hooks,
            on_usage=on_usage,
            on_finished=on_finished,
            on_started=on_started,
        )
        return cls(retry, subagents)

    def equip(self, ctx: TurnContext, available: dict[str, Tool], *, allowed: Callable[[str], bool]) -> None:
        """The turn's sub-agents; and its `task` tool when the agent may use it (`allowed`:
        its allow-list names it, or it has none) and sub-agents are enabled (R-T11)."""
        ctx.subagents = self.subagents
        if not allowed(TASK_TOOL) or TASK_TOOL in ctx.tools or not self.subagents.agents:
            return
        tool = self.subagents.task_tool(ctx, available)
        if tool is not None:
            ctx.tools[TASK_TOOL] = tool

    def open_turn(
        self,
        ctx: TurnContext,
        blocks: Sequence[ContentBlock],
        prompt_id: str,
        index: int,
        *,
        plan_mode: bool,
        mcp: McpConnections | None,
        prompt: str | None = None,
    ) -> None:
        """001's L2: "注入一批 reminder（MCP、plan mode、任务恢复、workflow 状态、中断提示等）" then
        "把用户消息写进 ChatState" — the reminders as one user message, then the prompt (whose
        turn's messages begin at `index`); `ctx.opening` records it. `prompt`: the blocks'
        text when the caller has it already (`prompt_text(blocks)`)."""
        tools = frozenset(ctx.tools)
        state = self._opening_state(ctx, tools, plan_mode, mcp)
        reminders = opening_reminders(state)
        if (text := opening_message(reminders)) is not None:
            ctx.conversation.append(reminder_message(text))
        memory = self.reminders
        # What a prompt hook's block restores (`_open_turn`): no hook, no block, no copy.
        told_before = memory.copy() if ctx.prompt_hooks else None
        servers = state.mcp_servers
        memory.mcp_announced = frozenset(s.name for s in servers) if servers else NO_SERVERS
        memory.previous_end = PreviousEnd.NORMAL  # told once
        memory.seen_tools = tools  # told too (or the first request shows them): L3 says no more
        if prompt is None:
            prompt = prompt_text(blocks)
        ctx.conversation.append(Message.user(prompt, prompt_images(blocks)))
        ctx.opening = TurnOpening(prompt, prompt_id, index, reminders, told_before)

    def _opening_state(
        self, ctx: TurnContext, tools: frozenset[str], plan_mode: bool, mcp: McpConnections | None
    ) -> OpeningState:
        servers: tuple[McpServerState, ...] = ()
        if mcp is not None:
            mcp_tools = mcp.tools
            servers = tuple(
                McpServerState(
                    spec.name, tuple(sorted(n for n, t in mcp_tools.items() if t.server == spec.name))
                )
                for spec in mcp.specs
            )
        goal = ctx.goal if ctx.goal is not None and ctx.goal.status is not GoalStatus.COMPLETE else None
        memory = self.reminders
        return OpeningState(
            plan_mode=plan_mode,
            mcp_servers=servers,
            mcp_announced=memory.mcp_announced,
            previous_end=memory.previous_end,
            goal=(goal.objective, goal.status.value) if goal is not None else None,
            open_todos=tuple(e["content"] for e in todos) if (todos := ctx.todos.unfinished()) else (),
            tools=tools,
            seen_tools=memory.seen_tools,
        )

    def turn_ended(self, outcome: TurnOutcome) -> None:
        """A prompt's turn ended so: the next turn opens by saying how (when it matters)."""
        self.reminders.previous_end = previous_end_of(outcome.kind, outcome.reason)

    def cut_off(self) -> None:
        """The server died mid-turn: the next turn is told (task recovery)."""
        self.reminders.previous_end = PreviousEnd.CUT_OFF

    @staticmethod
    def live_tools(mcp: Callable[[], McpConnections | None]) -> Callable[[], LiveTools]:
        """The session's MCP tools and servers at each call (a `session/load` may replace them)."""

        def now() -> LiveTools:
            connections = mcp()
            if connections is None:
                return NO_LIVE_TOOLS  # (read only: one for every round of every session)
            return LiveTools(dict(connections.tools), frozenset(spec.name for spec in connections.specs))

        return now
