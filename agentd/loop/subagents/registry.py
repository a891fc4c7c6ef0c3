"""Sub-agents (R-T11): a child agent with its own L3 loop and budget, run by the `task` tool.

A child is an agent definition (system prompt, tool allow-list, model, turn cap, completion
requirement, output schema) run by the very same turn loop as the session's agent
(`run_turn`: L2 around L3 — no copy), on a context derived from its parent's:

- its own conversation (the task prompt as the first user message, never persisted as the
  parent's messages; the parent gets the child's final answer as the tool result);
- its own budget: the headless limits (000: "子代理没有这只手，所以子代理才有 max_turns") and the
  turn cap the parent asked for, never above the definition's (`subagent_limits`);
- its own retry buckets, todo list and completed-tool set; no goal;
- the definition's tools only (and `task` only below the depth limit);
- the parent session's permission gate, hooks and file locks — a child's permission request
  is an ordinary request of the session;
- its events nested under the parent's tool call (`subagent_events.NestedEvents`);
- `SubagentStop` hooks where the session's agent has Stop hooks (001: "Stop 检查调用……Stop
  （主 session）或 SubagentStop（子 agent session）类 hook").

Foreground: the parent's tool call waits for the child. Background (`run_in_background`):
the call returns the child's id at once; the child's answer reaches the model as a reminder
before a later sampling round (this registry is a `CompletionSource`) or through
`task_output` (it is the tools layer's `AgentTasks`).

Usage: a child's ledger is attributed to its own lanes (`subagent:<agent>/<lane>`) and rolled
up — a foreground child's into its parent turn's ledger, a background child's into the
session's when it finishes. While a background child started by a turn still runs, that
turn's usage report says `incomplete` (000: "当失败发生在仍存活的后台子代理身上时（background_live），
只标'报告不完整'…不必标脏").

Cancel: a child's cancel is linked to the turn that started it — cancelling the parent
turn cancels its foreground child and every background child that turn started (seed:
cancel of the parent cancels children). Background children of a turn that ended normally
keep running until they finish or the session closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from agentd.core import (
    Conversation,
    EndReason,
    Message,
    OutcomeKind,
    TaskCompletion,
    TaskEnd,
    TaskKind,
    TaskStart,
    TurnOutcome,
    UsageLedger,
    agent_report_output,
    agent_result_output,
    agent_started_output,
    output_call,
    stop_runners,
    subagent_stop_payload,
    wait_for_any,
)
from agentd.loop.budget import BudgetState
from agentd.loop.context import TurnContext
from agentd.loop.retry import RetryState
from agentd.loop.structured import OutputSchema
from agentd.loop.subagents.events import NestedEvents
from agentd.loop.subagents.limits import SubagentLimits, can_spawn, child_budget, spawn_refusal
from agentd.loop.subagents.task_tool import TASK_TOOL, AgentSpec, ChildRequest, TaskTool
from agentd.loop.turn_reminders import ReminderMemory
from agentd.tools import StopHook, TodoList, Tool, ToolError, ToolResult

log = logging.getLogger(__name__)

_CLOSE_GRACE = 5.0  # close(): how long cancelled children get to end
ANSWER_CHARS = 2000  # of a child's answer repeated on its lifecycle event


@dataclass
class _Child:
    id: str
    agent: str
    description: str
    parent_turn_id: str
    background: bool
    cancel: asyncio.Event
    finished: asyncio.Future[None]
    ctx: TurnContext | None = None
    outcome: TurnOutcome | None = None
    answer: str = ""
    reported: bool = False  # a background child's end was shown to the model

    @property
    def done(self) -> bool:
        return self.finished.done()


def lane_of(agent: str, lane: str) -> str:
    """A child's usage lane, as rolled up into its parent's ledger."""
    return f"subagent:{agent}/{lane}"


def attributed(agent: str, ledger: UsageLedger) -> UsageLedger:
    """`ledger` with every lane renamed to the child's own (`lane_of`)."""
    return UsageLedger(
        dataclasses.replace(ledger.total), {lane_of(agent, k): v for k, v in ledger.by_lane.items()}
    )


def final_answer(outcome: TurnOutcome, messages: list[Message]) -> str:
    """What the parent gets back: the structured answer when there is one, else the
    child's last assistant text."""
    structured = outcome.structured_output
    if structured and "value" in structured:
        return json.dumps(structured["value"], ensure_ascii=False)
    return next((m.content for m in reversed(messages) if m.role == "assistant" and m.content), "")


def _end_of(outcome: TurnOutcome | None) -> TaskEnd:
    if outcome is None or outcome.kind in (OutcomeKind.CANCELLED, OutcomeKind.INTERRUPTED):
        return TaskEnd.KILLED
    return TaskEnd.COMPLETED if outcome.kind is OutcomeKind.COMPLETED else TaskEnd.FAILED


def _link(parent: asyncio.Event, child: asyncio.Event) -> asyncio.Future[Any]:
    """Set `child` when `parent` is set; cancel the returned waiter to unlink."""
    waiter = asyncio.ensure_future(parent.wait())
    waiter.add_done_callback(lambda w: None if w.cancelled() else child.set())
    return waiter


@dataclass
class Subagents:
    """The sub-agents of one session: spawning, limits, background children, notices."""

    agents: Mapping[str, AgentSpec]
    # The turn loop a child runs in (`agentd.loop.run_turn`, handed in by the session: the
    # loop's turn runs tools, this registry is one of them, so it cannot import the turn).
    run_turn: Callable[[TurnContext], Awaitable[TurnOutcome]]
    limits: SubagentLimits = field(default_factory=SubagentLimits)
    default_system_prompt: str = ""
    stop_hooks: list[StopHook] = field(default_factory=list)  # SubagentStop, from the hooks file
    # SubagentStop hooks clients registered, read when a child starts (they come and go).
    client_stop_hooks: Callable[[], list[StopHook]] = list
    # A background child's attributed usage, when it finishes (the session's ledger).
    on_usage: Callable[[UsageLedger], None] = lambda ledger: None
    # A background child finished: clients get a `background_task` event at once.
    on_finished: Callable[[TaskCompletion], None] = lambda completion: None
    # A background child started: the session logs it, so a restart knows it was running.
    on_started: Callable[[TaskStart], None] = lambda start: None
    _children: dict[str, _Child] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _runners: set[asyncio.Task[None]] = field(default_factory=set)
    _closed: bool = False
    _offered: TaskTool | None = None  # the session's turns' `task` tool (`task_tool`)

    # --- spawning ---

    def resume_ids(self, after: int) -> None:
        """Number new children after `after` (ids of an earlier life stay unambiguous)."""
        self._ids = itertools.count(after + 1)

    def running(self) -> list[str]:
        return [c.id for c in self._children.values() if not c.done]

    def running_background(self) -> list[str]:
        return [c.id for c in self._children.values() if c.background and not c.done]

    def live_from(self, turn_id: str) -> bool:
        """A background child started by `turn_id` (or by one of its children) still runs."""
        if not self._children:
            return False  # asked at every turn's end; most sessions started no sub-agent
        return any(
            c.background
            and not c.done
            and (c.parent_turn_id == turn_id or c.parent_turn_id.startswith(f"{turn_id}/"))
            for c in self._children.values()
        )

    def task_tool(self, parent: TurnContext, available: dict[str, Tool]) -> Tool | None:
        """The `task` tool for the session's agent's turn, or None past the depth limit."""
        if not self.agents or not can_spawn(parent.depth, self.limits):
            return None
        # Made once while the agents and the tools it picks from stay the same objects (its
        # guidance and schema are theirs), bound to each turn that offers it: a session runs
        # one turn at a time, and `run` reads its parent before its first await.
        tool = self._offered
        if tool is None or tool.available is not available or tool.agents is not self.agents:
            tool = self._offered = TaskTool(self, available)
        offered: Tool = tool.bind(parent)  # type: ignore[assignment]  # (not cast: a call)
        return offered

    def child_context(
        self,
        parent: TurnContext,
        child: _Child,
        request: ChildRequest,
        tool_call_id: str,
        available: dict[str, Tool],
    ) -> TurnContext:
        """The child's context, derived from its parent's (see the module doc)."""
        spec = request.spec
        depth = parent.depth + 1
        tools = spec.select_tools({k: v for k, v in available.items() if k != TASK_TOOL})
        task = None
        if spec.allows_tool(TASK_TOOL) and can_spawn(depth, self.limits):
            task = TaskTool(self, available)
            tools[TASK_TOOL] = cast("Tool", task)
        events = NestedEvents(parent.events, tool_call_id, child.id, spec.name, depth)
        schema = spec.output_schema
        ctx = dataclasses.replace(
            parent,
            turn_id=f"{parent.turn_id}/{child.id}",
            model=spec.model or parent.model,
            system_prompt=spec.system_prompt or self.default_system_prompt,
            tools=tools,
            conversation=Conversation([Message.user(request.prompt)], lambda i, m: None),
            events=events,
            cancel=child.cancel,
            interjections=[],
            interrupted=asyncio.Event(),
            todos=TodoList(),
            background=None,  # a child's shell runs in the foreground
            output_schema=OutputSchema.check(schema) if isinstance(schema, dict) else None,
            max_turns=request.max_turns,
            compact_requested=False,
            fallbacks=list(parent.fallbacks),
            retry=RetryState(parent.limits.retry),
            persist=lambda fields: None,  # nothing of a child is session state
            budget_limits=child_budget(parent.budget_limits),
            budget=BudgetState(),
            called_tools=set(),
            completion=spec.completion,
            goal=None,
            goal_lanes=[],
            stop_hooks=[*self.stop_hooks, *self.client_stop_hooks()],
            depth=depth,
            stop_payload=subagent_stop_payload(spec.name, child.id, parent.turn_id, tool_call_id, depth),
            child_usage=UsageLedger(),
            prompt_hooks=[],  # a child's prompt is its parent's call, not a user's
            opening=None,
            reminders=ReminderMemory(),  # what the child's model was told is its own
            live_tools=None,  # a child's tool set is fixed
            live_names=frozenset(),
        )
        if task is not None:
            task.bind(ctx)
        return ctx

    async def start(
        self, parent: TurnContext, request: ChildRequest, tool_call_id: str, available: dict[str, Tool]
    ) -> ToolResult:
        """Run a child for the parent's `task` call: to its end (foreground), or start it and
        return its id (background). Raises `ToolError` when a limit refuses it."""
        if self._closed:
            raise ToolError("the session is closing; no sub-agents can be started")
        refusal = spawn_refusal(parent.depth, len(self.running()), self.limits)
        if refusal is not None:
            raise ToolError(refusal)
        loop = asyncio.get_running_loop()
        child = _Child(
            id=f"agent-{next(self._ids)}",
            agent=request.spec.name,
            description=request.description,
            parent_turn_id=parent.turn_id,
            background=request.background,
            cancel=asyncio.Event(),
            finished=loop.create_future(),
        )
        self._children[child.id] = child
        ctx = self.child_context(parent, child, request, tool_call_id, available)
        child.ctx = ctx
        link = _link(parent.cancel, child.cancel)
        runner = loop.create_task(self._run(child, ctx, parent, link), name=f"subagent {child.id}")
        self._runners.add(runner)
        runner.add_done_callback(self._runners.discard)
        if request.background:
            now = datetime.now(UTC).isoformat()
            self.on_started(TaskStart(child.id, TaskKind.AGENT, child.description, now, parent.turn_id))
            return ToolResult(
                f"Started {child.id} ({child.agent}) in the background. Its answer arrives as a "
                f'reminder when it finishes; read it any time with task_output (task_id "{child.id}").',
                raw_output=agent_started_output(child.id, child.agent),
            )
        try:
            await asyncio.shield(runner)
        except asyncio.CancelledError:
            # The parent's call was cancelled: the child ends through its own cancel (its
            # loop closes its calls and records its usage), then the cancel goes on.
            child.cancel.set()
            with contextlib.suppress(BaseException):
                await runner
            raise
        return self._result(child)

    async def _run(
        self, child: _Child, ctx: TurnContext, parent: TurnContext, link: asyncio.Future[Any]
    ) -> None:
        events = ctx.events
        assert isinstance(events, NestedEvents)
        events.lifecycle(
            "running", description=child.description, background=child.background, model=ctx.model
        )
        outcome = TurnOutcome.cancelled(EndReason.USER_CANCELLED)  # if the runner itself is killed
        try:
            outcome = await self.run_turn(ctx)
        finally:
            link.cancel()
            child.outcome = outcome
            child.answer = final_answer(outcome, ctx.conversation.messages)
            usage = attributed(child.agent, UsageLedger.from_dict(outcome.turn.get("usage")))
            self._finish(child, parent, usage, events)

    def _finish(self, child: _Child, parent: TurnContext, usage: UsageLedger, events: NestedEvents) -> None:
        outcome = child.outcome
        assert outcome is not None
        try:
            end: dict[str, Any] = {"usage": usage.to_dict(), "answer": child.answer[:ANSWER_CHARS]}
            if outcome.reason is not None:
                end["reason"] = str(outcome.reason)
            events.lifecycle(outcome.kind.value, **end)
            if child.background:
                self.on_usage(usage)
                self.on_finished(self.completion(child.id))
            else:
                parent.child_usage.merge(usage)
        except Exception:  # the child's end stands whatever the listeners do
            log.exception("sub-agent %s: finishing failed", child.id)
        finally:
            child.ctx = None  # its conversation is not kept once its answer is
            if not child.finished.done():
                child.finished.set_result(None)

    def _result(self, child: _Child) -> ToolResult:
        outcome = child.outcome
        assert outcome is not None
        ok = outcome.kind is OutcomeKind.COMPLETED and not outcome.refusal
        text = child.answer or "(the agent gave no answer)"
        if not ok:
            text = f"{text}\n[{self.status(child.id)}]"
        reason = str(outcome.reason) if outcome.reason is not None else None
        raw = agent_result_output(child.id, child.agent, outcome.kind.value, reason)
        return ToolResult(text, is_error=not ok, raw_output=raw)

    # --- queries (AgentTasks for task_output; CompletionSource for the reminders) ---

    def _get(self, task_id: str) -> _Child:
        child = self._children.get(task_id)
        if child is None:
            raise ToolError(f"no sub-agent {task_id!r} in this session")
        return child

    def knows(self, task_id: str) -> bool:
        return task_id in self._children

    def status(self, task_id: str) -> str:
        child = self._get(task_id)
        if not child.done or child.outcome is None:
            return f"agent {child.id} ({child.agent}) is still running"
        outcome = child.outcome
        why = f" ({outcome.reason})" if outcome.reason is not None else ""
        return f"agent {child.id} ({child.agent}) ended {outcome.kind.value}{why}"

    def report(self, task_id: str) -> tuple[str, dict[str, Any]]:
        child = self._get(task_id)
        if child.done:
            child.reported = True
            body = child.answer or "(the agent gave no answer)"
        else:
            messages = child.ctx.conversation.messages if child.ctx is not None else []
            so_far = next((m.content for m in reversed(messages) if m.role == "assistant" and m.content), "")
            body = f"(no answer yet; its latest message: {so_far})" if so_far else "(no answer yet)"
        status = child.outcome.kind.value if child.outcome is not None else None
        raw = agent_report_output(child.id, child.agent, child.done, status)
        return f"{body}\n[{self.status(task_id)}]", raw

    async def wait(self, task_id: str, timeout_s: float, interrupted: asyncio.Event | None) -> str:
        child = self._get(task_id)
        if child.done:
            return "done"
        if interrupted is not None and interrupted.is_set():
            return "interrupted"
        await wait_for_any({child.finished}, timeout_s, interrupted)
        if child.done:
            return "done"
        return "interrupted" if interrupted is not None and interrupted.is_set() else "timeout"

    def completion(self, task_id: str) -> TaskCompletion:
        child = self._get(task_id)
        summary = child.description or child.agent
        end, status = _end_of(child.outcome), self.status(child.id)
        return TaskCompletion(child.id, TaskKind.AGENT, summary, end, status, None, output_call(child.id))

    def _unreported(self) -> list[_Child]:
        if not self._children:
            return []  # asked every turn; most sessions started no sub-agent
        return [c for c in self._children.values() if c.background and c.done and not c.reported]

    def unreported(self) -> list[TaskCompletion]:
        """Background children that ended and whose end the model has not seen yet."""
        if not self._children:
            return []  # (`_unreported`'s own check, without its calls: asked at every turn's end)
        return [self.completion(c.id) for c in self._unreported()]

    def take_completions(self) -> list[TaskCompletion]:
        if not self._children:
            return []  # (likewise: asked before every sampling round)
        out: list[TaskCompletion] = []
        for child in self._unreported():
            child.reported = True
            out.append(self.completion(child.id))
        return out

    # --- lifecycle ---

    async def close(self) -> None:
        """Cancel every running child and wait (bounded) until they ended."""
        self._closed = True
        for child in self._children.values():
            child.cancel.set()
        await stop_runners(self._runners, _CLOSE_GRACE)
