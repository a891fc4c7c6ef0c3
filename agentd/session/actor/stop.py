"""How a session actor stops (R-S1): a `Shutdown` command ends its running turn within the
grace, leaves queued prompts queued in the store for the next run and answers their requests
deferred; every command that arrives once it is stopping is refused with an answer (never left
waiting). The actor's stop flags are a `StopState`."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

from agentd.core import EndReason, TurnOutcome
from agentd.session.commands import (
    AttachComplete,
    Cancel,
    Detach,
    Prompt,
    PromptDone,
    ResumeQueue,
    SessionCommand,
    Shutdown,
    TaskFinished,
)
from agentd.session.commit_outcome import NotCommitted, not_committed
from agentd.session.errors import session_stopping, shutting_down
from agentd.session.queue import answer_all, resolve
from agentd.session.turn_launch import KilledTurnEnder, RunningTurn, stop_turn

if TYPE_CHECKING:
    from agentd.loop import SessionLoopState
    from agentd.session.actor.mailbox import Mailbox
    from agentd.session.eventlog import Journal
    from agentd.session.queue import PromptQueue, QueuedPrompt
    from agentd.session.services import ActorServices
    from agentd.tools import BackgroundTasks, McpConnections


@dataclasses.dataclass
class StopState:
    """How far the actor has got in stopping."""

    stopping: bool = False  # a Shutdown is handled: the actor reads no more commands
    server: bool = False  # the whole server shuts down (not just an eviction)
    exited: bool = False  # the actor's task ends (after a shutdown)


class StopHost(KilledTurnEnder, Protocol):
    """The actor as its stop path sees it: only these names (the actor's module imports this
    one, so naming `SessionActor` here would be a type-only cycle)."""

    @property
    def id(self) -> str: ...
    @property
    def stop_state(self) -> StopState: ...
    @property
    def running(self) -> RunningTurn | None: ...
    @property
    def task(self) -> asyncio.Task[None] | None: ...
    @property
    def mailbox(self) -> Mailbox: ...
    @property
    def journal(self) -> Journal: ...
    @property
    def background(self) -> BackgroundTasks: ...
    @property
    def loop_state(self) -> SessionLoopState: ...
    @property
    def queue(self) -> deque[QueuedPrompt]: ...
    @property
    def desk(self) -> PromptQueue: ...
    @property
    def mcp(self) -> McpConnections | None: ...
    @property
    def services(self) -> ActorServices: ...
    def idle_since(self) -> float | None: ...
    def finish_turn(self, turn_id: str) -> None: ...


def refuse(actor: StopHost, command: SessionCommand) -> None:
    """The actor is stopping and reads no more commands: answer what waits instead of
    letting it hang. During a server shutdown a prompt ends `server_shutting_down`."""
    reply: asyncio.Future[Any] | None = None
    match command:
        case Prompt(ack=ack) if ack is not None:
            command.reply.cancel()  # an enqueue: its caller waits for the ack (below)
            reply = ack
        case Prompt(reply=done) if actor.stop_state.server:
            if not done.done():
                refused = TurnOutcome.cancelled(EndReason.SERVER_SHUTTING_DOWN)
                done.set_result(PromptDone("", None, refused))
            return
        case Cancel():
            if actor.running is not None:  # still honoured: the drain may be waiting on it
                actor.running.cancel.set()
            return
        case Shutdown(reply=stopped):
            if actor.task is not None:  # already stopping: done when the actor is
                actor.task.add_done_callback(lambda _t: resolve(stopped, True))
            else:
                resolve(stopped, True)
            return
        case ResumeQueue() | AttachComplete() | Detach() | TaskFinished():
            return  # nobody waits for an answer
        case _:
            reply = command.reply
    if not reply.done():
        if actor.stop_state.server:
            reply.set_exception(shutting_down("server_shutting_down: the server is stopping"))
        else:
            reply.set_exception(session_stopping(actor.id))  # retryable: the next request reloads it


async def shut_down(actor: StopHost, cmd: Shutdown) -> None:
    if cmd.only_if_idle and (actor.idle_since() is None or not actor.mailbox.empty()):
        cmd.reply.set_result(False)  # work arrived since the sweep looked
        return
    if cmd.on_stop is not None:
        cmd.on_stop()
    actor.stop_state.server = cmd.server_stopping
    actor.stop_state.stopping = True
    await _wind_down(actor, cmd.grace)
    cmd.reply.set_result(True)
    actor.stop_state.exited = True


async def _wind_down(actor: StopHost, grace: float) -> None:
    actor.journal.stopped = True
    actor.journal.cancel_checkpoints()
    await asyncio.gather(actor.background.close(), actor.loop_state.subagents.close())
    turn = actor.running
    if turn is not None:
        await stop_turn(actor, turn, grace)
        actor.finish_turn(turn.id)
    # Queued prompts (and input the last turn never drained) stay queued in the store
    # and run after the restart; once that is committed their requests are answered
    # deferred — a client retrying with the same requestId later learns the end.
    deferred_entries = list(actor.queue)
    actor.desk.changed()
    actor.queue.clear()
    actor.desk.forget()
    if actor.mcp is not None:
        await actor.mcp.close()
    writer = actor.services.writer
    await writer.barrier()
    for queued in deferred_entries:
        waiters = (queued.command.reply, *queued.waiters)
        outcome = writer.outcome_since(actor.id, queued.since)
        if isinstance(outcome, NotCommitted):
            # Its row may never have reached the store: "deferred" would promise a run
            # after the restart that may not come (issue 26). Retryable instead.
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_exception(not_committed(actor.id, outcome.reason))
            continue
        deferred = PromptDone(queued.id, None, TurnOutcome.cancelled(EndReason.DEFERRED_BY_SHUTDOWN))
        answer_all(waiters, deferred)
