"""The sampling/tool loop, L3 (R-L3): sample → record → run tools → repeat until the
model stops calling tools. Each exit path returns its own `TurnOutcome`; the decisions
(repairs, stationarity, degeneration, TodoGate) come from pure modules and are recorded
on the turn state."""

from __future__ import annotations

from server.loop.context import TurnCancelled, TurnContext, run_cancellable
from server.loop.conversation import Message
from server.loop.detection import NUDGE_TEXT, Nudge, Stop
from server.loop.errors import HarnessError
from server.loop.outcome import OutcomeKind, TurnOutcome
from server.loop.repair import repair_conversation
from server.loop.sampling import Sample, build_request, commit_sample, stream_sample
from server.loop.todo_gate import todo_gate
from server.loop.toolrun import execute_tool_round, skip_tool_round
from server.loop.turn_state import TurnState
from server.providers.base import StopReason
from server.session.events import EventKind


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


async def run_react(ctx: TurnContext, state: TurnState | None = None) -> TurnOutcome:
    state = state or TurnState()

    def ended(kind: OutcomeKind, reason: str | None = None, **kw: object) -> TurnOutcome:
        return TurnOutcome(kind, reason=reason, tools_called=state.tools_called, turn=state.summary(), **kw)  # type: ignore[arg-type]

    while True:
        if ctx.cancel.is_set():
            return ended(OutcomeKind.CANCELLED, "user_cancelled")
        state.iteration += 1

        # Pre-sampling maintenance. The request carries a repaired copy; the stored
        # conversation stays exactly as it happened.
        state.interjections += drain_interjections(ctx)
        messages, repairs = repair_conversation(ctx.conversation.messages)
        state.record_repairs(repairs)
        request = build_request(ctx, messages)

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
            return ended(OutcomeKind.FAILED, err.kind.value, error=err)
        if sample.degenerate is not None:
            sample.tool_calls.clear()
            commit_sample(ctx, sample)
            state.nudges.append(sample.degenerate.as_data())
            return ended(OutcomeKind.STATIONARITY_ENDED, sample.degenerate.reason.value)
        commit_sample(ctx, sample)

        if not sample.tool_calls:
            refusal = sample.stop is StopReason.REFUSAL
            if ctx.interjections:
                continue  # the user spoke while the model was answering: answer that too
            nudge = todo_gate(ctx.todos, state, refusal=refusal, structured=False)
            if nudge is not None:
                ctx.conversation.append(Message.user(nudge))
                continue
            return ended(
                OutcomeKind.COMPLETED, refusal=refusal, max_tokens=sample.stop is StopReason.MAX_TOKENS
            )

        # Repetition is judged before anything runs, so a loop is caught early (R-L3b).
        decision = state.stationarity.observe(sample.tool_calls)
        if isinstance(decision, Stop):
            state.nudges.append(decision.as_data())
            await ctx.events.flushed()
            skip_tool_round(
                ctx, sample.tool_calls, f"Not run: the same step was repeated {decision.count} times."
            )
            return ended(OutcomeKind.STATIONARITY_ENDED, decision.reason.value)

        # Drain barrier (R-L3h): clients see the message that asked for the tools first.
        await ctx.events.flushed()
        round_result = await execute_tool_round(ctx, sample.tool_calls, no_progress=state.no_progress)
        state.tools_called += round_result.executed
        if round_result.break_reason is not None and round_result.break_reason.ends_turn:
            return ended(OutcomeKind.CANCELLED, round_result.break_reason.value)
        if isinstance(decision, Nudge):
            state.nudges.append(decision.as_data())
            ctx.conversation.append(Message.user(NUDGE_TEXT))
