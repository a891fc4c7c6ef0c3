"""The session actor, L1 (R-S1, R-S2): one asyncio task owns one session's state.

It multiplexes its mailbox and the completion of its running turn. Prompts that arrive
while a turn runs wait in a FIFO queue; each `session/prompt` is answered when its own
turn ends. The running turn is a child task of the actor: it reads and appends the
conversation while it runs, and reaches everything else through the actor's
`EventSink` / `PermissionGate` methods below (same event loop, no locks).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from protocol.acp import ContentBlock, TextContent, dump
from protocol.jsonrpc import ErrorCode, RpcError
from server.agents import DEFAULT_AGENT, AgentDefinition
from server.config import PermissionMode, Settings
from server.core.conversation import Message, ToolCall
from server.core.errors import ErrorKind, HarnessError
from server.core.events import Event, EventKind
from server.core.provider import Provider
from server.loop.budget import BudgetLimits
from server.loop.context import Conversation, Interjection, Lane, PermissionAnswer, TurnContext
from server.loop.goal import GoalState
from server.loop.limits import LoopLimits
from server.loop.outcome import OutcomeKind, TurnOutcome, stop_reason
from server.loop.prompt import prompt_images, prompt_text
from server.loop.react import run_compaction
from server.loop.repair import INTERRUPTED_RESULT, repair_dangling_tool_calls
from server.loop.retry import RetryState
from server.loop.structured import OutputSchema
from server.loop.toolrun import execute_tool_round
from server.loop.turn import run_compaction_job, run_turn
from server.loop.turn_state import TurnState
from server.loop.usage import Price, UsageLedger
from server.metrics import Metrics
from server.overload import session_failed, session_stopping
from server.session import queue_ops
from server.session.commands import (
    Attach,
    AttachComplete,
    AttachMcp,
    Cancel,
    Compact,
    Detach,
    EnqueueAck,
    GoalClear,
    GoalGet,
    GoalSet,
    Interject,
    InterjectResult,
    Prompt,
    PromptDone,
    QueueOp,
    RegisterHook,
    ResumeQueue,
    SessionCommand,
    SetAgent,
    SetMode,
    SetModel,
    Shutdown,
    TurnFinished,
)
from server.session.config_options import config_options, model_choices
from server.session.eventlog import EventWriter
from server.session.hub import EventHub, FrameSink
from server.session.local_commands import (
    Skill,
    available_commands,
    expand_skill,
    help_text,
    parse_bang,
    parse_local,
)
from server.session.permission_gate import PendingPermission, PermissionGate
from server.session.queue_sync import (
    AfterCommit,
    LeftQueue,
    QueuedBytes,
    QueueSync,
    answer_all,
    entry_size,
)
from server.store.db import SessionRecord
from server.tools.background import BackgroundTasks
from server.tools.base import Tool
from server.tools.client_bridge import ClientBridge
from server.tools.hooks import HooksConfig, StopHook
from server.tools.mcp import McpConnections
from server.tools.permissions import Remembered
from server.tools.todo import TodoList

log = logging.getLogger(__name__)


def _output_schema(meta: dict[str, Any], agent: AgentDefinition) -> OutputSchema | None:
    schema = meta.get("outputSchema", agent.output_schema)
    return OutputSchema.check(schema) if isinstance(schema, dict) else None


def _describe_goal(goal: GoalState | None) -> str:
    if goal is None:
        return "No goal is set. Use /goal <objective> to set one."
    text = f"Goal ({goal.status.value}): {goal.objective}"
    if goal.pause_reason:
        text += f"\nPaused: {goal.pause_reason}"
    if goal.user_action:
        text += f"\nNeeded from you: {goal.user_action}"
    return text


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


@dataclass
class QueuedPrompt:
    id: str
    command: Prompt
    kind: str = "prompt"  # "prompt" | "compact" | "local"
    # Repeats of the same `_meta.agentd.requestId` wait on the same turn (idempotency).
    waiters: list[asyncio.Future[PromptDone]] = field(default_factory=list)
    result: PromptDone | None = None
    version: int = 1
    owner: str = "local"
    last_editor: str = "local"
    held_until: float | None = None
    send_now: bool = False

    @property
    def text(self) -> str:
        return prompt_text(self.command.blocks)

    def set_text(self, text: str) -> None:
        self.command.blocks = [TextContent(text=text)]


MAX_REMEMBERED_REQUESTS = 1000
# R-E1: the text of a message still streaming reaches the store at most this often.
PARTIAL_CHECKPOINT_INTERVAL_S = 1.0
# Deferred by a graceful shutdown: the prompt stays queued and runs after the restart.
DEFERRED_BY_SHUTDOWN = "deferred_by_shutdown"


def request_id_of(meta: dict[str, Any]) -> str | None:
    """The client's idempotency key, `_meta.agentd.requestId` (R-S3)."""
    value = meta.get("requestId")
    return value if isinstance(value, str) and value else None


CONTENT_BLOCKS: TypeAdapter[list[ContentBlock]] = TypeAdapter(list[ContentBlock])


@dataclass
class RunningTurn:
    id: str
    prompt: QueuedPrompt
    task: asyncio.Task[None]
    ctx: TurnContext
    outcome: TurnOutcome | None = None
    cancelled_by: str | None = None  # who set `cancel` when it was not a user (e.g. shutdown)

    @property
    def cancel(self) -> asyncio.Event:
        return self.ctx.cancel


@dataclass
class ActorServices:
    settings: Settings
    writer: EventWriter
    provider: Provider
    tools: dict[str, Tool]
    hooks: HooksConfig = field(default_factory=HooksConfig)
    fallbacks: list[Lane] = field(default_factory=list)  # the provider chain after `provider`
    agents: dict[str, AgentDefinition] = field(default_factory=lambda: {DEFAULT_AGENT.name: DEFAULT_AGENT})

    limits: LoopLimits = field(default_factory=LoopLimits)  # every loop constant in force
    skills: dict[str, Skill] = field(default_factory=dict)
    metrics: Metrics | None = None
    queued_bytes: QueuedBytes = field(default_factory=QueuedBytes)  # per principal, all sessions

    def budget_limits(self) -> BudgetLimits:
        return self.limits.budget

    def prices(self) -> dict[str, Price]:
        return {
            m: Price(p.input, p.output, p.cache_read, p.cache_write) for m, p in self.settings.prices.items()
        }


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
        self._mode = PermissionMode(record.mode)
        self._memory: dict[str, str] = dict(record.permission_memory)
        # Persisted so a crash-restart loop can never reset them into endless retries.
        retry_limits = services.limits.retry
        self._retry = (
            RetryState.from_dict(record.retry_state, retry_limits)
            if record.retry_state
            else RetryState(retry_limits)
        )
        self.usage = UsageLedger.from_dict(record.usage)
        self._goal = GoalState.from_dict(record.goal) if record.goal else None
        self._client_hooks: dict[str, StopHook] = {}  # connection id → hook
        self.agent = services.agents.get(record.agent) or DEFAULT_AGENT
        if self.agent.model:
            self.model = self.agent.model
        self._services = services
        self._seq = last_seq
        self._messages = conversation
        self.conversation = Conversation(self._messages, self._persist_message, self._rewrite_messages)
        self.hub = EventHub(on_drop=services.metrics.resyncs.inc if services.metrics else None)
        self.mailbox: asyncio.Queue[SessionCommand] = asyncio.Queue()
        self._queue: deque[QueuedPrompt] = deque()
        self._turn: RunningTurn | None = None
        self._gate = PermissionGate(
            self.id,
            lambda kind, payload: self.emit(kind, payload),
            self.flushed,
            lambda: self.hub.sinks,
            lambda: self._services.settings.permission_timeout_s,
        )
        self._permissions: dict[str, PendingPermission] = self._gate.pending
        self._todos = TodoList()
        self._partial: dict[str, tuple[EventKind, str]] = {}  # in-flight message id → text so far
        self._requests: dict[str, QueuedPrompt] = {}  # client requestId → its prompt (R-S3)
        # requestId → how its prompt ended in an earlier run of the server (from the log).
        self._answered: dict[str, PromptDone] = {}
        self._checkpointed = False  # the store holds a partial-text checkpoint
        self._checkpoint_timer: asyncio.TimerHandle | None = None
        self._last_checkpoint = float("-inf")
        self._idle_since: float | None = None
        self._stopped = False
        self._sync = QueueSync(services.queued_bytes)  # what clients and the store were told
        self._after_commit = AfterCommit(services.writer.barrier)
        self._restore_queue(record.queue or [])
        self._path_locks: dict[str, asyncio.Lock] = {}
        self._background = BackgroundTasks()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._server_stopping = False  # the whole server shuts down (not just an eviction)
        self._open_tool_calls: dict[str, None] = {}  # toolCallIds announced and not finished
        self._tool_call_ids = {c.id for m in conversation for c in m.tool_calls}  # used on the wire
        self._mcp: McpConnections | None = None  # this session's MCP servers (R-T9)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"session-{self.id}")

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The actor's own task: done once the actor has really stopped."""
        return self._task

    def send(self, command: SessionCommand) -> None:
        if self._stopped or self._closing:
            self._refuse(command)
            return
        self.mailbox.put_nowait(command)

    def _refuse(self, command: SessionCommand) -> None:
        """The actor is stopping and reads no more commands: answer what waits instead of
        letting it hang. During a server shutdown a prompt ends `server_shutting_down`."""
        match command:
            case Prompt(ack=ack) if ack is not None:
                command.reply.cancel()  # an enqueue: its caller waits for the ack (below)
            case Prompt(reply=reply) if self._server_stopping:
                if not reply.done():
                    reply.set_result(PromptDone("", None, TurnOutcome.cancelled("server_shutting_down")))
                return
            case Cancel():
                if self._turn is not None:  # still honoured: the drain may be waiting on it
                    self._turn.cancel.set()
                return
            case Shutdown(reply=reply):
                if self._task is not None:  # already stopping: done when the actor is
                    self._task.add_done_callback(lambda _t: reply.done() or reply.set_result(True))
                elif not reply.done():
                    reply.set_result(True)
                return
        reply = getattr(command, "ack", None) or getattr(command, "reply", None)
        if isinstance(reply, asyncio.Future) and not reply.done():
            if self._server_stopping:
                error = RpcError(ErrorCode.SHUTTING_DOWN, "server_shutting_down: the server is stopping")
            else:
                error = session_stopping(self.id)  # retryable: the next request reloads it
            reply.set_exception(error)

    @property
    def last_seq(self) -> int:
        return self._seq

    @property
    def running_turn_id(self) -> str | None:
        return self._turn.id if self._turn else None

    @property
    def queued(self) -> int:
        return len(self._queue)

    async def _run(self) -> None:
        while True:
            cmd = await self.mailbox.get()
            try:
                if await self._handle(cmd):
                    break
            except Exception:  # one bad command must not kill the session
                log.exception("session %s: command %s failed", self.id, type(cmd).__name__)
        while not self.mailbox.empty():  # arrived while it was stopping
            self._refuse(self.mailbox.get_nowait())

    async def _handle(self, cmd: SessionCommand) -> bool:
        """Handle one command; True when the actor should stop."""
        match cmd:
            case Prompt():
                if self._repeat_of_known_request(cmd):
                    return False
                if (refusal := self._queue_refusal(cmd)) is not None:
                    self._refuse_prompt(cmd, refusal)
                    return False
                queued = QueuedPrompt(
                    new_id("prompt"),
                    cmd,
                    owner=cmd.principal,
                    last_editor=cmd.principal,
                    send_now=cmd.send_now,
                )
                request_id = request_id_of(cmd.meta)
                if request_id is not None:
                    self._requests[request_id] = queued
                    while len(self._requests) > MAX_REMEMBERED_REQUESTS:
                        self._requests.pop(next(iter(self._requests)))
                if cmd.send_now:
                    queue_ops.insert_send_now(self._queue, queued)
                    # send_now cancels the running turn — unless a goal is active: then it
                    # simply runs next (R-S3).
                    if self._turn is not None and not (self._goal is not None and self._goal.active):
                        self._turn.ctx.cancel.set()
                else:
                    self._queue.append(queued)
                self._start_next_turn()
                self._queue_changed()  # only if it really waits: one that started is no change
                if cmd.ack is not None:
                    self._ack(cmd.ack, queued)
            case QueueOp():
                try:
                    answer = self._queue_op(cmd)
                except RpcError as exc:  # refused (a limit): nothing changed
                    cmd.reply.set_exception(exc)
                    return False
                # Answered once the change is committed (a crash cannot undo what was said).
                self._after_commit.then(lambda: cmd.reply.done() or cmd.reply.set_result(answer))
            case ResumeQueue():
                self._start_next_turn()
            case Interject():
                self._interject(cmd)
            case GoalSet(objective=objective, token_budget=budget, verify=verify, reply=reply):
                self._goal = GoalState(objective, token_budget=budget, verify=verify)
                self._goal_changed()
                reply.set_result(self._goal.to_dict())
            case GoalGet(reply=reply):
                reply.set_result(self._goal.to_dict() if self._goal else None)
            case GoalClear(reply=reply):
                previous, self._goal = self._goal, None
                self._goal_changed()
                reply.set_result(previous.to_dict() if previous else None)
            case SetAgent(name=name, reply=reply):
                self.agent = self._services.agents[name]
                self.model = self.agent.model or self._services.settings.model
                self._persist_fields({"agent": name, "model": self.model})
                self._config_changed()
                reply.set_result(None)
            case SetModel(model=model, reply=reply):
                self._set_model(model)
                reply.set_result(None)
            case AttachMcp(connections=connections, reply=reply):
                previous, self._mcp = self._mcp, connections
                reply.set_result(previous)  # the caller closes it, off the actor's step
            case RegisterHook(hook=hook, reply=reply):
                self._client_hooks[hook.connection_id] = hook
                reply.set_result(None)
            case Compact(reply=reply):
                if self._turn is not None:
                    # Compaction happens inside the running turn, before its next request.
                    self._turn.ctx.compact_requested = True
                    reply.set_result(None)
                else:
                    queued = QueuedPrompt(new_id("compact"), Prompt([], reply), kind="compact")  # type: ignore[arg-type]
                    self._queue.appendleft(queued)
                    self._start_next_turn()
            case Cancel():
                # ACP cancel targets the running turn; queued prompts stay queued.
                if self._turn is not None:
                    self._turn.cancel.set()
            case SetMode(mode=mode, reply=reply):
                self._set_mode(mode)
                reply.set_result(None)
            case Attach(sink=sink, reply=reply):
                sub = self.hub.subscribe(sink, self.id)
                sub.attached_seq = self._seq
                # Taken in the same step as the subscription, so nothing falls between them.
                sub.snapshot = self.snapshot()
                sub.partials = [(kind, mid, text) for mid, (kind, text) in self._partial.items()]
                reply.set_result(sub)
            case AttachComplete(sink=sink, send_commands=send_commands):
                if send_commands:
                    self.send_available_commands(sink)
                for pending in self._permissions.values():
                    self._ask_sink(sink, pending)
            case Detach(sink_id=sink_id):
                self.hub.unsubscribe(sink_id)
                self._client_hooks.pop(sink_id, None)
                for pending in self._permissions.values():
                    task = pending.asked.pop(sink_id, None)
                    if task:
                        task.cancel()
            case TurnFinished(turn_id=turn_id):
                self._finish_turn(turn_id)
                self._start_next_turn()
            case Shutdown(grace=grace, reply=reply, only_if_idle=only_if_idle, on_stop=on_stop):
                if only_if_idle and (self.idle_since() is None or not self.mailbox.empty()):
                    reply.set_result(False)  # work arrived since the sweep looked
                    return False
                if on_stop is not None:
                    on_stop()
                self._server_stopping = cmd.server_stopping
                self._stopped = True
                await self._shutdown(grace)
                reply.set_result(True)
                return True
        return False

    async def _shutdown(self, grace: float) -> None:
        self._closing = True
        if self._checkpoint_timer is not None:
            self._checkpoint_timer.cancel()
            self._checkpoint_timer = None
        await self._background.close()
        turn = self._turn
        if turn is not None:
            # Shutdown is the first budget gate: the turn stops at its next round. If it
            # does not finish within the grace period it is cancelled, then killed.
            turn.ctx.budget.request_shutdown()
            for step in ("gate", "cancel"):
                try:
                    await asyncio.wait_for(asyncio.shield(turn.task), timeout=grace / 2)
                    break
                except TimeoutError:
                    if step == "gate":
                        turn.cancelled_by = "server_shutdown"
                        turn.cancel.set()
            else:
                turn.task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await turn.task
                if turn.outcome is None:  # a local command or `!cmd` has no handler of its own
                    self._end_killed_turn(turn.id, turn.prompt)
            self._finish_turn(turn.id)
        # Queued prompts (and input the last turn never drained) stay queued in the store
        # and run after the restart; once that is committed their requests are answered
        # deferred — a client retrying with the same requestId later learns the end.
        deferred_entries = list(self._queue)
        self._queue_changed()
        self._queue.clear()
        self._sync.forget()
        if self._mcp is not None:
            await self._mcp.close()
        await self._services.writer.barrier()
        for queued in deferred_entries:
            deferred = PromptDone(queued.id, None, TurnOutcome.cancelled(DEFERRED_BY_SHUTDOWN))
            answer_all((queued.command.reply, *queued.waiters), deferred)

    # ------------------------------------------------------------------ turns

    def _start_next_turn(self) -> None:
        if self._turn is not None or not self._queue or queue_ops.front_is_held(self._queue):
            return
        queued = self._queue.popleft()
        self._queue_changed()  # it left the visible queue (if it was ever in it)
        cmd = queued.command
        turn_id = new_id("turn")
        local = parse_local(prompt_text(cmd.blocks)) if queued.kind == "prompt" else None
        bang = parse_bang(prompt_text(cmd.blocks)) if queued.kind == "prompt" else None
        expanded = (
            expand_skill(prompt_text(cmd.blocks), self._services.skills) if queued.kind == "prompt" else None
        )
        if local is not None:
            queued.kind = "local"
        elif bang is not None:
            queued.kind = "bang"
        elif expanded is not None:
            cmd.blocks = [TextContent(text=expanded)]
        if queued.kind in ("prompt", "local", "bang"):
            text = prompt_text(cmd.blocks)
            self.emit(
                EventKind.USER_MESSAGE,
                {
                    "messageId": new_id("user"),
                    "promptId": queued.id,
                    "content": [dump(b) for b in cmd.blocks],
                },
                origin=cmd.origin,
            )
            if self.title is None:
                # Control characters (NUL above all) have no place in a title column.
                printable = "".join(ch if ch.isprintable() else " " for ch in text)
                self.title = " ".join(printable.split())[:80] or None
                self._services.writer.submit(self.id, session_fields={"title": self.title})
                if self.title:
                    now = datetime.now(UTC).isoformat()
                    self.emit(EventKind.SESSION_INFO, {"title": self.title, "updatedAt": now})
            if local is None and bang is None:
                self.conversation.append(Message.user(text, prompt_images(cmd.blocks)))
        started: dict[str, Any] = {"turnId": turn_id, "promptId": queued.id, "kind": queued.kind}
        if (request_id := request_id_of(cmd.meta)) is not None:
            started["requestId"] = request_id  # so a restart can still answer its retry
        self.emit(EventKind.TURN_STARTED, started)
        settings = self._services.settings
        ctx = TurnContext(
            session_id=self.id,
            turn_id=turn_id,
            cwd=self.cwd,
            provider=self._services.provider,
            model=self.model,
            system_prompt=self.agent.system_prompt or settings.system_prompt,
            tools={**self.agent.select_tools(self._services.tools), **(self._mcp.tools if self._mcp else {})},
            conversation=self.conversation,
            events=self,
            permissions=self,
            cancel=asyncio.Event(),
            todos=self._todos,
            background=self._background,
            output_schema=_output_schema(cmd.meta, self.agent),
            max_turns=self.agent.max_turns if self.agent.max_turns is not None else settings.max_turns,
            path_locks=self._path_locks,
            pre_tool_hooks=list(self._services.hooks.pre_tool),
            context_window=settings.context_window_for(self.model),
            fallbacks=list(self._services.fallbacks),
            prices=self._services.prices(),
            retry=self._retry,
            persist=self._persist_fields,
            budget_limits=self._services.budget_limits(),
            completion=self.agent.completion,
            goal=self._goal,
            goal_lanes=self._goal_lanes(),
            limits=self._services.limits,
            stop_hooks=[*self._services.hooks.stop, *self._client_hooks.values()],
            used_tool_call_ids=self._tool_call_ids,
            client=self._client_bridge(cmd.origin),
        )
        if local is not None:
            command, arg = local
            task = asyncio.create_task(
                self._run_local(ctx, queued, command.name, arg), name=f"local-{turn_id}"
            )
            self._turn = RunningTurn(turn_id, queued, task, ctx)
            return
        if bang is not None:
            task = asyncio.create_task(self._run_bang(ctx, queued, bang), name=f"bang-{turn_id}")
            self._turn = RunningTurn(turn_id, queued, task, ctx)
            return
        task = asyncio.create_task(self._run_turn(ctx, queued), name=f"turn-{turn_id}")
        self._turn = RunningTurn(turn_id, queued, task, ctx)

    async def _run_turn(self, ctx: TurnContext, queued: QueuedPrompt) -> None:
        try:
            try:
                outcome = await (run_compaction_job(ctx) if queued.kind == "compact" else run_turn(ctx))
            except asyncio.CancelledError:
                self._end_killed_turn(ctx.turn_id, queued)
                raise
            except Exception as exc:  # a bug below the loop's own guard: end the turn readably
                log.exception("turn %s crashed", ctx.turn_id)
                err = HarnessError(ErrorKind.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
                outcome = TurnOutcome.failed(err)
            self._record_turn_end(ctx.turn_id, queued, outcome)
            # The response to session/prompt must come after every update of its turn.
            await self.flushed()
        finally:
            # Whatever happened, the actor must learn the turn is over (or the prompt hangs).
            self.send(TurnFinished(ctx.turn_id))

    def _client_bridge(self, origin: str | None) -> ClientBridge | None:
        """The prompting client's files and terminal, if it offered them (R-T6); a prompt
        from no attached client (HTTP, a restart) works on the server's own."""
        sink = next((s for s in self.hub.sinks if s.id == origin), None) if origin else None
        caps = getattr(sink, "client_capabilities", None)
        request = getattr(sink, "request", None)
        if caps is None or request is None:
            return None
        bridge = ClientBridge(
            request,
            self.id,
            can_read=caps.fs.read_text_file,
            can_write=caps.fs.write_text_file,
            can_terminal=caps.terminal,
        )
        return bridge if bridge.can_read or bridge.can_write or bridge.can_terminal else None

    def snapshot(self) -> dict[str, Any]:
        """The live state a (re)attaching client renders at once (R-E3)."""
        turn = self._turn
        snap: dict[str, Any] = {
            "sessionId": self.id,
            "status": "running" if turn else "idle",
            "lastSeq": self._seq,
            "mode": self._mode.value,
            "model": self.model,
            "agent": self.agent.name,
            "queue": [
                {"promptId": q.id, "kind": q.kind, "version": q.version, "text": q.text}
                for q in self._queue
            ],
            "pendingPermissions": [
                {"requestId": p.id, "toolCall": p.tool_call, "options": p.options}
                for p in self._permissions.values()
            ],
        }
        if turn is not None:
            snap["turnId"] = turn.id
            snap["promptId"] = turn.prompt.id
        if self._goal is not None:
            snap["goal"] = self._goal.to_dict()
        if self.title:
            snap["title"] = self.title
        return snap

    def send_available_commands(self, sink: FrameSink) -> None:
        sink.send_notification(
            "session/update",
            {
                "sessionId": self.id,
                "update": {
                    "sessionUpdate": "available_commands_update",
                    "availableCommands": available_commands(self._services.skills),
                },
                "_meta": {"agentd": {"seq": self._seq, "transient": True}},
            },
        )

    def idle_since(self) -> float | None:
        """When the actor became evictable (no clients, no work), or None while it is not."""
        if self._turn is not None or self._queue or len(self.hub) or self._permissions:
            self._idle_since = None
            return None
        if self._idle_since is None:
            self._idle_since = asyncio.get_running_loop().time()
        return self._idle_since

    def _goal_changed(self) -> None:
        if self._turn is not None:
            self._turn.ctx.goal = self._goal  # the running turn judges the new goal
        self._persist_fields({"goal": self._goal.to_dict() if self._goal else None})
        self.emit(EventKind.GOAL, self._goal.to_dict() if self._goal else {"status": "cleared"})

    def _goal_lanes(self) -> list[tuple[Provider, str]]:
        small = self._services.settings.goal_evaluator_model
        lanes = [(self._services.provider, small)] if small and small != self.model else []
        return [*lanes, (self._services.provider, self.model)]

    async def _run_local(self, ctx: TurnContext, queued: QueuedPrompt, name: str, arg: str) -> None:
        """A builtin command: answer locally, never sample the model (R-S6)."""
        try:
            try:
                text = await self._local_command(ctx, name, arg)
                outcome = TurnOutcome(OutcomeKind.COMPLETED, reason=f"local_command:{name}")
            except ValueError as exc:
                text = str(exc)
                outcome = TurnOutcome(OutcomeKind.COMPLETED, reason=f"local_command:{name}")
            message_id = new_id("msg")
            self.emit_transient(
                EventKind.AGENT_MESSAGE_CHUNK, {"messageId": message_id, "text": text, "offset": 0}
            )
            self.emit(EventKind.AGENT_MESSAGE, {"messageId": message_id, "text": text, "local": True})
            self._record_turn_end(ctx.turn_id, queued, outcome)
            await self.flushed()
        finally:
            self.send(TurnFinished(ctx.turn_id))

    async def _run_bang(self, ctx: TurnContext, queued: QueuedPrompt, command: str) -> None:
        """`!cmd`: run it through the ordinary tool path (events, permission rules, plan
        mode), without sampling; the model sees command and output in the next turn."""
        try:
            scratch: list[Message] = []
            side = dataclasses.replace(ctx, conversation=Conversation(scratch, lambda i, m: None))
            call = ToolCall(id=new_id("bang"), name="bash", arguments=json.dumps({"command": command}))
            result = await execute_tool_round(side, [call])
            output = scratch[-1].content if scratch else ""
            self.conversation.append(Message.user(f"I ran `{command}` myself:\n{output}"))
            if result.break_reason is not None:
                outcome = TurnOutcome.cancelled(result.break_reason.value, tools_called=result.executed)
            else:
                outcome = TurnOutcome(
                    OutcomeKind.COMPLETED, reason="shell_command", tools_called=result.executed
                )
            self._record_turn_end(ctx.turn_id, queued, outcome)
            await self.flushed()
        finally:
            self.send(TurnFinished(ctx.turn_id))

    async def _local_command(self, ctx: TurnContext, name: str, arg: str) -> str:
        match name:
            case "help":
                return help_text()
            case "mode":
                if arg:
                    try:
                        self._set_mode(PermissionMode(arg))
                    except ValueError:
                        known = ", ".join(m.value for m in PermissionMode)
                        raise ValueError(f"Unknown mode {arg!r}; one of {known}.") from None
                return f"Permission mode: {self._mode.value}"
            case "model":
                if arg:
                    self._set_model(arg)
                return f"Model: {self.model}"
            case "goal":
                if arg in ("", "status"):
                    return _describe_goal(self._goal)
                if arg == "clear":
                    self._goal = None
                    self._goal_changed()
                    return "Goal cleared."
                self._goal = GoalState(arg)
                self._goal_changed()
                return f"Goal set: {arg}\nSend a prompt to start working on it."
            case "queue":
                if not self._queue:
                    return "The queue is empty."
                lines = [f"{i}. {prompt_text(q.command.blocks)[:80]}" for i, q in enumerate(self._queue, 1)]
                return "Queued prompts:\n" + "\n".join(lines)
            case "usage":
                u = self.usage.total
                return (
                    f"Tokens: {u.input_tokens} in, {u.output_tokens} out, {u.cache_read_tokens} cache read, "
                    f"{u.cache_write_tokens} cache write; cost ${u.cost:.4f} over {u.calls} calls"
                    + (" (some usage could not be read)" if u.dirty else "")
                )
            case "clear":
                self.conversation.replace([])
                self._todos.replace([])
                return "Context cleared. The session log keeps the history."
            case "compact":
                state = TurnState()
                changed = await run_compaction(ctx, state, "requested")
                return "Compacted the conversation." if changed else "Nothing old enough to compact."
        raise ValueError(f"Unknown command /{name}.")

    def _persist_fields(self, fields: dict[str, Any]) -> None:
        self._services.writer.submit(self.id, session_fields=fields)

    def _end_killed_turn(self, turn_id: str, queued: QueuedPrompt) -> None:
        """The turn's task was killed (shutdown grace exceeded): its tool calls end failed
        for the clients watching and in the conversation, then the turn ends interrupted."""
        self.close_dangling_tool_calls()
        self._record_turn_end(turn_id, queued, TurnOutcome(OutcomeKind.INTERRUPTED, reason="server_shutdown"))

    def close_dangling_tool_calls(self) -> None:
        """Tool calls without a result (killed, or the server died) get a synthesised
        "interrupted" result in the conversation (R-L3c) and a `failed` update on the
        wire, so no client is left with a call that runs forever."""
        dangling, first_changed = repair_dangling_tool_calls(self._messages)
        if first_changed is not None:
            self._services.writer.submit(
                self.id,
                truncate_from=first_changed,
                messages=[
                    (i, {**m.model_dump(mode="json"), "_seq": self._seq})
                    for i, m in enumerate(self._messages)
                    if i >= first_changed
                ],
            )
        ids = list(dict.fromkeys([*self._open_tool_calls, *(c.id for c in dangling)]))
        for call_id in ids:
            self.emit(
                EventKind.TOOL_CALL_UPDATE,
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call_id,
                    "status": "failed",
                    "content": [{"type": "content", "content": {"type": "text", "text": INTERRUPTED_RESULT}}],
                    "rawOutput": {"output": INTERRUPTED_RESULT, "interrupted": True},
                },
            )

    def _record_turn_end(self, turn_id: str, queued: QueuedPrompt, outcome: TurnOutcome) -> None:
        if self._turn is not None and self._turn.id == turn_id:
            if self._turn.outcome is not None:
                return
            cancelled_by = self._turn.cancelled_by
            if cancelled_by and outcome.kind is OutcomeKind.CANCELLED and outcome.reason == "user_cancelled":
                outcome = dataclasses.replace(outcome, reason=cancelled_by)  # it was not the user
            self._turn.outcome = outcome
        self._emit_turn_ended(turn_id, queued.id, outcome, request_id_of(queued.command.meta))

    def _emit_turn_ended(
        self, turn_id: str, prompt_id: str | None, outcome: TurnOutcome, request_id: str | None
    ) -> None:
        # A message cut off mid-stream (the turn was killed) still ends durably, first.
        self.finish_interrupted_messages(list(self._partial.items()))
        payload: dict[str, Any] = {
            "turnId": turn_id,
            "promptId": prompt_id,
            "outcome": outcome.kind.value,
            "stopReason": stop_reason(outcome).value,
            "toolsCalled": outcome.tools_called,
        }
        if request_id is not None:
            payload["requestId"] = request_id
        if outcome.reason:
            payload["reason"] = outcome.reason
        if outcome.error is not None:
            payload["error"] = {"kind": outcome.error.kind.value, "message": outcome.error.message}
        if outcome.structured_output is not None:
            payload["structuredOutput"] = outcome.structured_output
        if outcome.turn:
            payload["turn"] = outcome.turn
            if "usage" in outcome.turn:
                self.usage.merge(UsageLedger.from_dict(outcome.turn["usage"]))
                self._persist_fields({"usage": self.usage.to_dict()})
        payload["sessionUsage"] = self.usage.to_dict()
        self.emit(EventKind.TURN_ENDED, payload)

    def _queue_changed(self) -> None:
        """Publish and store what changed in the queue since the last call (R-S3, R-E6):
        a delta event and the changed rows only, never every waiting prompt again."""
        payload, write = self._sync.diff(list(self._queue))
        if write is not None:
            self._services.writer.submit(self.id, queue=write)
        if payload is not None:
            self.emit(EventKind.QUEUE_UPDATE, payload)

    def _queue_refusal(self, cmd: Prompt) -> RpcError | None:
        """A prompt that would wait must fit the queue limits (R-X3); one that runs at
        once is not queued."""
        if self._turn is None and not self._queue:
            return None
        return self._sync.refusal(self._services.settings, len(self._queue), cmd.principal, entry_size(cmd))

    def _ack(
        self, ack: asyncio.Future[EnqueueAck], entry: QueuedPrompt | None, done: PromptDone | None = None
    ) -> None:
        """Answer an enqueue once what it changed is committed: where the prompt waits
        (0 = running now), or how it ended."""
        if done is not None:
            answer = EnqueueAck(done.prompt_id, None, done)
        else:
            assert entry is not None
            index = next((i for i, e in enumerate(self._queue) if e is entry), None)
            answer = EnqueueAck(entry.id, 0 if index is None else index + (self._turn is not None))
        self._after_commit.then(lambda: ack.done() or ack.set_result(answer))

    def _refuse_prompt(self, cmd: Prompt, err: RpcError) -> None:
        if cmd.ack is not None:  # enqueue: the caller waits for the ack, nobody for the end
            cmd.ack.set_exception(err)
            cmd.reply.cancel()
        else:
            cmd.reply.set_exception(err)

    def _removed_from_queue(self, entries: list[QueuedPrompt]) -> None:
        """Answered `removed_from_queue` once the removal is committed."""
        for e in entries:
            result = PromptDone(e.id, None, TurnOutcome.cancelled(LeftQueue.REMOVED.value))
            e.result = result
            self._sync.leaving[e.id] = LeftQueue.REMOVED
            waiters = [e.command.reply, *e.waiters]
            self._after_commit.then(lambda ws=waiters, r=result: answer_all(ws, r))

    def _queue_op(self, cmd: QueueOp) -> dict[str, Any]:
        args, who = cmd.args, cmd.principal
        q = self._queue
        match cmd.op:
            case "list":
                return {"applied": True, "queue": queue_ops.view(q)}
            case "remove":
                result = queue_ops.remove(q, args["id"], args["expectedVersion"])
            case "edit":
                if (refusal := self._sync.check_edit(self._services.settings, q, args["id"], args["text"])):
                    raise refusal
                result = queue_ops.edit(q, args["id"], args["expectedVersion"], args["text"], who)
            case "move":
                result = queue_ops.move(q, args["order"])
            case "combine":
                result = queue_ops.combine(q, who)
            case "hold":
                hold_s = self._services.settings.queue_hold_s
                result = queue_ops.hold(q, args["id"], who, seconds=hold_s)
                if result.applied:
                    # Nothing else may wake the actor when the hold runs out: a timer does
                    # (a little late: the loop may run callbacks a clock tick early).
                    asyncio.get_running_loop().call_later(hold_s + 0.05, self.send, ResumeQueue())
            case "release":
                result = queue_ops.release(q, args["id"])
            case "clear":
                result = queue_ops.clear(q)
            case "interject":
                entry = next((e for e in q if e.id == args["id"]), None)
                if entry is None or entry.kind != "prompt":
                    result = queue_ops.OpResult(False, [], "not_found")
                elif self._turn is None:
                    q.remove(entry)  # no running turn: it simply runs now
                    q.appendleft(entry)
                    result = queue_ops.OpResult(True, [])
                else:
                    # Atomically out of the queue and into the running turn (R-S4).
                    q.remove(entry)
                    self._sync.leaving[entry.id] = LeftQueue.INTERJECTED
                    self._turn.ctx.interjections.append(Interjection(entry.text, entry.command.origin))
                    self._turn.ctx.interrupted.set()
                    self._absorbed(entry, self._turn)
                    result = queue_ops.OpResult(True, [])
            case _:
                return {
                    "applied": False,
                    "reason": f"unknown operation {cmd.op!r}",
                    "queue": queue_ops.view(q),
                }
        self._removed_from_queue(result.removed)
        out: dict[str, Any] = {"applied": result.applied, "queue": queue_ops.view(q)}
        if result.reason:
            out["reason"] = result.reason
        if result.applied:
            self._queue_changed()
            self._start_next_turn()
        return out

    def _absorbed(self, entry: QueuedPrompt, turn: RunningTurn) -> None:
        """A queued prompt moved into the running turn is answered with that turn's end."""
        turn.prompt.waiters.append(entry.command.reply)
        turn.prompt.waiters.extend(entry.waiters)

    def _restore_queue(self, stored: list[dict[str, Any]]) -> None:
        """Queued prompts of a previous run; their original requests are gone, so their
        ends are reported as events only."""
        loop = asyncio.get_running_loop()
        positions: dict[str, int] = {}
        for item in stored:
            try:
                blocks = CONTENT_BLOCKS.validate_python(item["blocks"])
            except Exception:
                log.warning("session %s: dropping an unreadable queued prompt %s", self.id, item.get("id"))
                continue
            cmd = Prompt(
                blocks,
                loop.create_future(),
                meta=dict(item.get("meta") or {}),
                principal=item.get("owner", "local"),
            )
            entry = QueuedPrompt(
                item["id"],
                cmd,
                version=int(item.get("version", 1)),
                owner=item.get("owner", "local"),
                last_editor=item.get("lastEditor", "local"),
                send_now=bool(item.get("sendNow", False)),
            )
            self._queue.append(entry)
            positions[entry.id] = int(item.get("position", len(positions)))
            if (request_id := item.get("requestId") or request_id_of(cmd.meta)) is not None:
                self._requests[request_id] = entry
        self._sync.restore(self._queue, positions)

    def resume_queue(self) -> None:
        """Start the next queued prompt, if any (after a restart)."""
        self.send(ResumeQueue())

    def _repeat_of_known_request(self, cmd: Prompt) -> bool:
        """A client retrying a submission (same requestId) gets the original prompt: it
        is never queued or run twice (R-S3). A `session/prompt` joins it; an enqueue is
        answered at once with its `{promptId, position}`, or its end if it already ran."""
        request_id = request_id_of(cmd.meta)
        if request_id is None:
            return False
        known = self._requests.get(request_id)
        # It ran (or was cut off) in this run, or before a restart.
        done = known.result if known is not None else self._answered.get(request_id)
        if known is None and done is None:
            return False
        if cmd.ack is not None:
            cmd.reply.cancel()  # nobody waits for an enqueue's end
            self._ack(cmd.ack, known, done)
        elif done is not None:
            cmd.reply.set_result(done)
        else:
            assert known is not None
            known.waiters.append(cmd.reply)
        return True

    def _interject(self, cmd: Interject) -> None:
        turn = self._turn
        if cmd.expected_turn_id is not None and (turn is None or turn.id != cmd.expected_turn_id):
            cmd.reply.set_result(InterjectResult("turn_not_active", turn.id if turn else None))
            return
        if turn is not None:
            turn.ctx.interjections.append(Interjection(prompt_text(cmd.blocks), cmd.origin))
            turn.ctx.interrupted.set()
            cmd.reply.set_result(InterjectResult("interjected", turn.id))
            return
        # No running turn: an interjection is simply the next prompt.
        reply: asyncio.Future[PromptDone] = asyncio.get_running_loop().create_future()
        queued = QueuedPrompt(new_id("prompt"), Prompt(cmd.blocks, reply, origin=cmd.origin))
        self._queue.append(queued)
        self._start_next_turn()
        self._queue_changed()
        answer = InterjectResult("queued", None, queued.id)  # once it is committed
        self._after_commit.then(lambda: cmd.reply.done() or cmd.reply.set_result(answer))

    def _finish_turn(self, turn_id: str) -> None:
        turn = self._turn
        if turn is None or turn.id != turn_id:
            return
        self._turn = None
        outcome = turn.outcome or TurnOutcome(OutcomeKind.INTERRUPTED, reason="server_shutdown")
        result = PromptDone(turn.prompt.id, turn.id, outcome)
        turn.prompt.result = result
        # Its events were refused by the database (and discarded): no success to report.
        failed = session_failed(self.id) if self._services.writer.failed(self.id) else None
        for done in (turn.prompt.command.reply, *turn.prompt.waiters):
            if not done.done():
                done.set_result(result) if failed is None else done.set_exception(failed)
        # Input that arrived after the turn's last drain is never lost: it becomes the
        # next prompt, ahead of everything queued (R-S4).
        for item in reversed(turn.ctx.take_interjections()):
            reply: asyncio.Future[PromptDone] = asyncio.get_running_loop().create_future()
            blocks = [TextContent(text=item.text)]
            self._queue.appendleft(QueuedPrompt(new_id("prompt"), Prompt(blocks, reply, origin=item.origin)))

    # ------------------------------------------------------------------ EventSink

    def emit(self, kind: EventKind, payload: dict[str, Any], *, origin: str | None = None) -> None:
        ended_partial = kind in (EventKind.AGENT_MESSAGE, EventKind.AGENT_THOUGHT) and (
            self._partial.pop(payload["messageId"], None) is not None
        )
        if kind is EventKind.TOOL_CALL:
            self._open_tool_calls[payload["toolCallId"]] = None
            self._tool_call_ids.add(payload["toolCallId"])
        elif kind is EventKind.TOOL_CALL_UPDATE and payload.get("status") in ("completed", "failed"):
            self._open_tool_calls.pop(payload["toolCallId"], None)
        self._seq += 1
        event = Event(self.id, kind, payload, seq=self._seq, origin=origin)
        self._services.writer.submit(self.id, event=event, publish=self.hub.publish)
        if self._services.metrics is not None:
            self._services.metrics.observe_event(kind, payload)
        if ended_partial and self._checkpointed:
            # Same commit as the final text: the store never holds both, or neither.
            self._checkpoint_partials(from_timer=False)

    def emit_transient(self, kind: EventKind, payload: dict[str, Any]) -> None:
        if kind in (EventKind.AGENT_MESSAGE_CHUNK, EventKind.AGENT_THOUGHT_CHUNK):
            # The text streamed so far, for clients that attach mid-message (R-E3).
            mid = payload["messageId"]
            _, so_far = self._partial.get(mid, (kind, ""))
            self._partial[mid] = (kind, so_far + payload["text"])
            self._schedule_checkpoint()
        event = Event(self.id, kind, payload)
        self._services.writer.submit(self.id, event=event, publish=self.hub.publish)

    async def flushed(self) -> None:
        await self._services.writer.barrier()

    # ------------------------------------------------------------------ partial text (R-E1)

    def _schedule_checkpoint(self) -> None:
        if self._checkpoint_timer is not None or self._stopped:
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, self._last_checkpoint + PARTIAL_CHECKPOINT_INTERVAL_S - loop.time())
        self._checkpoint_timer = loop.call_later(delay, self._checkpoint_partials)

    def _checkpoint_partials(self, *, from_timer: bool = True) -> None:
        """Write the streamed-so-far text of in-flight messages to the session row (or
        clear it): after a crash it becomes those messages' final, interrupted text."""
        if from_timer:  # the periodic checkpoint (else: a final text just cleared one)
            self._checkpoint_timer = None
            self._last_checkpoint = asyncio.get_running_loop().time()
        if not self._partial and not self._checkpointed:
            return
        record = None
        if self._partial:
            record = {
                "seq": self._seq,
                "messages": [
                    {"messageId": mid, "kind": kind.value, "text": text}
                    for mid, (kind, text) in self._partial.items()
                ],
            }
        self._persist_fields({"partial": record})
        self._checkpointed = record is not None

    def finish_interrupted_messages(self, partials: list[tuple[str, tuple[EventKind, str]]]) -> None:
        """Messages that stopped streaming without their final event (the turn was killed,
        or the server died) end with the text clients were shown, marked interrupted; the
        model sees its own cut-off words in the next request."""
        for mid, (kind, text) in partials:
            thought = kind is EventKind.AGENT_THOUGHT_CHUNK
            final = EventKind.AGENT_THOUGHT if thought else EventKind.AGENT_MESSAGE
            # emit() ends the in-flight entry and updates the checkpoint with it.
            self.emit(final, {"messageId": mid, "text": text, "interrupted": True})
            if final is EventKind.AGENT_MESSAGE and text:
                self.conversation.append(Message(role="assistant", content=text))

    def remember_outcome(self, request_id: str, done: PromptDone) -> None:
        """How a client's request ended before a restart: its retry learns it (R-E6)."""
        self._answered[request_id] = done
        while len(self._answered) > MAX_REMEMBERED_REQUESTS:
            self._answered.pop(next(iter(self._answered)))

    def close_interrupted_turn(self, started: dict[str, Any]) -> None:
        """The turn that was running when the server died ends `interrupted` (R-E6)."""
        outcome = TurnOutcome(OutcomeKind.INTERRUPTED, reason="server_restarted")
        request_id = started.get("requestId")
        self._emit_turn_ended(started["turnId"], started.get("promptId"), outcome, request_id)
        if isinstance(request_id, str):
            done = PromptDone(started.get("promptId") or "", started["turnId"], outcome)
            self.remember_outcome(request_id, done)

    def _persist_message(self, idx: int, message: Message) -> None:
        # `_seq`: the log position the message belongs to (forks cut the conversation there).
        data = {**message.model_dump(mode="json"), "_seq": self._seq}
        self._services.writer.submit(self.id, messages=[(idx, data)])

    def _rewrite_messages(self, messages: list[Message]) -> None:
        data = [(i, {**m.model_dump(mode="json"), "_seq": self._seq}) for i, m in enumerate(messages)]
        self._services.writer.submit(self.id, truncate_from=0, messages=data)

    def _set_mode(self, mode: PermissionMode) -> None:
        if mode is self._mode:
            return
        self._mode = mode
        self._services.writer.submit(self.id, session_fields={"mode": mode.value})
        self.emit(EventKind.MODE_CHANGED, {"modeId": mode.value})
        self._config_changed()

    def _set_model(self, model: str) -> None:
        if model == self.model:
            return
        self.model = model
        self._persist_fields({"model": model})
        self._config_changed()

    def config_options(self) -> list[dict[str, Any]]:
        services = self._services
        models = model_choices(
            services.settings.model,
            (lane.model for lane in services.fallbacks),
            (a.model for a in services.agents.values()),
            self.model,
        )
        return config_options(
            mode=self._mode.value,
            model=self.model,
            agent=self.agent.name,
            agents={name: a.description for name, a in services.agents.items()},
            models=models,
        )

    def _config_changed(self) -> None:
        """Every client's pickers follow a change made by any client (or `/mode`, `/model`)."""
        self.emit(EventKind.CONFIG_OPTIONS, {"configOptions": self.config_options()})

    # ------------------------------------------------------------------ PermissionGate

    def mode(self) -> PermissionMode:
        return self._mode

    def remembered(self, tool_name: str) -> Remembered | None:
        value = self._memory.get(tool_name)
        return Remembered(value) if value else None

    def remember(self, tool_name: str, answer: Remembered) -> None:
        self._memory[tool_name] = answer.value
        self._services.writer.submit(self.id, session_fields={"permission_memory": dict(self._memory)})

    async def ask(self, tool_call: dict[str, Any], options: list[dict[str, str]]) -> PermissionAnswer:
        return await self._gate.ask(tool_call, options)

    def _ask_sink(self, sink: FrameSink, pending: PendingPermission) -> None:
        self._gate.ask_sink(sink, pending)

    def answer_permission(self, request_id: str, option_id: str) -> bool | None:
        """An answer to a pending permission request, from any client (WebSocket, or
        `_agentd/permission/respond` over HTTP). The first answer wins: True if this one
        did, False if the request is unknown or already answered, None for an option the
        request does not offer (a bad answer, not an answer)."""
        return self._gate.answer(request_id, option_id)

    def permission_options(self, request_id: str) -> list[str] | None:
        """The option ids a pending request offers (None when it is not pending)."""
        return self._gate.options(request_id)
