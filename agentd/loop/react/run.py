"""The sampling/tool loop, L3 (R-L3): sample → record → run tools → repeat until the
model stops calling tools.

The loop only orchestrates I/O. What happens after each sample is decided by one pure
resolver, `step.resolve_step` (and `step.resolve_after_tools` once the tools ran), which
returns a typed next step; the budget gates (`budget`), retry buckets (`retry`), repairs
(`repair`) and compaction trigger (`compaction`) are pure modules too. Everything decided is
recorded on the `TurnState`, which ends up on the `turn_ended` event, and each exit path
returns its own `TurnOutcome`.
"""

from __future__ import annotations

from agentd.core import (
    BudgetStopKind,
    LoopReason,
    Message,
    Notice,
    OutcomeKind,
    ProviderRequest,
    TurnOutcome,
    UsageReported,
    UserMessage,
)
from agentd.loop.budget import BudgetStop, check_budget, grace_decision, render_budget_stop
from agentd.loop.checkpoint import checkpoint_budget_exhaustion
from agentd.loop.compaction import CompactionReason, should_compact
from agentd.loop.context import TurnCancelled, TurnContext
from agentd.loop.drain import drain_barrier
from agentd.loop.react.base import cancelled_outcome, ended_outcome, run_compaction
from agentd.loop.react.recovery import Rebuild, sample_with_recovery
from agentd.loop.react.sampling import Sample, build_request, commit_sample, uses_native_schema
from agentd.loop.react.state import TurnState
from agentd.loop.react.step import (
    NextStepContinue,
    NextStepFinalOutput,
    NextStepRunTools,
    NextStepStop,
    SchemaMode,
    StepCounters,
    StepObservation,
    StepPolicy,
    resolve_step,
)
from agentd.loop.react.tool_round import run_tools
from agentd.loop.react.toolrun import skip_tool_round
from agentd.loop.request_memo import RequestMemo
from agentd.loop.task_notices import drain_task_notices
from agentd.loop.turn_reminders import reminder_message, toolset_reminder, with_live_tools


def drain_interjections(ctx: TurnContext) -> int:
    """Write pending user input into the conversation (L3 step 2). Returns how many."""
    taken = ctx.take_interjections()
    for item in taken:
        message = UserMessage.text(
            f"interjection_{ctx.turn_id}_{len(ctx.conversation)}", item.text, interjection=True
        )
        ctx.events.emit(message, origin=item.origin)
        ctx.conversation.append(Message.user(item.text))
    return len(taken)


def refresh_toolset(ctx: TurnContext, state: TurnState) -> None:
    """L3 step 2, 001: "如有必要，告诉模型当前 MCP 服务器/工具集合发生了什么变化的
    system-reminder". The session's MCP tools are re-read (its servers may have been replaced
    while the turn ran); when the set differs from the last request's, a reminder says what
    changed before the model is sampled with it."""
    servers = None
    if ctx.live_tools is not None:
        live = ctx.live_tools()
        live_tools = live.tools
        # No MCP tool in the turn's set nor now (most sessions): the set is as it was, not
        # rebuilt each round.
        if live_tools or ctx.live_names:
            ctx.tools = with_live_tools(ctx.tools, ctx.live_names, live_tools)
            ctx.live_names = frozenset(live_tools)
        servers = live.servers
    current = frozenset(ctx.tools)
    seen = ctx.reminders.seen_tools
    if seen is not None and seen != current:  # (`toolset_reminder`'s "no change", without its call)
        reminder = toolset_reminder(seen, current)
        if reminder is not None:
            ctx.conversation.append(reminder_message(reminder.render()))
            state.reminders.append(reminder.as_data())
            if servers is not None:  # told: the next turn's opening need not announce them again
                ctx.reminders.mcp_announced = servers
    ctx.reminders.seen_tools = current


GRACE_TEXT = (
    "{message} You get one more step to wrap up: finish or checkpoint what you are doing, "
    "then summarise the state of the work for the user."
)


def _emit_usage(ctx: TurnContext, state: TurnState) -> None:
    cost = state.usage.total.cost
    usage = UsageReported(
        state.context_tokens,
        ctx.context_window,
        state.usage.to_dict(),
        {"amount": round(cost, 6), "currency": "USD"} if cost else None,
    )
    ctx.events.emit(usage)


async def _budget_stopped(ctx: TurnContext, state: TurnState, stop: BudgetStop) -> TurnOutcome:
    message = render_budget_stop(stop)
    state.budget_stop = stop.to_event()
    if stop.kind is BudgetStopKind.MAX_ITERATIONS:
        last_text = next(
            (m.content for m in reversed(ctx.conversation.messages) if m.role == "assistant" and m.content),
            "",
        )
        checkpoint = await checkpoint_budget_exhaustion(ctx.cwd, stop, last_text)
        if checkpoint is not None:
            state.budget_stop["checkpoint"] = checkpoint.to_event()
    notice = Notice(message)
    ctx.events.emit(notice)
    return ended_outcome(state, OutcomeKind.BUDGET_STOPPED, stop.kind)


def _policy(ctx: TurnContext, *, force_schema: bool, offer_shim: bool) -> StepPolicy:
    schema = ctx.output_schema if force_schema or offer_shim else None
    if schema is None:
        mode = SchemaMode.NONE
    elif force_schema and uses_native_schema(ctx):
        mode = SchemaMode.NATIVE
    else:
        mode = SchemaMode.SHIM
    return StepPolicy(
        schema=schema,
        mode=mode,
        max_turns=ctx.max_turns,
        max_tokens=ctx.limits.max_tokens,
        structured=ctx.limits.structured,
        todo_gate=ctx.limits.todo_gate,
    )


def _observe(ctx: TurnContext, state: TurnState, sample: Sample) -> StepObservation:
    """What the resolver needs to know about this sample. The stationarity and cycle detectors
    see every step (a step without tool calls ends a streak). A response cut as repetitive text
    never gets here: `sample_with_recovery` discards it and samples again, so a discarded
    attempt neither counts in nor ends a streak."""
    return StepObservation(
        text=sample.text,
        tool_calls=tuple(sample.tool_calls),
        stop=sample.stop,
        stationarity=state.stationarity.observe(sample.tool_calls),
        cycle=state.loops.observe_step(sample.tool_calls),
        interjections_pending=bool(ctx.interjections),
        open_todos=tuple(ctx.todos.unfinished()),
        tool_rounds=state.tool_rounds,
    )


def _counters(state: TurnState) -> StepCounters:
    return StepCounters(
        max_token_continuations=state.max_token_continuations,
        empty_retries=state.empty_retries,
        structured_attempts=state.structured_attempts,
        todo_nudges=state.todo_nudges,
        todos_remaining=state.todos_remaining,
    )


def _set_counters(state: TurnState, counters: StepCounters) -> None:
    state.max_token_continuations = counters.max_token_continuations
    state.empty_retries = counters.empty_retries
    state.structured_attempts = counters.structured_attempts
    state.todo_nudges = counters.todo_nudges
    state.todos_remaining = counters.todos_remaining


def _finish(state: TurnState, step: NextStepStop | NextStepFinalOutput) -> TurnOutcome:
    if isinstance(step, NextStepStop):
        if step.nudge is not None:
            state.nudges.append(step.nudge)
        return ended_outcome(state, step.kind, step.reason, error=step.error)
    return ended_outcome(
        state,
        OutcomeKind.COMPLETED,
        refusal=step.refusal,
        max_tokens=step.max_tokens,
        structured_output=step.structured_output,
    )


def _continue(ctx: TurnContext, state: TurnState, step: NextStepContinue) -> None:
    state.head_stop = step.head_stop
    if step.nudge is not None:
        state.nudges.append(step.nudge)
    if step.message is not None:
        ctx.conversation.append(Message.user(step.message))


async def _build_request(
    ctx: TurnContext, state: TurnState, *, force_schema: bool, offer_shim: bool
) -> ProviderRequest:
    """Pre-sampling maintenance. The request carries a repaired copy; the stored
    conversation stays exactly as it happened. May compact first (raises TurnCancelled)."""
    memo = ctx.conversation.memo
    if not isinstance(memo, RequestMemo):  # the transcript's first request
        memo = ctx.conversation.memo = RequestMemo()
    messages, repairs = memo.repair(ctx.conversation.messages, ctx.limits.repair)
    state.record_repairs(repairs)
    request = build_request(ctx, messages, force_schema=force_schema, offer_shim=offer_shim)
    estimate = max(memo.estimate(request.messages, request.system), state.context_tokens)
    forced = ctx.compact_requested
    if forced or should_compact(estimate, ctx.context_window, ctx.limits.compaction):
        ctx.compact_requested = False
        reason = CompactionReason.REQUESTED if forced else CompactionReason.THRESHOLD
        if await run_compaction(ctx, state, reason):
            messages, repairs = memo.repair(ctx.conversation.messages, ctx.limits.repair)
            state.record_repairs(repairs)
            request = build_request(ctx, messages, force_schema=force_schema, offer_shim=offer_shim)
    return request


async def run_react(
    ctx: TurnContext, state: TurnState | None = None, *, force_schema: bool = True, offer_shim: bool = False
) -> TurnOutcome:
    """One L3 run. `force_schema=False` drops the output schema (completion recovery rounds)."""
    state = state or TurnState.for_limits(ctx.limits)
    if state.iteration:  # counted per L3 run: a re-entry starts with no streak (a fresh
        state.stationarity.reset()  # state's detectors have seen nothing yet)
        state.loops.reset()
    state.head_stop = None
    policy = _policy(ctx, force_schema=force_schema, offer_shim=offer_shim)

    while True:
        if ctx.cancel.is_set():
            return cancelled_outcome(state)
        # 001: "每一圈大致顺序 {1. 动作停滞硬停检查 …}" — a stationarity stop decided on the
        # last step (whose tools ran) ends the run here, before anything is sampled again.
        if state.head_stop is not None:
            return _finish(state, state.head_stop)

        # Step 1: budget gates, in their fixed order; the first hit wins (R-B1, R-B2).
        stop = check_budget(ctx.budget, ctx.budget_limits)
        if stop is not None:
            if grace_decision(stop, ctx.budget):
                ctx.budget.grant_grace()
                state.grace = True
                ctx.conversation.append(Message.user(GRACE_TEXT.format(message=render_budget_stop(stop))))
            else:
                return await _budget_stopped(ctx, state, stop)
        ctx.budget.begin_iteration()
        state.iteration += 1

        state.interjections += drain_interjections(ctx)
        drain_task_notices(ctx)  # background tasks that finished unseen: one reminder
        refresh_toolset(ctx, state)
        try:
            request = await _build_request(ctx, state, force_schema=force_schema, offer_shim=offer_shim)
        except TurnCancelled:
            return cancelled_outcome(state)

        sampled = await sample_with_recovery(ctx, state, request)
        if isinstance(sampled, TurnOutcome):
            return sampled
        if isinstance(sampled, Rebuild):
            continue  # the context was compacted: build the request again
        sample = sampled

        resolution = resolve_step(_observe(ctx, state, sample), _counters(state), policy)
        _set_counters(state, resolution.counters)
        step = resolution.step
        commit_sample(ctx, sample)
        if sample.usage is not None:
            u = sample.usage
            state.context_tokens = (
                u.input_tokens + u.cache_read_tokens + u.cache_write_tokens + u.output_tokens
            )
            _emit_usage(ctx, state)

        if isinstance(step, NextStepRunTools):
            step = await run_tools(ctx, state, sample, step)
        elif isinstance(step, NextStepStop) and step.skip_tools is not None:
            await drain_barrier(ctx.events.flushed, ctx.cancel, ctx.limits.drain)
            skip_tool_round(ctx, sample.tool_calls, step.skip_tools)
            if step.reason is LoopReason.TOOL_CYCLE:  # surface what it saw, as other loop stops do
                notice = Notice(step.skip_tools)
                ctx.events.emit(notice)
        match step:
            case NextStepContinue():
                _continue(ctx, state, step)
            case NextStepStop() | NextStepFinalOutput():
                return _finish(state, step)
            case NextStepRunTools():  # pragma: no cover - resolve_after_tools never returns it
                raise AssertionError("tools already ran this step")
