"""The session actor, L1 (R-S1, R-S2): one asyncio task owns one session's state.

It multiplexes its mailbox and the completion of its running turn: each mailbox command
has one handler (actor_handlers.py, looked up by type); how it stops and refuses what
arrives meanwhile is actor_stop.py. Prompts that arrive while a turn
runs wait in a FIFO queue; each `session/prompt` is answered when its own turn ends. The
running turn is a child task of the actor: it reads and appends the conversation while
it runs, and reaches everything else through the actor's `Journal` (events) and its
`PermissionGate` methods below (same event loop, no locks).

Rooms next door: the queue (queue/: its desk prompt_queue.py, entry.py, idempotency.py,
ops.py, sync.py), starting a turn (turn_launch.py), the journal of events, checkpoints and
crash repair (journal.py), local commands (local_commands.py), the permission gate
(permission_gate.py), snapshots (snapshot.py), sub-agents (subagents.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentd.agents import DEFAULT_AGENT
from agentd.core import (
    ConfigOptionsChanged,
    Conversation,
    EndReason,
    Event,
    GoalChanged,
    GoalState,
    Message,
    OutcomeKind,
    PermissionMode,
    SessionInfoChanged,
    SessionModes,
    TurnOutcome,
    UsageLedger,
    bind_log_context,
)
from agentd.session.actor.handlers import HANDLERS, on_turn_done
from agentd.session.actor.mailbox import Mailbox
from agentd.session.actor.stop import StopState, refuse
from agentd.session.command_syntax import available_commands
from agentd.session.commands import Prompt, PromptDone, ResumeQueue, SessionCommand, TaskFinished
from agentd.session.config_options import session_config_options
from agentd.session.errors import session_failed
from agentd.session.eventlog import PARTIAL_CHECKPOINT_INTERVAL_S, EventHub, Journal
from agentd.session.file_history import FileHistory
from agentd.session.permission_gate import PermissionGate
from agentd.session.queue import (
    PromptQueue,
    QueuedPrompt,
    QueueKind,
    new_id,
    request_digest_of,
    request_id_of,
)
from agentd.session.queue import ops as queue_ops
from agentd.session.replicas import LiveFeed
from agentd.session.services import ActorServices
from agentd.session.session_modes import record_modes_change
from agentd.session.sinks import FrameSink
from agentd.session.snapshot import Running, build_snapshot
from agentd.session.subagents import session_loop
from agentd.session.turn_launch import RunningTurn, answer_turn, launch
from agentd.session.wake import WakeStreak
from agentd.store import SessionRecord
from agentd.tools import BackgroundTasks, PromptHook, StopHook, TodoList

if TYPE_CHECKING:
    from agentd.session.actor.handlers import HandlersHost
    from agentd.session.actor.stop import StopHost
    from agentd.session.changes import ChangesHost
    from agentd.session.eventlog import AttachHost, RecoveryHost
    from agentd.session.local_commands import LocalCommandsHost
    from agentd.session.queue import DeskHost
    from agentd.session.rewind import RewindHost
    from agentd.session.subagents import SubagentsHost
    from agentd.session.turn_launch import KilledTurnEnder, TurnHost
    from agentd.session.wake import WakeHost

    # Only for its type: the MCP client (~140 KiB of code) loads with a session's first
    # MCP server (transport/handlers/lifecycle.py), not with every session.
    from agentd.tools import McpConnections

__all__ = ["PARTIAL_CHECKPOINT_INTERVAL_S", "ActorServices", "QueuedPrompt", "SessionActor", "new_id"]

log = logging.getLogger(__name__)

# Shortcuts past the actor's task (issue 32: each hop through it is an event-loop iteration
# and the task's step): while the actor is parked on an empty mailbox, its next step would
# only look at its state and do what the caller can do now, in the actor's context — queue
# (and start) a prompt for an idle session in the sender's step, end a turn in the turn's own
# task. Anything else, or an actor that is busy, goes through the mailbox as before, so there
# is still one order of commands per session. False: always the mailbox (tests run both).
SHORTCUTS = True


class _TransientFeed:
    """A transient event's publish when the process has a broker (several replicas): the
    `LiveFeed` (the hub, then the broker), stamped with the last durable seq published
    before it — the hub's `seq`. Durable events go to the hub directly, and so do
    transient ones while there is no broker (the journal asks `services.live`)."""

    __slots__ = ("_feed", "_hub")

    def __init__(self, hub: EventHub, feed: LiveFeed) -> None:
        self._hub = hub
        self._feed = feed

    def __call__(self, event: Event) -> None:
        self._feed.seq = self._hub.seq
        self._feed(event)


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
        self.usage = UsageLedger.from_dict(record.usage)
        self.goal = GoalState.from_dict(record.goal) if record.goal else None
        self.client_hooks: dict[str, StopHook] = {}  # connection id → hook (Stop)
        self.client_subagent_hooks: dict[str, StopHook] = {}  # connection id → hook (SubagentStop)
        self.client_prompt_hooks: dict[str, PromptHook] = {}  # connection id → hook (UserPromptSubmit)
        self.agent = services.agents.get(record.agent) or DEFAULT_AGENT
        if self.agent.model:
            self.model = self.agent.model
        self.services = services
        on_drop = services.metrics.resyncs.inc if services.metrics else None
        self.hub = EventHub(render=services.render, on_drop=on_drop)
        self.hub.seq = last_seq
        # Its own clients first; transient events also to other replicas' (through the broker).
        feed = LiveFeed(self.id, self.hub.publish, lambda: services.live, last_seq)
        transient = _TransientFeed(self.hub, feed)
        self.journal = Journal(
            self.id,
            services.writer,
            self.hub.publish,
            last_seq,
            conversation,
            services.metrics,
            transient=transient,
            broker=services,
        )
        self.conversation = Conversation(
            conversation, self.journal.persist_message, self.journal.rewrite_messages
        )
        self.mailbox = Mailbox()
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
        self.background = BackgroundTasks(
            on_finished=lambda task_id: self.send(TaskFinished(task_id)),
            on_started=lambda start: self.journal.emit(start),
        )
        self.wake = WakeStreak()  # turns started by finished tasks since the last user prompt
        # Retry buckets (as persisted), what the model was told, the sub-agents (R-T11).
        self.loop_state = session_loop(self, record.retry_state)
        self._task: asyncio.Task[None] | None = None
        self._context = contextvars.copy_context()  # the actor task's, once started
        self.mcp: McpConnections | None = None  # this session's MCP servers (R-T9)
        s = services.settings
        self.files = FileHistory(
            self.id, self.cwd, services.store, s.snapshot_max_file_bytes, s.snapshot_max_session_bytes
        )

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        # The actor's task (and every task it starts) logs with this session's id as a field.
        with bind_log_context(session_id=self.id):
            self._context = contextvars.copy_context()  # kept: the shortcuts run in it
        self._task = asyncio.create_task(self._run(), name=f"session-{self.id}", context=self._context)

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The actor's own task: done once the actor has really stopped."""
        return self._task

    def send(self, command: SessionCommand) -> None:
        if self.stop_state.stopping:
            refuse(self, command)
            return
        if type(command) is Prompt and self._turn is None and self.mailbox.parked and SHORTCUTS:
            self._context.run(self._submit_now, command)  # what the actor's next step would do
            return
        self.mailbox.put_nowait(command)

    def _submit_now(self, command: Prompt) -> None:
        try:
            self.desk.submit(command)
        except Exception:  # as in `_handle`: one bad command must not kill the session
            log.exception("session %s: command Prompt failed", self.id)

    def turn_finished(self, turn_id: str) -> None:
        """The turn's task, at its very end (recorded, flushed): if the actor is parked, the
        turn ends here — its prompt answered, the next one started — one hop sooner than
        the actor would, woken by the task's completion."""
        turn = self._turn
        if turn is not None and turn.id == turn_id and self.mailbox.parked and SHORTCUTS:
            turn.task.remove_done_callback(self.mailbox.wake)  # nothing left to wake it for
            self._context.run(self._end_turn, turn)

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
    def plan_mode(self) -> bool:
        return self._modes.plan

    @property
    def queued(self) -> int:
        return len(self.queue)

    async def _run(self) -> None:
        # The next command or the running turn's end, whichever comes first: a turn's end
        # is its task completing, handled here, never a message the turn sends its actor.
        # One future completed by either side (mailbox.py): the mailbox's `put_nowait`, or
        # the done-callback added once to each turn's task.
        # (each turn's task wakes the mailbox when done: `start_next_turn` adds the callback)
        mailbox = self.mailbox
        commands = mailbox.items
        try:
            while not self.stop_state.exited:
                turn = self._turn
                if turn is not None and turn.task.done():
                    self._turn_done(turn)
                elif commands:
                    await self._handle(commands.popleft())
                else:
                    await mailbox.wait()
        finally:
            mailbox.forget_waiter()
        while not mailbox.empty():  # arrived while it was stopping
            refuse(self, mailbox.get_nowait())

    async def _handle(self, cmd: SessionCommand) -> None:
        try:
            await HANDLERS[type(cmd)](self, cmd)
        except Exception:  # one bad command must not kill the session
            log.exception("session %s: command %s failed", self.id, type(cmd).__name__)

    def _turn_done(self, turn: RunningTurn) -> None:
        if not turn.task.cancelled() and (exc := turn.task.exception()) is not None:
            # The runners record every end themselves (turn_launch.py); this is a bug in that.
            log.error("session %s: turn %s ended unrecorded", self.id, turn.id, exc_info=exc)
        self._end_turn(turn)

    def _end_turn(self, turn: RunningTurn) -> None:
        try:
            on_turn_done(self, turn.id)
        except Exception:  # the session goes on
            log.exception("session %s: ending turn %s failed", self.id, turn.id)
            if self._turn is turn:  # or the loop would find it done again, forever
                self._turn = None

    # ------------------------------------------------------------------ turns

    def start_next_turn(self) -> None:
        if self._turn is not None or not self.queue or queue_ops.front_is_held(self.queue):
            return
        queued = self.queue.popleft()
        self.desk.changed()  # it left the visible queue (if it was ever in it)
        self.wake.turn_started(queued.command.source)
        self._turn = turn = launch(self, queued, new_id("turn"))
        turn.task.add_done_callback(self.mailbox.wake)  # its end wakes the actor (or `turn_finished`)

    def finish_turn(self, turn_id: str) -> None:
        turn = self._turn
        if turn is None or turn.id != turn_id:
            return
        self._turn = None
        self.files.end_turn(turn_id)
        # It compacted as asked (or nothing was asked): its job, if one waits, goes.
        if not turn.ctx.compact_requested and self.queue:
            self.desk.turn_compacted(turn_id)
        # Its events were refused by the database (and discarded): no success to report.
        failed = session_failed(self.id) if self.services.writer.failed(self.id) else None
        # Input that arrived after the turn's last drain is never lost: it becomes the
        # next prompt, ahead of everything queued (R-S4).
        self.queue.extendleft(answer_turn(turn, failed))

    def record_turn_end(self, turn_id: str, queued: QueuedPrompt, outcome: TurnOutcome) -> None:
        turn = self._turn
        if turn is not None and turn.id == turn_id:
            if turn.outcome is not None:
                return
            cancelled_by = turn.cancelled_by
            by_user = outcome.kind is OutcomeKind.CANCELLED and outcome.reason == EndReason.USER_CANCELLED
            if cancelled_by and by_user:
                outcome = dataclasses.replace(outcome, reason=cancelled_by)  # it was not the user
            turn.outcome = outcome
        else:
            turn = None
        if queued.kind in (QueueKind.PROMPT, QueueKind.BANG):  # what the next turn opens with
            self.loop_state.turn_ended(outcome)
        meta = queued.command.meta  # (most prompts carry none: no look-ups then)
        ended = self.journal.emit_turn_ended(
            turn_id,
            queued.id,
            outcome,
            request_id_of(meta) if meta else None,
            usage=self.usage,
            conversation=self.conversation,
            request_digest=request_digest_of(meta) if meta else None,
        )
        if turn is not None:
            turn.ended = ended  # its prompt's answer is rendered from it

    def end_killed_turn(self, turn_id: str, queued: QueuedPrompt) -> None:
        """The turn's task was killed (shutdown grace exceeded): its tool calls end failed
        for the clients watching and in the conversation, then the turn ends interrupted."""
        self.journal.close_dangling_tool_calls()
        interrupted = TurnOutcome(OutcomeKind.INTERRUPTED, reason=EndReason.SERVER_SHUTDOWN)
        self.record_turn_end(turn_id, queued, interrupted)

    # ------------------------------------------------------------------ after a restart

    def remember_outcome(self, request_id: str, done: PromptDone, digest: str | None = None) -> None:
        """How a client's request ended before a restart: its retry learns it (R-E6)."""
        self.desk.requests.remember_outcome(request_id, done, digest)

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
        if busy or self.loop_state.subagents.running_background():  # eviction would cancel a child
            self._idle_since = None
            return None
        if self._idle_since is None:
            self._idle_since = asyncio.get_running_loop().time()
        return self._idle_since

    def keeps_processes(self) -> bool:
        """Whether unloading the actor would stop processes it runs (a background shell
        task, MCP servers): such an idle actor waits the long grace (session/eviction.py)."""
        return bool(self.background.running()) or (self.mcp is not None and bool(self.mcp.specs))

    def set_goal(self, goal: GoalState | None) -> None:
        self.goal = goal
        if self._turn is not None:
            self._turn.ctx.goal = goal  # the running turn judges the new goal
        self.journal.persist_fields({"goal": goal.to_dict() if goal else None})
        self.journal.emit(GoalChanged(goal.to_dict() if goal else None))

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
        self.journal.emit(SessionInfoChanged(title, now))

    def config_options(self) -> list[dict[str, Any]]:
        return session_config_options(
            self.services, self._modes.mode_id.value, self.model, self.agent.name, plan=self._modes.plan
        )

    def _config_changed(self) -> None:
        """Every client's pickers follow a change made by any client (or `/mode`, `/model`)."""
        self.journal.emit(ConfigOptionsChanged(self.config_options()))

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

    def permission_resolution(self, request_id: str) -> asyncio.Future[int] | None:
        """Taken before answering (see `permission_saved`)."""
        return self.permissions.resolution(request_id)

    async def permission_saved(self, resolution: asyncio.Future[int] | None) -> None:
        """Return once the winning answer is committed; else a retryable error."""
        await self.permissions.saved(resolution)

    def cancel_permission(self, request_id: str) -> bool:
        """A `cancelled` answer to a pending permission request (first answer wins): True
        if it was pending and is now refused."""
        return self.permissions.cancel(request_id)

    def permission_options(self, request_id: str) -> list[str] | None:
        """The option ids a pending request offers (None when it is not pending)."""
        return self.permissions.options(request_id)


if TYPE_CHECKING:

    def _is_every_host(actor: SessionActor) -> tuple[object, ...]:
        """The actor is each narrow view its collaborators take of it: mypy checks these
        assignments, so a view cannot drift from the actor (nothing runs this)."""
        handlers_host: HandlersHost = actor
        stop_host: StopHost = actor
        killed_turn_ender: KilledTurnEnder = actor
        turn_host: TurnHost = actor
        local_commands_host: LocalCommandsHost = actor
        rewind_host: RewindHost = actor
        changes_host: ChangesHost = actor
        desk_host: DeskHost = actor
        wake_host: WakeHost = actor
        subagents_host: SubagentsHost = actor
        attach_host: AttachHost = actor
        recovery_host: RecoveryHost = actor
        return (
            handlers_host,
            stop_host,
            killed_turn_ender,
            turn_host,
            local_commands_host,
            rewind_host,
            changes_host,
            desk_host,
            wake_host,
            subagents_host,
            attach_host,
            recovery_host,
        )
