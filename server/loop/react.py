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

import asyncio
from typing import Any

from server.core.conversation import Message
from server.core.errors import ErrorKind, HarnessError
from server.core.events import EventKind
from server.core.provider import ProviderRequest, Usage
from server.core.updates import CompactionProgress, CompactionStatus, Notice, UserMessage
from server.loop.budget import (
    BudgetStop,
    BudgetStopKind,
    check_budget,
    grace_decision,
    render_budget_stop,
)
from server.loop.checkpoint import checkpoint_budget_exhaustion
from server.loop.compaction import CompactionReason, compact, compactable, should_compact
from server.loop.context import TurnCancelled, TurnContext, run_cancellable
from server.loop.detection import DegenerationReason, RepetitionHit, RetriableHit, retriable_response
from server.loop.drain import DrainResult, drain_barrier
from server.loop.loop_detector import LoopAction, LoopReason, LoopVerdict
from server.loop.outcome import EndReason, OutcomeKind, Reason, TurnOutcome
from server.loop.retry import Bucket, Decision, LoopDecision
from server.loop.sampling import Sample, build_request, commit_sample, stream_sample, uses_native_schema
from server.loop.step import (
    NextStep,
    NextStepContinue,
    NextStepFinalOutput,
    NextStepRunTools,
    NextStepStop,
    SchemaMode,
    StepCounters,
    StepObservation,
    StepPolicy,
    ToolRoundObservation,
    resolve_after_tools,
    resolve_step,
)
from server.loop.task_notices import drain_task_notices
from server.loop.toolrun import BreakReason, execute_tool_round, skip_tool_round
from server.loop.turn_state import TurnState


def drain_interjections(ctx: TurnContext) -> int:
    """Write pending user input into the conversation (L3 step 2). Returns how many."""
    taken = ctx.take_interjections()
    for item in taken:
        message = UserMessage.text(
            f"interjection_{ctx.turn_id}_{len(ctx.conversation)}", item.text, interjection=True
        )
        ctx.events.emit(message.kind, message.payload(), origin=item.origin)
        ctx.conversation.append(Message.user(item.text))
    return len(taken)


def _compaction_progress(ctx: TurnContext, update: CompactionProgress) -> None:
    ctx.events.emit_transient(update.kind, update.payload())


async def run_compaction(ctx: TurnContext, state: TurnState, reason: CompactionReason | str) -> bool:
    """Fold older history into a summary (R-L3d). True when the conversation changed.
    A failing summariser leaves the conversation as it was."""
    reason = CompactionReason(reason)
    if not compactable(ctx.conversation.messages, ctx.limits.compaction):
        return False  # say nothing: there is no compaction to report
    progress_id = f"compaction_{ctx.turn_id}_{state.iteration}"
    _compaction_progress(ctx, CompactionProgress(progress_id, CompactionStatus.IN_PROGRESS))
    try:
        result = await run_cancellable(
            compact(
                ctx.provider,
                ctx.model,
                ctx.conversation.messages,
                ctx.limits.compaction,
                compaction_id=progress_id,
            ),
            ctx.cancel,
        )
    except HarnessError as err:
        _compaction_progress(ctx, CompactionProgress(progress_id, CompactionStatus.FAILED, err.message))
        state.compactions.append({"reason": reason.value, "failed": err.kind.value})
        return False
    if result is None:
        _compaction_progress(
            ctx,
            CompactionProgress(progress_id, CompactionStatus.CANCELLED, "nothing old enough to compact"),
        )
        return False
    ctx.conversation.replace(result.messages)
    completed = result.to_update(reason)
    ctx.events.emit(completed.kind, completed.payload())
    state.compactions.append({"reason": reason.value, "replacedMessages": len(result.replaced)})
    state.context_tokens = 0  # the provider's last report no longer describes the request
    return True


CANCELLED_BEFORE_TOOLS = "Not run: the user cancelled the turn before its tools started."

GRACE_TEXT = (
    "{message} You get one more step to wrap up: finish or checkpoint what you are doing, "
    "then summarise the state of the work for the user."
)


class _Rebuild:
    """Marker: the request must be built again (the context was compacted)."""


_REBUILD = _Rebuild()


def _ended(
    state: TurnState,
    kind: OutcomeKind,
    reason: Reason | None = None,
    *,
    error: HarnessError | None = None,
    refusal: bool = False,
    max_tokens: bool = False,
    structured_output: dict[str, Any] | None = None,
) -> TurnOutcome:
    return TurnOutcome(
        kind,
        reason=reason,
        refusal=refusal,
        max_tokens=max_tokens,
        tools_called=state.tools_called,
        error=error,
        turn=state.summary(),
        structured_output=structured_output,
    )


def _cancelled(state: TurnState) -> TurnOutcome:
    return _ended(state, OutcomeKind.CANCELLED, EndReason.USER_CANCELLED)


def _emit_usage(ctx: TurnContext, state: TurnState) -> None:
    payload: dict[str, Any] = {
        "used": state.context_tokens,
        "size": ctx.context_window,
        "prompt": state.usage.to_dict(),
    }
    if state.usage.total.cost:
        payload["cost"] = {"amount": round(state.usage.total.cost, 6), "currency": "USD"}
    ctx.events.emit(EventKind.USAGE, payload)


def _record_decision(ctx: TurnContext, state: TurnState, decision: LoopDecision, err: HarnessError) -> None:
    ctx.persist({"retry_state": ctx.retry.to_dict()})
    data = {
        **decision.to_event(),
        "error": {"kind": err.kind.value, "message": err.message},
        "lane": ctx.lane,
    }
    state.retries.append(data)
    ctx.events.emit(EventKind.RETRY, data)


DEGENERATE_TEXT = "[This response kept repeating itself; it was cut off and discarded.]"


async def _retry_degenerate(
    ctx: TurnContext, state: TurnState, sample: Sample, hit: RepetitionHit | RetriableHit
) -> TurnOutcome | None:
    """A response cut as repetitive text goes back to the call retry ladder (003:
    `is_repetitive_output` → "响应层回到调用重试梯"), as octos does: its content is replaced
    (the stored final text says what happened, and the discarded attempt never enters the
    conversation), its tool calls go with it (the cut response is incomplete), and the call
    is made again after a backoff. None: sample again; an outcome once the
    `degenerate_output` bucket is exhausted (a degeneration stop, R-L3b)."""
    state.usage.record(ctx.lane, sample.usage, ctx.prices.get(ctx.model))  # spent all the same
    state.nudges.append(hit.as_data())
    if isinstance(hit, RepetitionHit):
        sample.text = DEGENERATE_TEXT
    sample.tool_calls = []
    commit_sample(ctx, sample, discarded=True)
    decision = ctx.retry.observe_degenerate_output()
    ctx.persist({"retry_state": ctx.retry.to_dict()})
    data = {**decision.to_event(), "degenerate": hit.as_data(), "lane": ctx.lane}
    state.retries.append(data)
    ctx.events.emit(EventKind.RETRY, data)
    if not decision.retries:
        what = "kept repeating itself" if isinstance(hit, RepetitionHit) else "kept answering nothing"
        notice = Notice(f"The model {what} ({decision.attempt} responses in a row); the turn stopped.")
        ctx.events.emit(notice.kind, notice.payload())
        if hit.reason is DegenerationReason.FILTERED_RESPONSE:  # still filtered: it is a refusal
            return _ended(state, OutcomeKind.COMPLETED, refusal=True)
        return _ended(state, OutcomeKind.STATIONARITY_ENDED, hit.reason)
    try:
        await run_cancellable(asyncio.sleep(decision.delay_s), ctx.cancel)
    except TurnCancelled:
        return _cancelled(state)
    return None


async def _sample_with_recovery(
    ctx: TurnContext, state: TurnState, request: ProviderRequest
) -> Sample | TurnOutcome | _Rebuild:
    """Sample once; typed provider errors go through the retry buckets, which decide:
    retry after a delay, rotate to the next lane, compact and rebuild, or give up. So does
    a response cut as repetitive text (`_retry_degenerate`)."""
    while True:
        sample = Sample()
        try:
            await run_cancellable(stream_sample(ctx, request, sample), ctx.cancel)
        except TurnCancelled:
            # Keep what was streamed: the model should know what it already said. Its usage
            # is unknown (cancel never waits for a slow usage drain): the ledger is dirty.
            state.usage.record(ctx.lane, sample.usage, ctx.prices.get(ctx.model))
            sample.tool_calls.clear()
            commit_sample(ctx, sample)
            return _cancelled(state)
        except HarnessError as err:
            # A discarded attempt still cost tokens on its lane (or its usage is unknown). A
            # request refused with an HTTP error before any output spent nothing.
            refused = err.status is not None and not (sample.text or sample.reasoning or sample.tool_calls)
            usage = sample.usage if sample.usage is not None or not refused else Usage()
            state.usage.record(ctx.lane, usage, ctx.prices.get(ctx.model))
            commit_sample(ctx, sample, discarded=True)
            decision = ctx.retry.observe(err, has_fallback=bool(ctx.fallbacks))
            _record_decision(ctx, state, decision, err)
            match decision.decision:
                case Decision.CONTINUE:
                    try:
                        await run_cancellable(asyncio.sleep(decision.delay_s), ctx.cancel)
                    except TurnCancelled:
                        return _cancelled(state)
                    continue
                case Decision.ROTATE_AND_RETRY:
                    ctx.rotate_lane()
                    request.model = ctx.model
                    continue
                case Decision.COMPACT_AND_RETRY if not state.overflow_compacted:
                    # Compact and retry, once per turn (the bucket also counts across turns).
                    state.overflow_compacted = True
                    try:
                        if await run_compaction(ctx, state, CompactionReason.CONTEXT_OVERFLOW):
                            return _REBUILD
                    except TurnCancelled:
                        return _cancelled(state)
                    return _ended(state, OutcomeKind.FAILED, err.kind, error=err)
                case _:
                    return _ended(state, OutcomeKind.FAILED, err.kind, error=err)
        hit = sample.degenerate or retriable_response(
            sample.text,
            bool(sample.reasoning or sample.reasoning_blocks),
            len(sample.tool_calls),
            sample.stop,
        )
        if hit is not None:  # 003: "响应层回到调用重试梯"
            degenerate = await _retry_degenerate(ctx, state, sample, hit)
            if degenerate is None:
                continue
            return degenerate
        state.usage.record(ctx.lane, sample.usage, ctx.prices.get(ctx.model))
        if sample.usage is not None:
            ctx.budget.record_usage(sample.usage)
        ctx.budget.mark_progress()
        # A success resets no provider bucket: a storm spread over turns must still exhaust
        # it (seed 003); the buckets' sliding window forgives old failures instead (retry.py).
        # Only the repetition streak ends with a clean response (octos' per-call retry).
        if ctx.retry.count(Bucket.DEGENERATE_OUTPUT):
            ctx.retry.record_success(Bucket.DEGENERATE_OUTPUT)
            ctx.persist({"retry_state": ctx.retry.to_dict()})
        return sample


def _observe_tool_crashes(
    ctx: TurnContext, state: TurnState, crashed: list[str], succeeded: int
) -> HarnessError | None:
    """Crashing tools count in the tool_execution bucket; a tool that keeps crashing ends
    the turn instead of spinning. A productive call resets the bucket."""
    for text in crashed:
        err = HarnessError(ErrorKind.TOOL_EXECUTION, text)
        decision = ctx.retry.observe(err, has_fallback=False)
        _record_decision(ctx, state, decision, err)
        if decision.decision is Decision.EXHAUSTED:
            return err
    if succeeded and not crashed and ctx.retry.count(Bucket.TOOL_EXECUTION):
        ctx.retry.record_success(Bucket.TOOL_EXECUTION)
        ctx.persist({"retry_state": ctx.retry.to_dict()})
    return None


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
    ctx.events.emit(notice.kind, notice.payload())
    return _ended(state, OutcomeKind.BUDGET_STOPPED, stop.kind)


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
    """What the resolver needs to know about this sample. The repetition detector sees every
    step whose stream was not cut (a step without tool calls ends a streak)."""
    stationarity = cycle = None
    if sample.degenerate is None:
        stationarity = state.stationarity.observe(sample.tool_calls)
        cycle = state.loops.observe_step(sample.tool_calls)
    return StepObservation(
        text=sample.text,
        tool_calls=tuple(sample.tool_calls),
        stop=sample.stop,
        stationarity=stationarity,
        cycle=cycle,
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
        return _ended(state, step.kind, step.reason, error=step.error)
    return _ended(
        state,
        OutcomeKind.COMPLETED,
        refusal=step.refusal,
        max_tokens=step.max_tokens,
        structured_output=step.structured_output,
    )


def _continue(ctx: TurnContext, state: TurnState, step: NextStepContinue) -> None:
    if step.nudge is not None:
        state.nudges.append(step.nudge)
    if step.message is not None:
        ctx.conversation.append(Message.user(step.message))


async def _run_tools(ctx: TurnContext, state: TurnState, sample: Sample, run: NextStepRunTools) -> NextStep:
    # Drain barrier (R-L3h): clients see the message that asked for the tools first.
    if await drain_barrier(ctx.events.flushed, ctx.cancel, ctx.limits.drain) is DrainResult.CANCELLED:
        skip_tool_round(ctx, sample.tool_calls, CANCELLED_BEFORE_TOOLS)
        return resolve_after_tools(run, ToolRoundObservation(None, BreakReason.USER_CANCELLED))
    state.tool_rounds += 1
    round_result = await execute_tool_round(
        ctx, sample.tool_calls, no_progress=state.no_progress, presets=run.presets
    )
    state.tools_called += round_result.executed
    for _ in range(round_result.succeeded):
        ctx.budget.record_productive_tool_call()
    ctx.budget.mark_progress()
    failure = _observe_tool_crashes(ctx, state, round_result.crashed, round_result.succeeded)
    loops = _observe_loops(ctx, state, state.loops.observe_round(round_result.records))
    return resolve_after_tools(run, ToolRoundObservation(failure, round_result.break_reason, loops))


def _observe_loops(
    ctx: TurnContext, state: TurnState, verdicts: list[LoopVerdict]
) -> tuple[LoopVerdict, ...]:
    """Act on the sequence layer's round verdicts: a shell spiral counts in the `shell_spiral`
    bucket (003: "observe_shell_spiral…第一次螺旋就 Escalate（停住 shell 重试、上抛最近输出），超限则
    Exhausted"; both stop), and every stop surfaces what it saw as a notice."""
    for verdict in verdicts:
        if verdict.reason is LoopReason.SHELL_SPIRAL:
            decision = ctx.retry.observe_shell_spiral()
            ctx.persist({"retry_state": ctx.retry.to_dict()})
            data = {**decision.to_event(), "loop": verdict.as_data(), "lane": ctx.lane}
            state.retries.append(data)
            ctx.events.emit(EventKind.RETRY, data)
        if verdict.action is LoopAction.STOP and verdict.message:
            notice = Notice(verdict.message)
            ctx.events.emit(notice.kind, notice.payload())
    return tuple(verdicts)


async def _build_request(
    ctx: TurnContext, state: TurnState, *, force_schema: bool, offer_shim: bool
) -> ProviderRequest:
    """Pre-sampling maintenance. The request carries a repaired copy; the stored
    conversation stays exactly as it happened. May compact first (raises TurnCancelled)."""
    memo = ctx.conversation.memo
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
    state.stationarity.reset()  # counted per L3 run: a re-entry starts with no streak
    state.loops.reset()
    policy = _policy(ctx, force_schema=force_schema, offer_shim=offer_shim)

    while True:
        if ctx.cancel.is_set():
            return _cancelled(state)

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
        try:
            request = await _build_request(ctx, state, force_schema=force_schema, offer_shim=offer_shim)
        except TurnCancelled:
            return _cancelled(state)

        sampled = await _sample_with_recovery(ctx, state, request)
        if isinstance(sampled, TurnOutcome):
            return sampled
        if isinstance(sampled, _Rebuild):
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
            step = await _run_tools(ctx, state, sample, step)
        elif isinstance(step, NextStepStop) and step.skip_tools is not None:
            await drain_barrier(ctx.events.flushed, ctx.cancel, ctx.limits.drain)
            skip_tool_round(ctx, sample.tool_calls, step.skip_tools)
        match step:
            case NextStepContinue():
                _continue(ctx, state, step)
            case NextStepStop() | NextStepFinalOutput():
                return _finish(state, step)
            case NextStepRunTools():  # pragma: no cover - resolve_after_tools never returns it
                raise AssertionError("tools already ran this step")
