"""The sampling/tool loop, L3 (R-L3): sample → record → run tools → repeat until the
model stops calling tools.

The loop only orchestrates. Every decision comes from a small pure module — repairs
(`repair`), stationarity and degeneration (`detection`), the output limit
(`max_tokens`), structured output (`structured`), the TodoGate (`todo_gate`) — and
is recorded on the `TurnState`, which ends up on the `turn_ended` event. Each exit path
returns its own `TurnOutcome`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from server.core.conversation import Message, ToolCall
from server.core.errors import ErrorKind, HarnessError
from server.core.events import EventKind
from server.core.provider import ProviderRequest, StopReason, Usage
from server.loop.budget import (
    BudgetStop,
    BudgetStopKind,
    check_budget,
    checkpoint_budget_exhaustion,
    grace_decision,
    render_budget_stop,
)
from server.loop.compaction import compact, compactable, estimate_tokens, should_compact
from server.loop.context import TurnCancelled, TurnContext, run_cancellable
from server.loop.detection import NUDGE_TEXT, Nudge, Stop
from server.loop.max_tokens import (
    CONTINUE_TEXT,
    EMPTY_FAILURE_TEXT,
    EMPTY_NUDGE_TEXT,
    MaxTokensAction,
    on_max_tokens,
)
from server.loop.outcome import OutcomeKind, TurnOutcome
from server.loop.repair import repair_conversation
from server.loop.retry import PROVIDER_BUCKETS, Bucket, Decision, LoopDecision
from server.loop.sampling import Sample, build_request, commit_sample, stream_sample, uses_native_schema
from server.loop.structured import (
    ACCEPTED_TEXT,
    MISSING_CALL_TEXT,
    MIXED_CALL_TEXT,
    STRUCTURED_OUTPUT_TOOL,
    OutputSchema,
    StructuredOutputLimits,
    retry_text,
)
from server.loop.todo_gate import todo_gate
from server.loop.toolrun import execute_tool_round, skip_tool_round
from server.loop.turn_state import TurnState
from server.tools.base import ToolResult


def drain_interjections(ctx: TurnContext) -> int:
    """Write pending user input into the conversation (L3 step 2). Returns how many."""
    taken = ctx.take_interjections()
    for item in taken:
        ctx.events.emit(
            EventKind.USER_MESSAGE,
            {
                "messageId": f"interjection_{ctx.turn_id}_{len(ctx.conversation)}",
                "content": [{"type": "text", "text": item.text}],
                "interjection": True,
            },
            origin=item.origin,
        )
        ctx.conversation.append(Message.user(item.text))
    return len(taken)


async def run_compaction(ctx: TurnContext, state: TurnState, reason: str) -> bool:
    """Fold older history into a summary (R-L3d). True when the conversation changed.
    A failing summariser leaves the conversation as it was."""
    if not compactable(ctx.conversation.messages, ctx.limits.compaction):
        return False  # say nothing: there is no compaction to report
    progress_id = f"compaction_{ctx.turn_id}_{state.iteration}"
    ctx.events.emit_transient(
        EventKind.COMPACTION_PROGRESS,
        {"sessionUpdate": "compaction_update", "compactionId": progress_id, "status": "in_progress"},
    )
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
        ctx.events.emit_transient(
            EventKind.COMPACTION_PROGRESS,
            {
                "sessionUpdate": "compaction_update",
                "compactionId": progress_id,
                "status": "failed",
                "error": err.message,
            },
        )
        state.compactions.append({"reason": reason, "failed": err.kind.value})
        return False
    if result is None:
        ctx.events.emit_transient(
            EventKind.COMPACTION_PROGRESS,
            {
                "sessionUpdate": "compaction_update",
                "compactionId": progress_id,
                "status": "cancelled",
                "error": "nothing old enough to compact",
            },
        )
        return False
    ctx.conversation.replace(result.messages)
    ctx.events.emit(EventKind.COMPACTION, result.to_event(reason))
    state.compactions.append({"reason": reason, "replacedMessages": len(result.replaced)})
    state.context_tokens = 0  # the provider's last report no longer describes the request
    return True


GRACE_TEXT = (
    "{message} You get one more step to wrap up: finish or checkpoint what you are doing, "
    "then summarise the state of the work for the user."
)


class _Rebuild:
    """Marker: the request must be built again (the context was compacted)."""


_REBUILD = _Rebuild()


def _emit_usage(ctx: TurnContext, state: TurnState) -> None:
    payload: dict[str, Any] = {
        "used": state.context_tokens,
        "size": ctx.context_window,
        "prompt": state.usage.to_dict(),
    }
    if state.usage.total.cost:
        payload["cost"] = {"amount": round(state.usage.total.cost, 6), "currency": "USD"}
    ctx.events.emit(EventKind.USAGE, payload)


def _provider_buckets_succeeded(ctx: TurnContext) -> None:
    """A successful call resets the buckets of the provider-side error kinds (R-R2)."""
    changed = False
    for bucket in PROVIDER_BUCKETS:
        if ctx.retry.count(bucket):
            ctx.retry.record_success(bucket)
            changed = True
    if changed:
        ctx.persist({"retry_state": ctx.retry.to_dict()})


def _record_decision(ctx: TurnContext, state: TurnState, decision: LoopDecision, err: HarnessError) -> None:
    ctx.persist({"retry_state": ctx.retry.to_dict()})
    data = {
        **decision.to_event(),
        "error": {"kind": err.kind.value, "message": err.message},
        "lane": ctx.lane,
    }
    state.retries.append(data)
    ctx.events.emit(EventKind.RETRY, data)


async def _sample_with_recovery(
    ctx: TurnContext, state: TurnState, request: ProviderRequest, ended: Callable[..., TurnOutcome]
) -> Sample | TurnOutcome | _Rebuild:
    """Sample once; typed provider errors go through the retry buckets, which decide:
    retry after a delay, rotate to the next lane, compact and rebuild, or give up."""
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
            return ended(OutcomeKind.CANCELLED, "user_cancelled")
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
                        return ended(OutcomeKind.CANCELLED, "user_cancelled")
                    continue
                case Decision.ROTATE_AND_RETRY:
                    ctx.rotate_lane()
                    request.model = ctx.model
                    continue
                case Decision.COMPACT_AND_RETRY if not state.overflow_compacted:
                    # Compact and retry, once per turn (the bucket also counts across turns).
                    state.overflow_compacted = True
                    try:
                        if await run_compaction(ctx, state, "context_overflow"):
                            return _REBUILD
                    except TurnCancelled:
                        return ended(OutcomeKind.CANCELLED, "user_cancelled")
                    return ended(OutcomeKind.FAILED, err.kind.value, error=err)
                case _:
                    return ended(OutcomeKind.FAILED, err.kind.value, error=err)
        state.usage.record(ctx.lane, sample.usage, ctx.prices.get(ctx.model))
        ctx.budget.record_usage(sample.usage) if sample.usage is not None else None
        ctx.budget.mark_progress()
        _provider_buckets_succeeded(ctx)
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


async def _budget_stopped(
    ctx: TurnContext, state: TurnState, stop: BudgetStop, ended: Callable[..., TurnOutcome]
) -> TurnOutcome:
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
    ctx.events.emit(EventKind.NOTICE, {"severity": "warning", "title": message})
    return ended(OutcomeKind.BUDGET_STOPPED, stop.kind.value)


def _structured_presets(
    schema: OutputSchema, calls: list[ToolCall], state: TurnState, limits: StructuredOutputLimits
) -> tuple[dict[str, ToolResult], dict[str, Any] | None]:
    """Decide the StructuredOutput calls of one step (shim path). Returns the results to
    write for them and, when the turn is settled, its structured output."""
    shim = [c for c in calls if c.name == STRUCTURED_OUTPUT_TOOL]
    if not shim:
        return {}, None
    if len(shim) < len(calls):  # mixed with real tools: reject the shim, run the rest
        return {c.id: ToolResult(MIXED_CALL_TEXT, is_error=True) for c in shim}, None
    first, extra = shim[0], shim[1:]
    presets = {
        c.id: ToolResult(f"Rejected: call {STRUCTURED_OUTPUT_TOOL} only once.", is_error=True) for c in extra
    }
    try:
        value: Any = json.loads(first.arguments or "{}")
        error = schema.validate(value)
    except json.JSONDecodeError as exc:
        value, error = None, f"The arguments are not valid JSON ({exc.msg} at position {exc.pos})."
    if error is None:
        presets[first.id] = ToolResult(ACCEPTED_TEXT, raw_output={"accepted": True})
        return presets, {"value": value}
    state.structured_attempts += 1
    if state.structured_attempts >= limits.max_attempts:
        presets[first.id] = ToolResult(error, is_error=True)
        return presets, {"error": error}
    presets[first.id] = ToolResult(retry_text(error, state.structured_attempts, limits), is_error=True)
    return presets, None


async def run_react(
    ctx: TurnContext, state: TurnState | None = None, *, force_schema: bool = True, offer_shim: bool = False
) -> TurnOutcome:
    """One L3 run. `force_schema=False` drops the output schema (completion recovery rounds)."""
    state = state or TurnState.for_limits(ctx.limits)
    schema = ctx.output_schema if force_schema or offer_shim else None
    native = schema is not None and force_schema and uses_native_schema(ctx)

    def ended(kind: OutcomeKind, reason: str | None = None, **kw: Any) -> TurnOutcome:
        return TurnOutcome(kind, reason=reason, tools_called=state.tools_called, turn=state.summary(), **kw)

    while True:
        if ctx.cancel.is_set():
            return ended(OutcomeKind.CANCELLED, "user_cancelled")

        # Step 1: budget gates, in their fixed order; the first hit wins (R-B1, R-B2).
        stop = check_budget(ctx.budget, ctx.budget_limits)
        if stop is not None:
            if grace_decision(stop, ctx.budget):
                ctx.budget.grant_grace()
                state.grace = True
                ctx.conversation.append(Message.user(GRACE_TEXT.format(message=render_budget_stop(stop))))
            else:
                return await _budget_stopped(ctx, state, stop, ended)
        ctx.budget.begin_iteration()
        state.iteration += 1

        # Pre-sampling maintenance. The request carries a repaired copy; the stored
        # conversation stays exactly as it happened.
        state.interjections += drain_interjections(ctx)
        messages, repairs = repair_conversation(ctx.conversation.messages, ctx.limits.repair)
        state.record_repairs(repairs)
        request = build_request(ctx, messages, force_schema=force_schema, offer_shim=offer_shim)
        estimate = max(estimate_tokens(request.messages, request.system), state.context_tokens)
        forced = ctx.compact_requested
        if forced or should_compact(estimate, ctx.context_window, ctx.limits.compaction):
            ctx.compact_requested = False
            try:
                changed = await run_compaction(ctx, state, "requested" if forced else "threshold")
            except TurnCancelled:
                return ended(OutcomeKind.CANCELLED, "user_cancelled")
            if changed:
                messages, repairs = repair_conversation(ctx.conversation.messages, ctx.limits.repair)
                state.record_repairs(repairs)
                request = build_request(ctx, messages, force_schema=force_schema, offer_shim=offer_shim)

        sampled = await _sample_with_recovery(ctx, state, request, ended)
        if isinstance(sampled, TurnOutcome):
            return sampled
        if sampled is _REBUILD:
            continue  # the context was compacted: build the request again
        sample = sampled
        if sample.degenerate is not None:
            sample.tool_calls.clear()
            commit_sample(ctx, sample)
            state.nudges.append(sample.degenerate.as_data())
            return ended(OutcomeKind.STATIONARITY_ENDED, sample.degenerate.reason.value)
        commit_sample(ctx, sample)
        if sample.usage is not None:
            u = sample.usage
            state.context_tokens = (
                u.input_tokens + u.cache_read_tokens + u.cache_write_tokens + u.output_tokens
            )
            _emit_usage(ctx, state)

        refusal = sample.stop is StopReason.REFUSAL
        if sample.stop is StopReason.MAX_TOKENS and not sample.tool_calls:
            action = on_max_tokens(
                has_content=bool(sample.text),
                continuations=state.max_token_continuations,
                empty_retries=state.empty_retries,
                limits=ctx.limits.max_tokens,
            )
            if action is MaxTokensAction.CONTINUE:
                state.max_token_continuations += 1
                ctx.conversation.append(Message.user(CONTINUE_TEXT))
                continue
            if action is MaxTokensAction.NUDGE:
                state.empty_retries += 1
                ctx.conversation.append(Message.user(EMPTY_NUDGE_TEXT))
                continue
            if action is MaxTokensAction.FAIL:
                text = EMPTY_FAILURE_TEXT.format(n=state.empty_retries + 1)
                return ended(
                    OutcomeKind.FAILED,
                    "empty_max_tokens",
                    error=HarnessError(ErrorKind.INVALID_REQUEST, text),
                )

        if not sample.tool_calls:
            if ctx.interjections:
                continue  # the user spoke while the model was answering: answer that too
            if schema is not None and not refusal:
                if native:
                    value, error = schema.validate_json_text(sample.text)
                else:
                    value, error = None, MISSING_CALL_TEXT
                if error is None:
                    return ended(OutcomeKind.COMPLETED, structured_output={"value": value})
                state.structured_attempts += 1
                if state.structured_attempts >= ctx.limits.structured.max_attempts:
                    return ended(OutcomeKind.COMPLETED, structured_output={"error": error})
                ctx.conversation.append(
                    Message.user(
                        retry_text(error, state.structured_attempts, ctx.limits.structured, native=native)
                    )
                )
                continue
            nudge = todo_gate(
                ctx.todos, state, refusal=refusal, structured=schema is not None, limits=ctx.limits.todo_gate
            )
            if nudge is not None:
                ctx.conversation.append(Message.user(nudge))
                continue
            return ended(
                OutcomeKind.COMPLETED, refusal=refusal, max_tokens=sample.stop is StopReason.MAX_TOKENS
            )

        # Repetition is judged before anything runs and before max_turns, so a loop is
        # caught before the counter runs out (R-L3b).
        decision = state.stationarity.observe(sample.tool_calls)
        if isinstance(decision, Stop):
            state.nudges.append(decision.as_data())
            await ctx.events.flushed()
            skip_tool_round(
                ctx, sample.tool_calls, f"Not run: the same step was repeated {decision.count} times."
            )
            return ended(OutcomeKind.STATIONARITY_ENDED, decision.reason.value)
        if ctx.max_turns is not None and state.tool_rounds >= ctx.max_turns:
            await ctx.events.flushed()
            skip_tool_round(
                ctx, sample.tool_calls, f"Not run: the turn reached its limit of {ctx.max_turns} tool rounds."
            )
            return ended(OutcomeKind.MAX_TURNS_REACHED, "max_turns_reached")

        presets: dict[str, ToolResult] = {}
        structured_result: dict[str, Any] | None = None
        if schema is not None and not native:
            presets, structured_result = _structured_presets(
                schema, sample.tool_calls, state, ctx.limits.structured
            )

        # Drain barrier (R-L3h): clients see the message that asked for the tools first.
        await ctx.events.flushed()
        state.tool_rounds += 1
        round_result = await execute_tool_round(
            ctx, sample.tool_calls, no_progress=state.no_progress, presets=presets
        )
        state.tools_called += round_result.executed
        for _ in range(round_result.succeeded):
            ctx.budget.record_productive_tool_call()
        ctx.budget.mark_progress()
        failure = _observe_tool_crashes(ctx, state, round_result.crashed, round_result.succeeded)
        if failure is not None:
            return ended(OutcomeKind.FAILED, failure.kind.value, error=failure)
        if round_result.break_reason is not None and round_result.break_reason.ends_turn:
            return ended(OutcomeKind.CANCELLED, round_result.break_reason.value)
        if structured_result is not None:
            return ended(OutcomeKind.COMPLETED, structured_output=structured_result)
        if isinstance(decision, Nudge):
            state.nudges.append(decision.as_data())
            ctx.conversation.append(Message.user(NUDGE_TEXT))
