"""The session's side of sub-agents (R-T11): its `Subagents` registry and the `task` tool
of each turn.

A background child's usage joins the session's ledger when it finishes (persisted like a
turn's), and clients learn of its end at once through a `background_task` event, as for a
background shell command; its start is logged too (`background_task_started`: a restart
ends it `interrupted`), and its end may wake an idle session (wake.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, cast

from agentd.core import TaskCompletion, TaskStart
from agentd.loop import TASK_TOOL, SubagentLimits, Subagents, TurnContext, UsageLedger, run_turn
from agentd.session.commands import TaskFinished
from agentd.tools import StopHook, Tool

if TYPE_CHECKING:
    from agentd.session.commands import SessionCommand
    from agentd.session.eventlog import Journal
    from agentd.session.services import ActorServices


class SubagentsHost(Protocol):
    """The actor as its sub-agents' registry sees it: only these names."""

    @property
    def services(self) -> ActorServices: ...
    @property
    def usage(self) -> UsageLedger: ...
    @property
    def journal(self) -> Journal: ...
    @property
    def client_subagent_hooks(self) -> dict[str, StopHook]: ...
    def send(self, command: SessionCommand) -> None: ...


def session_subagents(actor: SubagentsHost) -> Subagents:
    services = actor.services
    settings = services.settings

    def on_usage(ledger: UsageLedger) -> None:
        actor.usage.merge(ledger)
        actor.journal.persist_fields({"usage": actor.usage.to_dict()})

    def on_started(start: TaskStart) -> None:
        actor.journal.emit(start)  # a restart learns it was running

    def on_finished(done: TaskCompletion) -> None:
        actor.journal.emit(done)
        actor.send(TaskFinished(done.task_id, announced=True))  # an idle session may wake

    return Subagents(
        agents=services.agents,
        run_turn=run_turn,
        limits=SubagentLimits(settings.subagent_max_depth, settings.subagent_max_concurrent),
        default_system_prompt=settings.system_prompt,
        stop_hooks=cast("list[StopHook]", list(services.hooks.subagent_stop)),
        client_stop_hooks=lambda: list(actor.client_subagent_hooks.values()),
        on_usage=on_usage,
        on_finished=on_finished,
        on_started=on_started,
    )


def with_task_tool(ctx: TurnContext, subagents: Subagents, available: dict[str, Tool]) -> TurnContext:
    """`ctx` with the `task` tool added when the session's agent may use it (its allow-list
    names it, or it has none) and sub-agents are enabled."""
    if TASK_TOOL in ctx.tools or not subagents.agents:
        return ctx
    tool = subagents.task_tool(ctx, available)
    if tool is not None:
        ctx.tools[TASK_TOOL] = tool
    ctx.subagents = subagents
    return ctx
