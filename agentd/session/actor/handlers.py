"""The session actor's mailbox commands (R-S1): one handler per command type in
commands.py, looked up by the actor's loop in `HANDLERS`. Each runs in the actor's step."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from agentd.core import GoalState, Notice, NoticeSeverity, OutcomeKind
from agentd.session.actor.stop import StopHost, shut_down
from agentd.session.changes import revert_file
from agentd.session.commands import (
    Attach,
    AttachComplete,
    AttachMcp,
    Cancel,
    Compact,
    Detach,
    GoalClear,
    GoalGet,
    GoalSet,
    Interject,
    Prompt,
    QueueOp,
    RegisterHook,
    ResumeQueue,
    RevertFile,
    Rewind,
    SetAgent,
    SetMode,
    SetModel,
    SetPlan,
    SetTitle,
    Shutdown,
    TaskFinished,
)
from agentd.session.errors import SessionError, SessionErrorKind
from agentd.session.queue import QueuedPrompt, QueueKind, new_id
from agentd.session.rewind import RewindHost, rewind
from agentd.session.wake import WakeHost, maybe_wake

if TYPE_CHECKING:
    from agentd.core import PermissionMode
    from agentd.session.eventlog import EventHub
    from agentd.session.permission_gate import PermissionGate
    from agentd.session.sinks import FrameSink
    from agentd.tools import McpConnections, PromptHook, StopHook


class HandlersHost(StopHost, WakeHost, RewindHost, Protocol):
    """The actor as its mailbox handlers see it: what its stop path, wake-up and rewind need,
    and these names (the actor's module imports this one: naming `HandlersHost` here would be
    a type-only cycle)."""

    mcp: McpConnections | None  # `AttachMcp` replaces the session's MCP servers

    @property
    def goal(self) -> GoalState | None: ...
    @property
    def hub(self) -> EventHub: ...
    @property
    def permissions(self) -> PermissionGate: ...
    @property
    def client_hooks(self) -> dict[str, StopHook]: ...
    @property
    def client_prompt_hooks(self) -> dict[str, PromptHook]: ...
    @property
    def client_subagent_hooks(self) -> dict[str, StopHook]: ...
    def snapshot(self) -> dict[str, Any]: ...
    def send_available_commands(self, sink: FrameSink) -> None: ...
    def start_next_turn(self) -> None: ...
    def set_goal(self, goal: GoalState | None) -> None: ...
    def set_agent(self, name: str) -> None: ...
    def set_model(self, model: str) -> None: ...
    def set_mode(self, mode: PermissionMode) -> None: ...
    def set_plan(self, on: bool) -> None: ...
    def set_title(self, title: str) -> None: ...


C = TypeVar("C")

# One handler per mailbox command, registered with `@_handles(CommandType)` below.
HANDLERS: dict[type[Any], Callable[[HandlersHost, Any], Awaitable[None]]] = {}


def _handles(
    kind: type[C],
) -> Callable[[Callable[[HandlersHost, C], Awaitable[None]]], Callable[[HandlersHost, C], Awaitable[None]]]:
    def register(
        handler: Callable[[HandlersHost, C], Awaitable[None]],
    ) -> Callable[[HandlersHost, C], Awaitable[None]]:
        HANDLERS[kind] = handler
        return handler

    return register


@_handles(Prompt)
async def _on_prompt(actor: HandlersHost, cmd: Prompt) -> None:
    actor.desk.submit(cmd)


@_handles(QueueOp)
async def _on_queue_op(actor: HandlersHost, cmd: QueueOp) -> None:
    actor.desk.operate(cmd)


@_handles(ResumeQueue)
async def _on_resume_queue(actor: HandlersHost, cmd: ResumeQueue) -> None:
    actor.start_next_turn()


@_handles(Interject)
async def _on_interject(actor: HandlersHost, cmd: Interject) -> None:
    actor.desk.interject(cmd)


@_handles(GoalSet)
async def _on_goal_set(actor: HandlersHost, cmd: GoalSet) -> None:
    actor.set_goal(GoalState(cmd.objective, token_budget=cmd.token_budget, verify=cmd.verify))
    assert actor.goal is not None
    cmd.reply.set_result(actor.goal.to_dict())


@_handles(GoalGet)
async def _on_goal_get(actor: HandlersHost, cmd: GoalGet) -> None:
    cmd.reply.set_result(actor.goal.to_dict() if actor.goal else None)


@_handles(GoalClear)
async def _on_goal_clear(actor: HandlersHost, cmd: GoalClear) -> None:
    previous = actor.goal
    actor.set_goal(None)
    cmd.reply.set_result(previous.to_dict() if previous else None)


@_handles(SetAgent)
async def _on_set_agent(actor: HandlersHost, cmd: SetAgent) -> None:
    actor.set_agent(cmd.name)
    cmd.reply.set_result(None)


@_handles(SetModel)
async def _on_set_model(actor: HandlersHost, cmd: SetModel) -> None:
    actor.set_model(cmd.model)
    cmd.reply.set_result(None)


@_handles(SetMode)
async def _on_set_mode(actor: HandlersHost, cmd: SetMode) -> None:
    actor.set_mode(cmd.mode)
    cmd.reply.set_result(None)


@_handles(SetPlan)
async def _on_set_plan(actor: HandlersHost, cmd: SetPlan) -> None:
    actor.set_plan(cmd.on)
    cmd.reply.set_result(None)


@_handles(SetTitle)
async def _on_set_title(actor: HandlersHost, cmd: SetTitle) -> None:
    actor.set_title(cmd.title)
    cmd.reply.set_result(None)


@_handles(AttachMcp)
async def _on_attach_mcp(actor: HandlersHost, cmd: AttachMcp) -> None:
    previous, actor.mcp = actor.mcp, cmd.connections
    for failure in cmd.connections.failures:  # one notice per server left out, naming it
        notice = Notice(failure.message, NoticeSeverity.WARNING)
        actor.journal.emit(notice)
    cmd.reply.set_result(previous)  # the caller closes it, off the actor's step


@_handles(RegisterHook)
async def _on_register_hook(actor: HandlersHost, cmd: RegisterHook) -> None:
    # 001: "两类来源：文件配置的 hook，以及 client 注册的 hook" — for Stop and SubagentStop alike.
    # A client may also register for user_prompt_submit (asked at a prompt's turn start).
    registries: tuple[tuple[str, dict[str, Any]], ...] = (
        ("stop", actor.client_hooks),
        ("subagent_stop", actor.client_subagent_hooks),
        ("user_prompt_submit", actor.client_prompt_hooks),
    )
    for event, hooks in registries:
        if event in cmd.events:
            hooks[cmd.hook.connection_id] = cmd.hook
        else:
            hooks.pop(cmd.hook.connection_id, None)
    cmd.reply.set_result(None)


@_handles(Compact)
async def _on_compact(actor: HandlersHost, cmd: Compact) -> None:
    if actor.running is not None:
        # Compaction happens inside the running turn, before its next request; a stored
        # job keeps the request should the turn end first or the server die.
        actor.running.ctx.compact_requested = True
        actor.desk.schedule_compaction(actor.running.id, cmd.reply)
    else:
        job = QueuedPrompt(new_id("compact"), Prompt([], cmd.reply), kind=QueueKind.COMPACT)
        actor.queue.appendleft(job)
        actor.start_next_turn()


@_handles(TaskFinished)
async def _on_task_finished(actor: HandlersHost, cmd: TaskFinished) -> None:
    # Clients learn it now, idle or not; the model at its next sampling round (react) —
    # and an idle session starts that round itself (wake.py).
    if not cmd.announced:
        done = actor.background.completion(cmd.task_id)
        actor.journal.emit(done)
    maybe_wake(actor)


@_handles(Rewind)
async def _on_rewind(actor: HandlersHost, cmd: Rewind) -> None:
    # In the actor's step: no turn can start while files and conversation go back.
    if actor.running is not None:
        busy = SessionError(SessionErrorKind.BUSY, "session_busy: a turn is running; cancel it, then rewind")
        cmd.reply.set_exception(busy)
        return
    try:
        cmd.reply.set_result(await rewind(actor, cmd.turn_id, files=cmd.files))
    except SessionError as exc:
        cmd.reply.set_exception(exc)


@_handles(RevertFile)
async def _on_revert_file(actor: HandlersHost, cmd: RevertFile) -> None:
    # In the actor's step, like a rewind: no turn writes the file meanwhile.
    if actor.running is not None:
        busy = SessionError(SessionErrorKind.BUSY, "session_busy: a turn is running; cancel it, then revert")
        cmd.reply.set_exception(busy)
        return
    try:
        cmd.reply.set_result(await revert_file(actor, cmd.path, cmd.turn_id, cmd.force))
    except SessionError as exc:
        cmd.reply.set_exception(exc)


@_handles(Cancel)
async def _on_cancel(actor: HandlersHost, cmd: Cancel) -> None:
    # ACP cancel targets the running turn; queued prompts stay queued.
    if actor.running is not None:
        actor.running.cancel.set()


@_handles(Attach)
async def _on_attach(actor: HandlersHost, cmd: Attach) -> None:
    sub = actor.hub.subscribe(cmd.sink, actor.id)
    sub.attached_seq = actor.journal.seq
    # Taken in the same step as the subscription, so nothing falls between them.
    sub.snapshot = actor.snapshot()
    sub.partials = [(kind, mid, text) for mid, (kind, text) in actor.journal.partial.items()]
    cmd.reply.set_result(sub)


@_handles(AttachComplete)
async def _on_attach_complete(actor: HandlersHost, cmd: AttachComplete) -> None:
    if cmd.send_commands:
        actor.send_available_commands(cmd.sink)
    for pending in actor.permissions.pending.values():
        actor.permissions.ask_sink(cmd.sink, pending)


@_handles(Detach)
async def _on_detach(actor: HandlersHost, cmd: Detach) -> None:
    actor.hub.unsubscribe(cmd.sink_id)
    actor.client_hooks.pop(cmd.sink_id, None)
    actor.client_subagent_hooks.pop(cmd.sink_id, None)
    actor.client_prompt_hooks.pop(cmd.sink_id, None)
    actor.permissions.forget_sink(cmd.sink_id)


def on_turn_done(actor: HandlersHost, turn_id: str) -> None:
    """The running turn's task is done (the actor awaits it beside its mailbox): answer its
    prompt, start the next one."""
    turn = actor.running
    if turn is not None and turn.id == turn_id and turn.outcome is not None:
        if turn.outcome.kind is OutcomeKind.CANCELLED:
            actor.wake.paused = True  # stopped by someone: nothing wakes until the user prompts
    actor.finish_turn(turn_id)
    actor.start_next_turn()
    # A task that ended after the turn's last sampling round was never announced in it.
    maybe_wake(actor)


_handles(Shutdown)(shut_down)
