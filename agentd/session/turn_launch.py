"""Starting a turn: what a queue entry runs as, the `TurnContext` it runs with, and the
three runners (a model turn or compaction job, a builtin `/command`, a `!cmd`).

Every runner ends the same way: it records the turn's end, whatever happened, and waits
until its events reached the clients' queues; the actor awaits the turn's task, so its end
is the turn's end (no message to the actor).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from agentd.agents import AgentDefinition
from agentd.core import (
    ROUTED_FROM,
    AgentText,
    AgentTextChunk,
    EndReason,
    ErrorKind,
    HarnessError,
    LocalCommandReason,
    OutcomeKind,
    SessionInfoChanged,
    TurnEnded,
    TurnOutcome,
    TurnStarted,
    UserMessage,
    prompt_text,
    turn_log_context,
)
from agentd.loop import OutputSchema, SessionLoopState, TurnContext, run_bang, run_compaction_job, run_turn
from agentd.protocol import ContentBlock, TextContent, dump
from agentd.session.command_syntax import LocalCommand, Skill, expand_skill, parse_bang, parse_local
from agentd.session.commands import Prompt, PromptDone, PromptSource
from agentd.session.local_commands import LocalCommandsHost, run_local_command
from agentd.session.queue import QueuedPrompt, QueueKind, new_id, request_digest_of, request_id_of
from agentd.session.sinks import capable
from agentd.tools import ClientBridge, PreToolHook, PromptHook, StopHook, Tool

if TYPE_CHECKING:
    from agentd.session.eventlog import EventHub
    from agentd.session.permission_gate import PermissionGate
    from agentd.tools import BackgroundTasks, McpConnections


class TurnHost(LocalCommandsHost, Protocol):
    """The actor as the turn's launcher and runners see it (and its builtins): only these
    names."""

    title: str | None  # the first prompt names an untitled session

    @property
    def agent(self) -> AgentDefinition: ...
    @property
    def mcp(self) -> McpConnections | None: ...
    @property
    def client_hooks(self) -> dict[str, StopHook]: ...
    @property
    def client_prompt_hooks(self) -> dict[str, PromptHook]: ...
    @property
    def plan_mode(self) -> bool: ...
    @property
    def permissions(self) -> PermissionGate: ...
    @property
    def background(self) -> BackgroundTasks: ...
    @property
    def path_locks(self) -> dict[str, asyncio.Lock]: ...
    @property
    def hub(self) -> EventHub: ...
    @property
    def loop_state(self) -> SessionLoopState: ...
    def record_turn_end(self, turn_id: str, queued: QueuedPrompt, outcome: TurnOutcome) -> None: ...
    def end_killed_turn(self, turn_id: str, queued: QueuedPrompt) -> None: ...
    def turn_finished(self, turn_id: str) -> None: ...


log = logging.getLogger(__name__)
# What a turn runs: a model turn, a compaction job, a builtin `/command` or a `!cmd`.
Runner = Callable[[], Awaitable[TurnOutcome]]


@dataclass
class RunningTurn:
    id: str
    prompt: QueuedPrompt
    task: asyncio.Task[None]
    ctx: TurnContext
    outcome: TurnOutcome | None = None
    ended: TurnEnded | None = None  # `outcome`'s `turn_ended` update, as logged
    cancelled_by: EndReason | None = None  # who set `cancel` when it was not a user (e.g. shutdown)

    @property
    def cancel(self) -> asyncio.Event:
        return self.ctx.cancel


@dataclass(frozen=True)
class Launch:
    """What a queue entry runs as (its kind is decided when queued; the parts when it starts)."""

    kind: QueueKind
    local: tuple[LocalCommand, str] | None = None  # a builtin and its argument text
    bang: str | None = None  # the shell command of `!cmd`
    expanded: str | None = None  # a skill's prompt text (`/skill args`)

    @property
    def shown_to_clients(self) -> bool:
        """It is a user message on the wire (a compaction job is not)."""
        return self.kind is not QueueKind.COMPACT

    @property
    def joins_conversation(self) -> bool:
        """The model sees the prompt as a user message (not a local or `!` command)."""
        return self.kind is QueueKind.PROMPT


PLAIN = Launch(QueueKind.PROMPT)  # (frozen: one for every plain prompt)


def classify(kind: QueueKind, text: str, skills: dict[str, Skill]) -> Launch:
    """What an entry runs as: a builtin `/command`, a `!cmd`, a skill or a plain prompt.
    Entries are classified when queued (`prompt_kind`); the text is parsed again here for
    the command's parts, which gives the same answer (combining only ever appends plain
    text to a plain prompt) and also covers input that never waited in the queue."""
    if kind is QueueKind.COMPACT:
        return Launch(kind)
    first = text.lstrip()[:1]
    if not first or first not in "/!":  # plain text (most prompts): none of the parsers
        return PLAIN
    if (local := parse_local(text)) is not None:
        return Launch(QueueKind.LOCAL, local=local)
    if (bang := parse_bang(text)) is not None:
        return Launch(QueueKind.BANG, bang=bang)
    return Launch(QueueKind.PROMPT, expanded=expand_skill(text, skills))


def title_from(text: str) -> str | None:
    """A session's title from its first prompt: printable, one line, at most 80 characters."""
    # Control characters (NUL above all) have no place in a title column.
    printable = "".join(ch if ch.isprintable() else " " for ch in text)
    return " ".join(printable.split())[:80] or None


def output_schema(meta: dict[str, Any], agent: AgentDefinition) -> OutputSchema | None:
    schema = meta.get("outputSchema", agent.output_schema)
    return OutputSchema.check(schema) if isinstance(schema, dict) else None


def client_bridge(hub: EventHub, session_id: str, origin: str | None) -> ClientBridge | None:
    """The prompting client's files and terminal, if it offered them (R-T6); a prompt
    from no attached client (HTTP, a restart) works on the server's own."""
    subscriber = hub.get(origin) if origin else None  # (subscriptions are keyed by the sink's id)
    client = capable(subscriber.sink if subscriber is not None else None)
    if client is None:
        return None
    caps = client.client_capabilities
    bridge = ClientBridge(
        client.request,
        session_id,
        can_read=caps.fs.read_text_file,
        can_write=caps.fs.write_text_file,
        can_terminal=caps.terminal,
    )
    return bridge if bridge.can_read or bridge.can_write or bridge.can_terminal else None


def build_context(actor: TurnHost, turn_id: str, queued: QueuedPrompt) -> TurnContext:
    """Everything the turn reads: the session's state and services at this instant."""
    services = actor.services
    settings = services.settings
    kit = services.kit  # (its parts directly: the services' properties are a call each)
    cmd = queued.command
    agent = actor.agent
    # McpTool has the shape of a `Tool`, but as instance fields where the protocol names
    # ClassVars, which mypy does not accept as the same; likewise CommandHook's `name`.
    # (Annotated, not `cast`: a cast is a Python call, four per turn.)
    mcp_tools: dict[str, Tool] = actor.mcp.tools if actor.mcp is not None else {}  # type: ignore[assignment]
    hooks = kit.hooks
    pre_tool: list[PreToolHook] = list(hooks.pre_tool)  # type: ignore[arg-type]
    stop_hooks: list[StopHook] = [*hooks.stop, *actor.client_hooks.values()]  # type: ignore[list-item]
    client_prompt_hooks = actor.client_prompt_hooks.values()
    prompt_hooks: list[PromptHook] = [*hooks.user_prompt_submit, *client_prompt_hooks]  # type: ignore[list-item]
    ctx = TurnContext(
        session_id=actor.id,
        turn_id=turn_id,
        cwd=actor.cwd,
        provider=services.provider,
        model=actor.model,
        system_prompt=agent.system_prompt or settings.system_prompt,
        tools={**services.agent_tools(agent), **mcp_tools},
        conversation=actor.conversation,
        events=actor.journal,
        permissions=actor.permissions,
        cancel=asyncio.Event(),
        todos=actor.todos,
        background=actor.background,
        output_schema=output_schema(cmd.meta, agent),
        max_turns=agent.max_turns if agent.max_turns is not None else settings.max_turns,
        path_locks=actor.path_locks,
        pre_tool_hooks=pre_tool,
        context_window=services.context_window_for(actor.model),
        fallbacks=list(services.fallbacks),
        prices=services.prices(),
        retry=actor.loop_state.retry,
        persist=actor.journal.persist_fields,
        budget_limits=kit.limits.budget,
        completion=agent.completion,
        goal=actor.goal,
        goal_evaluator_model=settings.goal_evaluator_model,
        limits=kit.limits,
        stop_hooks=stop_hooks,
        used_tool_call_ids=actor.journal.tool_call_ids,
        client=client_bridge(actor.hub, actor.id, cmd.origin),
        before_write=functools.partial(actor.files.before_write, turn_id),
        shell=services.shell,
        trace_meta=cmd.meta,
        prompt_hooks=prompt_hooks,
        reminders=actor.loop_state.reminders,
        live_tools=SessionLoopState.live_tools(lambda: actor.mcp),
        live_names=frozenset(mcp_tools),
    )
    # (the registry's own dict when there is no MCP tool: the same object each turn, so the
    # session's `task` tool, made from it, is made once — it is only read)
    available = {**kit.tools, **mcp_tools} if mcp_tools else kit.tools
    actor.loop_state.equip(ctx, available, allowed=agent.allows_tool)  # R-T11
    return ctx


def _announce_prompt(actor: TurnHost, queued: QueuedPrompt) -> None:
    """The prompt as a user message on the wire; the first one names the session."""
    cmd = queued.command
    journal = actor.journal
    routed_from = cmd.meta.get(ROUTED_FROM)  # whose own prompt it is, on another replica (R-C1)
    message = UserMessage(
        new_id("user"),
        [dump(b) for b in cmd.blocks],
        prompt_id=queued.id,
        routed_from=routed_from if isinstance(routed_from, str) else None,
    )
    journal.emit(message, origin=cmd.origin)
    if actor.title is None:
        actor.title = title_from(prompt_text(cmd.blocks))
        journal.persist_fields({"title": actor.title})
        if actor.title:
            now = datetime.now(UTC).isoformat()
            journal.emit(SessionInfoChanged(actor.title, now))


def _announce_turn(actor: TurnHost, turn_id: str, queued: QueuedPrompt, message_index: int | None) -> None:
    request_id = request_id_of(queued.command.meta)  # so a restart can still answer its retry
    started = TurnStarted(
        turn_id,
        queued.id,
        queued.kind.value,
        queued.command.source.value,  # why it started: a user, a finished task (wake.py)
        # A turn a rewind can undo: where it cuts the conversation.
        message_index=message_index,
        request_id=request_id,
        # ...and tell it from a reuse for other content.
        request_digest=None if request_id is None else request_digest_of(queued.command.meta),
    )
    actor.journal.emit(started)


def launch(actor: TurnHost, queued: QueuedPrompt, turn_id: str) -> RunningTurn:
    """Announce the entry (its user message, the title, `turn_started`) and start its runner."""
    cmd = queued.command
    # A wake turn (wake.py) has no text of its own: the task's reminder is its first input.
    woken = cmd.source is PromptSource.TASK_NOTIFICATION
    skills = actor.services.kit.skills
    text = None if woken else prompt_text(cmd.blocks)
    plan = PLAIN if text is None else classify(queued.kind, text, skills)
    before = len(actor.conversation)  # where a rewind of this turn cuts the conversation
    queued.kind = plan.kind
    if plan.expanded is not None:
        cmd.blocks = [TextContent(text=plan.expanded)]
        text = None  # (the opening reads the new blocks)
    ctx = build_context(actor, turn_id, queued)  # its tools are what the opening tells of
    if plan.shown_to_clients and not woken:
        _announce_prompt(actor, queued)
        if plan.joins_conversation:
            actor.loop_state.open_turn(
                ctx,
                queued.command.blocks,
                queued.id,
                before,
                plan_mode=actor.plan_mode,
                mcp=actor.mcp,
                prompt=text,
            )
    rewindable = plan.local is None and queued.kind is not QueueKind.COMPACT
    _announce_turn(actor, turn_id, queued, before if rewindable else None)
    body: Runner
    if plan.local is not None:
        command, arg = plan.local
        name, body = "local", functools.partial(_run_local, actor, ctx, command.name, arg)
    elif plan.bang is not None:
        name, body = "bang", functools.partial(run_bang, ctx, plan.bang, new_id("bang"))
    elif queued.kind is QueueKind.COMPACT:
        name, body = "turn", functools.partial(run_compaction_job, ctx)
    else:
        name, body = "turn", functools.partial(run_turn, ctx)
    # The task runs in a copy of this context with the turn's id bound: every record it logs
    # carries it (as inside `bind_log_context(turn_id=...)`, without its calls).
    context = turn_log_context(turn_id)
    task = asyncio.create_task(_run(actor, ctx, queued, body), name=f"{name}-{turn_id}", context=context)
    return RunningTurn(turn_id, queued, task, ctx)


async def _run(actor: TurnHost, ctx: TurnContext, queued: QueuedPrompt, body: Runner) -> None:
    """The turn's task: its runner's outcome recorded — whatever happened, so the prompt never
    hangs — and its events in the clients' queues. The actor awaits this task: its end is
    the turn's (session_actor.py)."""
    try:
        outcome = await body()
    except asyncio.CancelledError:
        actor.end_killed_turn(ctx.turn_id, queued)
        raise
    except Exception as exc:  # a bug below the loop's own guard: end the turn readably
        log.exception("turn %s crashed", ctx.turn_id)
        err = HarnessError(ErrorKind.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
        outcome = TurnOutcome.failed(err)
    actor.record_turn_end(ctx.turn_id, queued, outcome)
    # The response to session/prompt must come after every update of its turn.
    await actor.journal.flushed()
    actor.turn_finished(ctx.turn_id)  # ends it here if the actor is parked (one hop less)


async def _run_local(actor: TurnHost, ctx: TurnContext, name: str, arg: str) -> TurnOutcome:
    """A builtin command: answer locally, never sample the model (R-S6)."""
    try:
        text = await run_local_command(actor, ctx, name, arg)
    except ValueError as exc:
        text = str(exc)
    message_id = new_id("msg")
    journal = actor.journal
    journal.emit_transient(AgentTextChunk(message_id, text, 0))
    journal.emit(AgentText(message_id, text, local=True))
    return TurnOutcome(OutcomeKind.COMPLETED, reason=LocalCommandReason(name))


class KilledTurnEnder(Protocol):
    """What ends a turn whose task had to be killed (the actor, when it stops)."""

    def end_killed_turn(self, turn_id: str, queued: QueuedPrompt) -> None: ...


async def stop_turn(actor: KilledTurnEnder, turn: RunningTurn, grace: float) -> None:
    """Shutdown is the first budget gate: the turn stops at its next round. If it does
    not finish within the grace period it is cancelled, then killed."""
    turn.ctx.budget.request_shutdown()
    for step in ("gate", "cancel"):
        try:
            await asyncio.wait_for(asyncio.shield(turn.task), timeout=grace / 2)
            return
        except TimeoutError:
            if step == "gate":
                turn.cancelled_by = EndReason.SERVER_SHUTDOWN
                turn.cancel.set()
    turn.task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await turn.task
    if turn.outcome is None:  # a local command or `!cmd` has no handler of its own
        actor.end_killed_turn(turn.id, turn.prompt)


def answer_turn(turn: RunningTurn, failed: Exception | None) -> list[QueuedPrompt]:
    """Answer everyone waiting for the turn (its prompt, repeats, absorbed entries) with
    how it ended — or `failed`; returns the input it never drained as new prompts, in
    the order they must run (for `extendleft`: last first)."""
    outcome = turn.outcome or TurnOutcome(OutcomeKind.INTERRUPTED, reason=EndReason.SERVER_SHUTDOWN)
    result = PromptDone(turn.prompt.id, turn.id, outcome, turn.ended if turn.outcome is not None else None)
    turn.prompt.result = result
    for done in (turn.prompt.command.reply, *turn.prompt.waiters):
        if not done.done():
            if failed is None:
                done.set_result(result)
            else:
                done.set_exception(failed)
    leftovers: list[QueuedPrompt] = []
    for item in reversed(turn.ctx.take_interjections()):
        reply: asyncio.Future[PromptDone] = asyncio.get_running_loop().create_future()
        blocks: list[ContentBlock] = [TextContent(text=item.text)]
        leftovers.append(QueuedPrompt(new_id("prompt"), Prompt(blocks, reply, origin=item.origin)))
    return leftovers
