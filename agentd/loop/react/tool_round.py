"""The tool round of the L3 loop (`react`): drain barrier, execution, and what crashing
tools and the loop detector's round verdicts decide."""

from __future__ import annotations

from agentd.core import ErrorKind, HarnessError, LoopReason, Notice, RetryDecided
from agentd.loop.context import TurnContext
from agentd.loop.detection import LoopAction, LoopVerdict
from agentd.loop.drain import DrainResult, drain_barrier
from agentd.loop.react.base import record_decision
from agentd.loop.react.sampling import Sample
from agentd.loop.react.state import TurnState
from agentd.loop.react.step import (
    NextStep,
    NextStepRunTools,
    ToolRoundObservation,
    resolve_after_tools,
)
from agentd.loop.react.toolrun import BreakReason, execute_tool_round, skip_tool_round
from agentd.loop.retry import Bucket, Decision

CANCELLED_BEFORE_TOOLS = "Not run: the user cancelled the turn before its tools started."


def _observe_tool_crashes(
    ctx: TurnContext, state: TurnState, crashed: list[str], succeeded: int
) -> HarnessError | None:
    """Crashing tools count in the tool_execution bucket; a tool that keeps crashing ends
    the turn instead of spinning. A productive call resets the bucket."""
    for text in crashed:
        err = HarnessError(ErrorKind.TOOL_EXECUTION, text)
        decision = ctx.retry.observe(err, has_fallback=False)
        record_decision(ctx, state, decision, err)
        if decision.decision is Decision.EXHAUSTED:
            return err
    if succeeded and not crashed and ctx.retry.count(Bucket.TOOL_EXECUTION):
        ctx.retry.record_success(Bucket.TOOL_EXECUTION)
        ctx.persist({"retry_state": ctx.retry.to_dict()})
    return None


async def run_tools(ctx: TurnContext, state: TurnState, sample: Sample, run: NextStepRunTools) -> NextStep:
    # Drain barrier (R-L3h): clients see the message that asked for the tools first.
    if await drain_barrier(ctx.events.flushed, ctx.cancel, ctx.limits.drain) is DrainResult.CANCELLED:
        skip_tool_round(ctx, sample.tool_calls, CANCELLED_BEFORE_TOOLS)
        return resolve_after_tools(run, ToolRoundObservation(None, BreakReason.USER_CANCELLED), ctx.max_turns)
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
    observed = ToolRoundObservation(failure, round_result.break_reason, loops, state.tool_rounds)
    return resolve_after_tools(run, observed, ctx.max_turns)


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
            retry = RetryDecided(decision.to_event(), loop=verdict.as_data(), lane=ctx.lane)
            state.retries.append(retry.to_record())
            ctx.events.emit(retry)
        if verdict.action is LoopAction.STOP and verdict.message:
            notice = Notice(verdict.message)
            ctx.events.emit(notice)
    return tuple(verdicts)
