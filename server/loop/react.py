"""The sampling/tool loop, L3 (R-L3): sample → record → run tools → repeat until the
model stops calling tools. Each exit path returns its own `TurnOutcome`."""

from __future__ import annotations

from server.loop.context import TurnCancelled, TurnContext, run_cancellable
from server.loop.errors import HarnessError
from server.loop.outcome import TurnOutcome
from server.loop.sampling import Sample, build_request, commit_sample, stream_sample
from server.loop.toolrun import execute_tool_round
from server.providers.base import StopReason


async def run_react(ctx: TurnContext) -> TurnOutcome:
    tools_called = 0
    while True:
        if ctx.cancel.is_set():
            return TurnOutcome.cancelled("user_cancelled", tools_called=tools_called)

        request = build_request(ctx)
        sample = Sample()
        try:
            await run_cancellable(stream_sample(ctx, request, sample), ctx.cancel)
        except TurnCancelled:
            # Keep what was streamed: the model should know what it already said.
            sample.tool_calls.clear()
            commit_sample(ctx, sample)
            return TurnOutcome.cancelled("user_cancelled", tools_called=tools_called)
        except HarnessError as err:
            sample.tool_calls.clear()
            commit_sample(ctx, sample)
            return TurnOutcome.failed(err, tools_called=tools_called)
        commit_sample(ctx, sample)

        if not sample.tool_calls:
            return TurnOutcome.completed(
                tools_called=tools_called,
                refusal=sample.stop is StopReason.REFUSAL,
                max_tokens=sample.stop is StopReason.MAX_TOKENS,
            )

        # Drain barrier (R-L3h): clients see the message that asked for the tools first.
        await ctx.events.flushed()
        round_result = await execute_tool_round(ctx, sample.tool_calls)
        tools_called += round_result.executed
        if round_result.break_reason is not None:
            return TurnOutcome.cancelled(round_result.break_reason.value, tools_called=tools_called)
