"""The session actor, L1 (R-S1, R-S2): one asyncio task owns one session's state.

It multiplexes its mailbox and the completion of its running turn: each mailbox command
has one handler (`_on_<command>`, looked up by type). Prompts that arrive while a turn
runs wait in a FIFO queue; each `session/prompt` is answered when its own turn ends. The
running turn is a child task of the actor: it reads and appends the conversation while
it runs, and reaches everything else through the actor's `Journal` (events) and its
`PermissionGate` methods below (same event loop, no locks).

Rooms next door: the queue's entries and idempotency (prompt_queue.py, queue_ops.py,
queue_sync.py), starting a turn (turn_launch.py), the journal of events, checkpoints and
crash repair (journal.py), local commands (local_commands.py), the permission gate
(permission_gate.py), snapshots (snapshot.py), sub-agents (subagents.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from server.agents import DEFAULT_AGENT
from server.core.conversation import Message
from server.core.events import EventKind
from server.core.log_context import bind_log_context
from server.core.modes import PermissionMode, SessionModes
from server.loop.context import Conversation
from server.loop.goal import GoalState
from server.loop.outcome import EndReason, OutcomeKind, TurnOutcome
from server.loop.retry import RetryState
from server.loop.usage import UsageLedger
from server.session import queue_ops
from server.session.commands import (
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
    PromptDone,
    QueueOp,
    RegisterHook,
    ResumeQueue,
    Rewind,
    SessionCommand,
    SetAgent,
    SetMode,
    SetModel,
    SetPlan,
    SetTitle,
    Shutdown,
    TaskFinished,
    TurnFinished,
)
from server.session.config_options import session_config_options
from server.session.errors import (
    SessionError,
    SessionErrorKind,
    session_failed,
    session_stopping,
    shutting_down,
)
from server.session.file_history import FileHistory
from server.session.hub import EventHub
from server.session.journal import PARTIAL_CHECKPOINT_INTERVAL_S, Journal
from server.session.local_commands import available_commands
from server.session.permission_gate import PermissionGate
from server.session.prompt_queue import (
    PromptQueue,
    QueuedPrompt,
    new_id,
    request_id_of,
    resolve,
)
from server.session.queue_ops import QueueKind
from server.session.queue_sync import answer_all
from server.session.rewind import rewind
from server.session.services import ActorServices
from server.session.session_modes import record_modes_change
from server.session.sinks import FrameSink
from server.session.snapshot import Running, build_snapshot
from server.session.subagents import session_subagents
from server.session.turn_launch import RunningTurn, answer_turn, launch, stop_turn
from server.store.db import SessionRecord
from server.tools.background import BackgroundTasks
from server.tools.hooks import StopHook
from server.tools.mcp import McpConnections
from server.tools.todo import TodoList

__all__ = ["PARTIAL_CHECKPOINT_INTERVAL_S", "ActorServices", "QueuedPrompt", "SessionActor", "new_id"]

log = logging.getLogger(__name__)

C = TypeVar("C")


@dataclasses.dataclass
class StopState:
    """How far the actor has got in stopping."""

    stopping: bool = False  # a Shutdown is handled: the actor reads no more commands
    server: bool = False  # the whole server shuts down (not just an eviction)
    exited: bool = False  # the actor's task ends (after a shutdown)

# One handler per mailbox command, registered with `@_handles(CommandType)` below.
_HANDLERS: dict[type[Any], Callable[[SessionActor, Any], Awaitable[None]]] = {}


def _handles(
    kind: type[C],
) -> Callable[[Callable[[SessionActor, C], Awaitable[None]]], Callable[[SessionActor, C], Awaitable[None]]]:
    def register(
        handler: Callable[[SessionActor, C], Awaitable[None]],
    ) -> Callable[[SessionActor, C], Awaitable[None]]:
        _HANDLERS[kind] = handler
        return handler

    return register


class SessionActor:
    def __init__(
        self,
        record: SessionRecord,
        conversation: list[Message],
        last_seq: int,
        services: ActorServices,
    ) -> None:
        self.id = record.id
        self.owner = record.owner
        self.cwd = Path(record.cwd)
        self.model = record.model
        self.title = record.title
        self._modes = SessionModes.of(record.mode, record.plan)
        # Persisted so a crash-restart loop can never reset them into endless retries.
        retry_limits = services.limits.retry
        self.retry = (
            RetryState.from_dict(record.retry_state, retry_limits)
            if record.retry_state
            else RetryState(retry_limits)
        )
        self.usage = UsageLedger.from_dict(record.usage)
        self.goal = GoalState.from_dict(record.goal) if record.goal else None
        self.client_hooks: dict[str, StopHook] = {}  # connection id → hook
        self.agent = services.agents.get(record.agent) or DEFAULT_AGENT
        if self.agent.model:
            self.model = self.agent.model
        self.services = services
        on_drop = services.metrics.resyncs.inc if services.metrics else None
        self.hub = EventHub(render=services.render, on_drop=on_drop)
        self.journal = Journal(
            self.id, services.writer, self.hub.publish, last_seq, conversation, services.metrics
        )
        self.conversation = Conversation(
            conversation, self.journal.persist_message, self.journal.rewrite_messages
        )
        self.mailbox: asyncio.Queue[SessionCommand] = asyncio.Queue()
        self._turn: RunningTurn | None = None
        # The running turn asks and remembers permissions here (its `PermissionGate`).
        self.permissions = PermissionGate(
            self.id,
            self.journal,
            lambda: self.hub.sinks,
            lambda: self.services.settings.permission_timeout_s,
            mode=lambda: self._modes.permission,
            plan=lambda: self._modes.plan,
            render=services.render,
            memory=dict(record.permission_memory),
        )
        self.todos = TodoList()
        self._idle_since: float | None = None
        self.stop_state = StopState()
        self.desk = PromptQueue(self)
        self.queue = self.desk.entries  # waiting prompts, front first (the running one is not here)
        self.desk.restore(record.queue or [])
        self.path_locks: dict[str, asyncio.Lock] = {}
        self.background = BackgroundTasks(on_finished=lambda task_id: self.send(TaskFinished(task_id)))
        self.subagents = session_subagents(self)  # R-T11: the `task` tool's children
        self._task: asyncio.Task[None] | None = None
        self.mcp: McpConnections | None = None  # this session's MCP servers (R-T9)
        s = services.settings
        self.files = FileHistory(
            self.id, self.cwd, services.store, s.snapshot_max_file_bytes, s.snapshot_max_session_bytes
        )

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        # The actor's task (and every task it starts) logs with this session's id as a field.
        with bind_log_context(session_id=self.id):
            self._task = asyncio.create_task(self._run(), name=f"session-{self.id}")

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The actor's own task: done once the actor has really stopped."""
        return self._task

    def send(self, command: SessionCommand) -> None:
        if self.stop_state.stopping:
            self._refuse(command)
            return
        self.mailbox.put_nowait(command)

    def _refuse(self, command: SessionCommand) -> None:
        """The actor is stopping and reads no more commands: answer what waits instead of
        letting it hang. During a server shutdown a prompt ends `server_shutting_down`."""
        reply: asyncio.Future[Any] | None = None
        match command:
            case Prompt(ack=ack) if ack is not None:
                command.reply.cancel()  # an enqueue: its caller waits for the ack (below)
                reply = ack
            case Prompt(reply=done) if self.stop_state.server:
                if not done.done():
                    refused = TurnOutcome.cancelled(EndReason.SERVER_SHUTTING_DOWN)
                    done.set_result(PromptDone("", None, refused))
                return
            case Cancel():
                if self._turn is not None:  # still honoured: the drain may be waiting on it
                    self._turn.cancel.set()
                return
            case Shutdown(reply=stopped):
                if self._task is not None:  # already stopping: done when the actor is
                    self._task.add_done_callback(lambda _t: resolve(stopped, True))
                else:
                    resolve(stopped, True)
                return
            case ResumeQueue() | AttachComplete() | Detach() | TurnFinished() | TaskFinished():
                return  # nobody waits for an answer
            case _:
                reply = command.reply
        if not reply.done():
            if self.stop_state.server:
                reply.set_exception(shutting_down("server_shutting_down: the server is stopping"))
            else:
                reply.set_exception(session_stopping(self.id))  # retryable: the next request reloads it

    @property
    def last_seq(self) -> int:
        return self.journal.seq

    @property
    def running_turn_id(self) -> str | None:
        return self._turn.id if self._turn else None

    @property
    def running(self) -> RunningTurn | None:
        return self._turn

    @property
    def queued(self) -> int:
        return len(self.queue)

    async def _run(self) -> None:
        while not self.stop_state.exited:
            cmd = await self.mailbox.get()
            try:
                await _HANDLERS[type(cmd)](self, cmd)
            except Exception:  # one bad command must not kill the session
                log.exception("session %s: command %s failed", self.id, type(cmd).__name__)
        while not self.mailbox.empty():  # arrived while it was stopping
            self._refuse(self.mailbox.get_nowait())

    # ------------------------------------------------------------------ command handlers

    @_handles(Prompt)
    async def _on_prompt(self, cmd: Prompt) -> None:
        self.desk.submit(cmd)

    @_handles(QueueOp)
    async def _on_queue_op(self, cmd: QueueOp) -> None:
        self.desk.operate(cmd)

    @_handles(ResumeQueue)
    async def _on_resume_queue(self, cmd: ResumeQueue) -> None:
        self.start_next_turn()

    @_handles(Interject)
    async def _on_interject(self, cmd: Interject) -> None:
        self.desk.interject(cmd)

    @_handles(GoalSet)
    async def _on_goal_set(self, cmd: GoalSet) -> None:
        self.set_goal(GoalState(cmd.objective, token_budget=cmd.token_budget, verify=cmd.verify))
        assert self.goal is not None
        cmd.reply.set_result(self.goal.to_dict())

    @_handles(GoalGet)
    async def _on_goal_get(self, cmd: GoalGet) -> None:
        cmd.reply.set_result(self.goal.to_dict() if self.goal else None)

    @_handles(GoalClear)
    async def _on_goal_clear(self, cmd: GoalClear) -> None:
        previous = self.goal
        self.set_goal(None)
        cmd.reply.set_result(previous.to_dict() if previous else None)

    @_handles(SetAgent)
    async def _on_set_agent(self, cmd: SetAgent) -> None:
        self.set_agent(cmd.name)
        cmd.reply.set_result(None)

    @_handles(SetModel)
    async def _on_set_model(self, cmd: SetModel) -> None:
        self.set_model(cmd.model)
        cmd.reply.set_result(None)

    @_handles(SetMode)
    async def _on_set_mode(self, cmd: SetMode) -> None:
        self.set_mode(cmd.mode)
        cmd.reply.set_result(None)

    @_handles(SetPlan)
    async def _on_set_plan(self, cmd: SetPlan) -> None:
        self.set_plan(cmd.on)
        cmd.reply.set_result(None)

    @_handles(SetTitle)
    async def _on_set_title(self, cmd: SetTitle) -> None:
        self.set_title(cmd.title)
        cmd.reply.set_result(None)

    @_handles(AttachMcp)
    async def _on_attach_mcp(self, cmd: AttachMcp) -> None:
        previous, self.mcp = self.mcp, cmd.connections
        cmd.reply.set_result(previous)  # the caller closes it, off the actor's step

    @_handles(RegisterHook)
    async def _on_register_hook(self, cmd: RegisterHook) -> None:
        self.client_hooks[cmd.hook.connection_id] = cmd.hook
        cmd.reply.set_result(None)

    @_handles(Compact)
    async def _on_compact(self, cmd: Compact) -> None:
        if self._turn is not None:
            # Compaction happens inside the running turn, before its next request.
            self._turn.ctx.compact_requested = True
            cmd.reply.set_result(None)
        else:
            job = QueuedPrompt(new_id("compact"), Prompt([], cmd.reply), kind=QueueKind.COMPACT)
            self.queue.appendleft(job)
            self.start_next_turn()

    @_handles(TaskFinished)
    async def _on_task_finished(self, cmd: TaskFinished) -> None:
        # Clients learn it now, idle or not; the model at its next sampling round (react).
        done = self.background.completion(cmd.task_id)
        self.journal.emit(done.kind, done.payload())

    @_handles(Rewind)
    async def _on_rewind(self, cmd: Rewind) -> None:
        # In the actor's step: no turn can start while files and conversation go back.
        if self._turn is not None:
            busy = SessionError(
                SessionErrorKind.BUSY, "session_busy: a turn is running; cancel it, then rewind"
            )
            cmd.reply.set_exception(busy)
            return
        try:
            cmd.reply.set_result(await rewind(self, cmd.turn_id, files=cmd.files))
        except SessionError as exc:
            cmd.reply.set_exception(exc)

    @_handles(Cancel)
    async def _on_cancel(self, cmd: Cancel) -> None:
        # ACP cancel targets the running turn; queued prompts stay queued.
        if self._turn is not None:
            self._turn.cancel.set()

    @_handles(Attach)
    async def _on_attach(self, cmd: Attach) -> None:
        sub = self.hub.subscribe(cmd.sink, self.id)
        sub.attached_seq = self.journal.seq
        # Taken in the same step as the subscription, so nothing falls between them.
        sub.snapshot = self.snapshot()
        sub.partials = [(kind, mid, text) for mid, (kind, text) in self.journal.partial.items()]
        cmd.reply.set_result(sub)

    @_handles(AttachComplete)
    async def _on_attach_complete(self, cmd: AttachComplete) -> None:
        if cmd.send_commands:
            self.send_available_commands(cmd.sink)
        for pending in self.permissions.pending.values():
            self.permissions.ask_sink(cmd.sink, pending)

    @_handles(Detach)
    async def _on_detach(self, cmd: Detach) -> None:
        self.hub.unsubscribe(cmd.sink_id)
        self.client_hooks.pop(cmd.sink_id, None)
        self.permissions.forget_sink(cmd.sink_id)

    @_handles(TurnFinished)
    async def _on_turn_finished(self, cmd: TurnFinished) -> None:
        self.finish_turn(cmd.turn_id)
        self.start_next_turn()

    @_handles(Shutdown)
    async def _on_shutdown(self, cmd: Shutdown) -> None:
        if cmd.only_if_idle and (self.idle_since() is None or not self.mailbox.empty()):
            cmd.reply.set_result(False)  # work arrived since the sweep looked
            return
        if cmd.on_stop is not None:
            cmd.on_stop()
        self.stop_state.server = cmd.server_stopping
        self.stop_state.stopping = True
        await self._shutdown(cmd.grace)
        cmd.reply.set_result(True)
        self.stop_state.exited = True

    async def _shutdown(self, grace: float) -> None:
        self.journal.stopped = True
        self.journal.cancel_checkpoints()
        await asyncio.gather(self.background.close(), self.subagents.close())
        turn = self._turn
        if turn is not None:
            await stop_turn(self, turn, grace)
            self.finish_turn(turn.id)
        # Queued prompts (and input the last turn never drained) stay queued in the store
        # and run after the restart; once that is committed their requests are answered
        # deferred — a client retrying with the same requestId later learns the end.
        deferred_entries = list(self.queue)
        self.desk.changed()
        self.queue.clear()
        self.desk.forget()
        if self.mcp is not None:
            await self.mcp.close()
        await self.services.writer.barrier()
        for queued in deferred_entries:
            deferred = PromptDone(queued.id, None, TurnOutcome.cancelled(EndReason.DEFERRED_BY_SHUTDOWN))
            answer_all((queued.command.reply, *queued.waiters), deferred)

    # ------------------------------------------------------------------ turns

    def start_next_turn(self) -> None:
        if self._turn is not None or not self.queue or queue_ops.front_is_held(self.queue):
            return
        queued = self.queue.popleft()
        self.desk.changed()  # it left the visible queue (if it was ever in it)
        self._turn = launch(self, queued, new_id("turn"))

    def finish_turn(self, turn_id: str) -> None:
        turn = self._turn
        if turn is None or turn.id != turn_id:
            return
        self._turn = None
        self.files.end_turn(turn_id)
        # Its events were refused by the database (and discarded): no success to report.
        failed = session_failed(self.id) if self.services.writer.failed(self.id) else None
        # Input that arrived after the turn's last drain is never lost: it becomes the
        # next prompt, ahead of everything queued (R-S4).
        self.queue.extendleft(answer_turn(turn, failed))

    def record_turn_end(self, turn_id: str, queued: QueuedPrompt, outcome: TurnOutcome) -> None:
        if self._turn is not None and self._turn.id == turn_id:
            if self._turn.outcome is not None:
                return
            cancelled_by = self._turn.cancelled_by
            by_user = outcome.kind is OutcomeKind.CANCELLED and outcome.reason == EndReason.USER_CANCELLED
            if cancelled_by and by_user:
                outcome = dataclasses.replace(outcome, reason=cancelled_by)  # it was not the user
            self._turn.outcome = outcome
        request_id = request_id_of(queued.command.meta)
        self.journal.emit_turn_ended(
            turn_id, queued.id, outcome, request_id, usage=self.usage, conversation=self.conversation
        )

    def end_killed_turn(self, turn_id: str, queued: QueuedPrompt) -> None:
        """The turn's task was killed (shutdown grace exceeded): its tool calls end failed
        for the clients watching and in the conversation, then the turn ends interrupted."""
        self.journal.close_dangling_tool_calls()
        interrupted = TurnOutcome(OutcomeKind.INTERRUPTED, reason=EndReason.SERVER_SHUTDOWN)
        self.record_turn_end(turn_id, queued, interrupted)

    # ------------------------------------------------------------------ after a restart

    def remember_outcome(self, request_id: str, done: PromptDone) -> None:
        """How a client's request ended before a restart: its retry learns it (R-E6)."""
        self.desk.requests.remember_outcome(request_id, done)

    def resume_queue(self) -> None:
        """Start the next queued prompt, if any (after a restart)."""
        self.send(ResumeQueue())

    # ------------------------------------------------------------------ state seen by clients

    def snapshot(self) -> dict[str, Any]:
        """The live state a (re)attaching client renders at once (R-E3)."""
        turn = self._turn
        return build_snapshot(
            session_id=self.id,
            last_seq=self.journal.seq,
            mode=self._modes.mode_id.value,
            model=self.model,
            agent=self.agent.name,
            queue=self.queue,
            pending=self.permissions.pending.values(),
            running=Running(turn.id, turn.prompt.id) if turn else None,
            goal=self.goal,
            title=self.title,
        )

    def send_available_commands(self, sink: FrameSink) -> None:
        commands = available_commands(self.services.skills)
        sink.send_notification(*self.services.render.available_commands(self.id, commands, self.journal.seq))

    def idle_since(self) -> float | None:
        """When the actor became evictable (no clients, no work), or None while it is not."""
        busy = self._turn is not None or self.queue or len(self.hub) or self.permissions.pending
        if busy or self.subagents.running_background():  # eviction would cancel a child
            self._idle_since = None
            return None
        if self._idle_since is None:
            self._idle_since = asyncio.get_running_loop().time()
        return self._idle_since

    def set_goal(self, goal: GoalState | None) -> None:
        self.goal = goal
        if self._turn is not None:
            self._turn.ctx.goal = goal  # the running turn judges the new goal
        self.journal.persist_fields({"goal": goal.to_dict() if goal else None})
        self.journal.emit(EventKind.GOAL, goal.to_dict() if goal else {"status": "cleared"})

    def set_mode(self, mode: PermissionMode) -> None:
        """`plan` turns the plan gate on; another id sets the permission mode under it."""
        self._change_modes(self._modes.select(mode))

    def set_plan(self, on: bool) -> None:
        self._change_modes(self._modes.with_plan(on))

    def _change_modes(self, new: SessionModes) -> None:
        old, self._modes = self._modes, new
        if record_modes_change(self.journal, old, new):
            self._config_changed()

    def set_model(self, model: str) -> None:
        if model == self.model:
            return
        self.model = model
        self.journal.persist_fields({"model": model})
        self._config_changed()

    def set_agent(self, name: str) -> None:
        self.agent = self.services.agents[name]
        self.model = self.agent.model or self.services.settings.model
        self.journal.persist_fields({"agent": name, "model": self.model})
        self._config_changed()

    def set_title(self, title: str) -> None:
        self.title = title
        self.journal.persist_fields({"title": title})
        now = datetime.now(UTC).isoformat()
        self.journal.emit(EventKind.SESSION_INFO, {"title": title, "updatedAt": now})

    def config_options(self) -> list[dict[str, Any]]:
        return session_config_options(
            self.services, self._modes.mode_id.value, self.model, self.agent.name, plan=self._modes.plan
        )

    def _config_changed(self) -> None:
        """Every client's pickers follow a change made by any client (or `/mode`, `/model`)."""
        self.journal.emit(EventKind.CONFIG_OPTIONS, {"configOptions": self.config_options()})

    # ------------------------------------------------------------------ permissions

    def mode(self) -> PermissionMode:
        """The mode id clients are shown (`plan` while the plan gate is on)."""
        return self._modes.mode_id

    def answer_permission(self, request_id: str, option_id: str) -> bool | None:
        """An answer to a pending permission request, from any client (WebSocket, or
        `_agentd/permission/respond` over HTTP). The first answer wins: True if this one
        did, False if the request is unknown or already answered, None for an option the
        request does not offer (a bad answer, not an answer)."""
        return self.permissions.answer(request_id, option_id)

    def permission_options(self, request_id: str) -> list[str] | None:
        """The option ids a pending request offers (None when it is not pending)."""
        return self.permissions.options(request_id)
