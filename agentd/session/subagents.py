"""The session's side of sub-agents (R-T11): the loop's state for the session, whose
registry reports the children to the actor.

A background child's usage joins the session's ledger when it finishes (persisted like a
turn's), and clients learn of its end at once through a `background_task` event, as for a
background shell command; its start is logged too (`background_task_started`: a restart
ends it `interrupted`), and its end may wake an idle session (wake.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from agentd.core import TaskCompletion, TaskStart, UsageLedger
from agentd.loop import SessionLoopState
from agentd.session.commands import TaskFinished
from agentd.tools import StopHook

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


def session_loop(actor: SubagentsHost, retry_state: Mapping[str, Any] | None) -> SessionLoopState:
    """The loop's state for this session, its sub-agents reporting to the actor."""
    services = actor.services

    def on_usage(ledger: UsageLedger) -> None:
        actor.usage.merge(ledger)
        actor.journal.persist_fields({"usage": actor.usage.to_dict()})

    def on_started(start: TaskStart) -> None:
        actor.journal.emit(start)  # a restart learns it was running

    def on_finished(done: TaskCompletion) -> None:
        actor.journal.emit(done)
        actor.send(TaskFinished(done.task_id, announced=True))  # an idle session may wake

    return SessionLoopState.create(
        services.settings,
        services.limits,
        retry_state,
        agents=services.agents,
        stop_hooks=cast("list[StopHook]", list(services.hooks.subagent_stop)),
        client_stop_hooks=lambda: list(actor.client_subagent_hooks.values()),
        on_usage=on_usage,
        on_finished=on_finished,
        on_started=on_started,
    )
