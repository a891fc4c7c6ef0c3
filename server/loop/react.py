"""The sampling/tool loop, L3 (R-L3): sample → record → run tools → repeat until the
model stops calling tools.

The loop only orchestrates. Every decision comes from a small pure module — repairs
(`repair`), stationarity and degeneration (`detection`), the output limit
(`max_tokens`), structured output (`structured`), the TodoGate (`todo_gate`) — and
is recorded on the `TurnState`, which ends up on the `turn_ended` event. Each exit path
returns its own `TurnOutcome`.
"""

from __future__ import annotations

import json
from typing import Any

from server.loop.compaction import compact, estimate_tokens, should_compact
from server.loop.context import TurnCancelled, TurnContext, run_cancellable
from server.loop.conversation import Message, ToolCall
from server.loop.detection import NUDGE_TEXT, Nudge, Stop
from server.loop.errors import ErrorKind, HarnessError
from server.loop.max_tokens import (
    CONTINUE_TEXT,
    EMPTY_FAILURE_TEXT,
    EMPTY_NUDGE_TEXT,
    MaxTokensAction,
    on_max_tokens,
)
from server.loop.outcome import OutcomeKind, TurnOutcome
from server.loop.repair import repair_conversation
from server.loop.sampling import Sample, build_request, commit_sample, stream_sample, uses_native_schema
from server.loop.structured import (
    ACCEPTED_TEXT,
    MISSING_CALL_TEXT,
    MIXED_CALL_TEXT,
    STRUCTURED_OUTPUT_TOOL,
    OutputSchema,
    retry_text,
)
from server.loop.structured import (
    DEFAULT_LIMITS as STRUCTURED_LIMITS,
)
from server.loop.todo_gate import todo_gate
from server.loop.toolrun import execute_tool_round, skip_tool_round
from server.loop.turn_state import TurnState
from server.providers.base import StopReason
from server.session.events import EventKind
from server.tools.base import ToolResult


def drain_interjections(ctx: TurnContext) -> int:
    """Write pending user input into the conversation (L3 step 2). Returns how many."""
    taken = ctx.take_interjections()
    for text in taken:
        ctx.events.emit(
            EventKind.USER_MESSAGE,
            {
                "messageId": f"interjection_{ctx.turn_id}_{len(ctx.conversation)}",
                "content": [{"type": "text", "text": text}],
                "interjection": True,
            },
        )
        ctx.conversation.append(Message.user(text))
    return len(taken)


async def run_compaction(ctx: TurnContext, state: TurnState, reason: str) -> bool:
    """Fold older history into a summary (R-L3d). True when the conversation changed.
    A failing summariser leaves the conversation as it was."""
    progress_id = f"compaction_{ctx.turn_id}_{state.iteration}"
    ctx.events.emit_transient(
        EventKind.COMPACTION_PROGRESS,
        {"sessionUpdate": "compaction_update", "compactionId": progress_id, "status": "in_progress"},
    )
    try:
        result = await run_cancellable(
            compact(ctx.provider, ctx.model, ctx.conversation.messages), ctx.cancel
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


def _structured_presets(
    schema: OutputSchema, calls: list[ToolCall], state: TurnState
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
    if state.structured_attempts >= STRUCTURED_LIMITS.max_attempts:
        presets[first.id] = ToolResult(error, is_error=True)
        return presets, {"error": error}
    presets[first.id] = ToolResult(retry_text(error, state.structured_attempts), is_error=True)
    return presets, None


async def run_react(
    ctx: TurnContext, state: TurnState | None = None, *, force_schema: bool = True
) -> TurnOutcome:
    """One L3 run. `force_schema=False` drops the output schema (completion recovery rounds)."""
    state = state or TurnState()
    schema = ctx.output_schema if force_schema else None
    native = schema is not None and uses_native_schema(ctx)

    def ended(kind: OutcomeKind, reason: str | None = None, **kw: Any) -> TurnOutcome:
        return TurnOutcome(kind, reason=reason, tools_called=state.tools_called, turn=state.summary(), **kw)

    while True:
        if ctx.cancel.is_set():
            return ended(OutcomeKind.CANCELLED, "user_cancelled")
        state.iteration += 1

        # Pre-sampling maintenance. The request carries a repaired copy; the stored
        # conversation stays exactly as it happened.
        state.interjections += drain_interjections(ctx)
        messages, repairs = repair_conversation(ctx.conversation.messages)
        state.record_repairs(repairs)
        request = build_request(ctx, messages, force_schema=force_schema)
        estimate = max(estimate_tokens(request.messages, request.system), state.context_tokens)
        forced = ctx.compact_requested
        if forced or should_compact(estimate, ctx.context_window):
            ctx.compact_requested = False
            try:
                changed = await run_compaction(ctx, state, "requested" if forced else "threshold")
            except TurnCancelled:
                return ended(OutcomeKind.CANCELLED, "user_cancelled")
            if changed:
                messages, repairs = repair_conversation(ctx.conversation.messages)
                state.record_repairs(repairs)
                request = build_request(ctx, messages, force_schema=force_schema)

        sample = Sample()
        try:
            await run_cancellable(stream_sample(ctx, request, sample), ctx.cancel)
        except TurnCancelled:
            # Keep what was streamed: the model should know what it already said.
            sample.tool_calls.clear()
            commit_sample(ctx, sample)
            return ended(OutcomeKind.CANCELLED, "user_cancelled")
        except HarnessError as err:
            sample.tool_calls.clear()
            commit_sample(ctx, sample)
            if err.kind is ErrorKind.CONTEXT_OVERFLOW and not state.overflow_compacted:
                # The provider says the request is too big: compact and retry, once.
                state.overflow_compacted = True
                try:
                    if await run_compaction(ctx, state, "context_overflow"):
                        continue
                except TurnCancelled:
                    return ended(OutcomeKind.CANCELLED, "user_cancelled")
            return ended(OutcomeKind.FAILED, err.kind.value, error=err)
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

        refusal = sample.stop is StopReason.REFUSAL
        if sample.stop is StopReason.MAX_TOKENS and not sample.tool_calls:
            action = on_max_tokens(
                has_content=bool(sample.text),
                continuations=state.max_token_continuations,
                empty_retries=state.empty_retries,
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
                if state.structured_attempts >= STRUCTURED_LIMITS.max_attempts:
                    return ended(OutcomeKind.COMPLETED, structured_output={"error": error})
                ctx.conversation.append(Message.user(retry_text(error, state.structured_attempts)))
                continue
            nudge = todo_gate(ctx.todos, state, refusal=refusal, structured=schema is not None)
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
            presets, structured_result = _structured_presets(schema, sample.tool_calls, state)

        # Drain barrier (R-L3h): clients see the message that asked for the tools first.
        await ctx.events.flushed()
        state.tool_rounds += 1
        round_result = await execute_tool_round(
            ctx, sample.tool_calls, no_progress=state.no_progress, presets=presets
        )
        state.tools_called += round_result.executed
        if round_result.break_reason is not None and round_result.break_reason.ends_turn:
            return ended(OutcomeKind.CANCELLED, round_result.break_reason.value)
        if structured_result is not None:
            return ended(OutcomeKind.COMPLETED, structured_output=structured_result)
        if isinstance(decision, Nudge):
            state.nudges.append(decision.as_data())
            ctx.conversation.append(Message.user(NUDGE_TEXT))
