"""The turn loop, L2 (R-L2): what happens around each L3 run.

    opening: the reminders were written with the prompt (session/turn_launch.py);
             user_prompt_submit hooks → add context, or block (no sampling at all)
    loop:
        outcome = L3 with completion recovery
        not Completed, or a refusal → stop (a refusal also pauses a goal)
        goal active → hidden evaluation; Continue → inject continuation, loop
        stop hooks (≤ 8 re-entries) → keep working → append feedback, loop
        stop

Without a goal or stop hooks a turn is exactly one L3 run (R-L2a). The order — goal
first, stop hooks only when the goal does not continue — is fixed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging

from agentd.core import (
    CompletionRecovery,
    Conversation,
    EndReason,
    ErrorKind,
    GoalChanged,
    GoalRound,
    GoalStatus,
    HarnessError,
    Message,
    Notice,
    OutcomeKind,
    ToolCall,
    TurnOutcome,
    reported_as,
    tracing,
)
from agentd.loop.compaction import CompactionReason
from agentd.loop.context import TurnCancelled, TurnContext, run_cancellable
from agentd.loop.goals import (
    GoalAction,
    continuation_text,
    decide_after_evaluation,
    decide_after_verification,
    decide_budget,
    decide_refusal,
    evaluate,
    goal_lanes,
    run_verification,
    with_continuation,
)
from agentd.loop.prompt_hooks import blocked_text, context_reminder, run_prompt_hooks
from agentd.loop.react import TurnState, execute_tool_round, run_compaction, run_react
from agentd.loop.reminders import system_reminder
from agentd.loop.stop_hooks import keep_working_text, run_stop_hooks
from agentd.loop.structured import STRUCTURED_OUTPUT_TOOL
from agentd.loop.turn_reminders import reminder_message
from agentd.tools import HookDecision

log = logging.getLogger(__name__)


RECOVERY_TEXT = system_reminder(
    "Before you finish, you must call the `{tool}` tool — this task is not complete without it. Call it now."
)


async def run_turn(ctx: TurnContext) -> TurnOutcome:
    """L2: the turn's rounds inside its span; whatever goes wrong ends it readably. One
    coroutine (not three nested ones): every resumption of the turn's task re-enters each
    frame on its await chain."""
    attributes = {"agentd.session_id": ctx.session_id, "agentd.turn_id": ctx.turn_id}
    with tracing.turn_span("agentd.turn", attributes, ctx.trace_meta) as span:
        try:
            state = TurnState.for_limits(ctx.limits)
            try:
                outcome = await _open_turn(ctx, state) or await _turn_rounds(ctx, state)
            finally:
                state.usage.merge(ctx.child_usage)  # finished foreground sub-agents (R-T11)
            # The summary is taken at the very end so goal verdicts and hook rounds are on it.
            # 000: a background child still running marks the report incomplete, not dirty: its
            # spend is booked into the session's ledger when it finishes. `reportedAs` is what
            # telemetry reads (000: MaxTurnsReached counts as Cancelled).
            live = ctx.subagents is not None and ctx.subagents.live_from(ctx.turn_id)
            summary = state.summary(
                reported_as=reported_as(outcome.kind, outcome.reason), usage_incomplete=live
            ).wire()
            outcome = outcome.with_turn(summary)
        except TurnCancelled:
            outcome = TurnOutcome.cancelled(EndReason.USER_CANCELLED)
        except HarnessError as err:
            outcome = TurnOutcome.failed(err)
        except Exception as exc:  # a bug must end the turn readably, not kill the session
            log.exception("turn %s crashed", ctx.turn_id)
            outcome = TurnOutcome.failed(
                HarnessError(ErrorKind.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
            )
        if span is not None:
            span.set_attribute("agentd.outcome", outcome.kind.value)
        return outcome


async def _open_turn(ctx: TurnContext, state: TurnState) -> TurnOutcome | None:
    """001's L2 opening, after the reminders and the user message were written: "跑
    UserPromptSubmit hook". A block takes the prompt (and its reminders) out of the
    conversation and ends the turn unsampled; an added context follows the prompt as a
    system reminder. None: go on to the rounds."""
    opening = ctx.opening
    if opening is None:
        return None
    state.reminders.extend(r.as_data() for r in opening.reminders)
    if not ctx.prompt_hooks:
        return None
    verdict = await run_prompt_hooks(ctx, opening.prompt, opening.prompt_id)
    if verdict.decision is HookDecision.BLOCK:
        ctx.conversation.replace(ctx.conversation.messages[: opening.index])
        if opening.told_before is not None:  # its reminders left with it: the next opening says them
            ctx.reminders.restore(opening.told_before)
        notice = Notice(blocked_text(verdict))
        ctx.events.emit(notice)
        return TurnOutcome(OutcomeKind.COMPLETED, reason=EndReason.PROMPT_BLOCKED)
    reminder = context_reminder(verdict)
    if reminder is not None:
        ctx.conversation.append(reminder_message(reminder.render()))
        state.reminders.append(reminder.as_data())
    return None


async def _turn_rounds(ctx: TurnContext, state: TurnState) -> TurnOutcome:
    reentries = 0
    while True:
        tokens_before = state.usage.total.total_tokens
        # Without a completion requirement there is nothing to recover: L3 directly (one
        # frame less on the await chain the turn's task re-enters at every resumption).
        if ctx.completion is None:
            outcome = await run_react(ctx, state)
        else:
            outcome = await run_with_completion_recovery(ctx, state)
        goal = ctx.goal
        if goal is not None:
            goal.tokens_used += state.usage.total.total_tokens - tokens_before
        if outcome.kind is not OutcomeKind.COMPLETED:
            _save_goal(ctx)
            return outcome
        if outcome.refusal:
            if goal is not None:
                goal.assign(decide_refusal(goal))
            _save_goal(ctx)
            return outcome
        if goal is not None and goal.status in (GoalStatus.ACTIVE, GoalStatus.BUDGET_LIMITED):
            if await goal_round_end(ctx, state):
                continue
        if ctx.stop_hooks and reentries < ctx.limits.stop_hooks.max_reentries:
            verdict = await run_stop_hooks(ctx, reentries)
            if verdict.decision is HookDecision.BLOCK:
                reentries += 1
                state.stop_reentries = reentries
                ctx.conversation.append(Message.user(keep_working_text(verdict)))
                continue
        return outcome


# ----------------------------------------------------------------------------- completion (R-L2b)


async def run_with_completion_recovery(ctx: TurnContext, state: TurnState) -> TurnOutcome:
    """Run L3; if the agent definition requires a tool that was not called, remind, back
    off and rerun — without forcing the output schema — up to `max_retries` times."""
    outcome = await run_react(ctx, state)
    req = ctx.completion
    attempt = 0
    while (
        req is not None
        and outcome.kind is OutcomeKind.COMPLETED
        and not outcome.refusal
        and not _requirement_met(req.tool, ctx, outcome)
    ):
        if attempt >= req.max_retries:
            state.auto_recovery_exhausted = True
            notice = Notice(f"The agent finished without calling {req.tool} ({attempt} reminders).")
            ctx.events.emit(notice)
            return TurnOutcome(
                outcome.kind,
                reason=EndReason.AUTO_RECOVERY_EXHAUSTED,
                refusal=outcome.refusal,
                max_tokens=outcome.max_tokens,
                tools_called=outcome.tools_called,
                structured_output=outcome.structured_output,  # its summary: `_run_turn`'s, at the end
            )
        attempt += 1
        delay = req.delay_s(attempt)
        state.completion_recoveries = attempt
        ctx.events.emit(CompletionRecovery(req.tool, attempt, req.max_retries, delay))
        ctx.conversation.append(Message.user(RECOVERY_TEXT.format(tool=req.tool)))
        await run_cancellable(asyncio.sleep(delay), ctx.cancel)
        # Recovery rounds do not force the schema: "call the required tool" and "answer in
        # this schema" must not fight in the same round. A StructuredOutput requirement still
        # needs the (unforced) tool to be there.
        outcome = await run_react(
            ctx, state, force_schema=False, offer_shim=req.tool == STRUCTURED_OUTPUT_TOOL
        )
    return outcome


def _requirement_met(tool: str, ctx: TurnContext, outcome: TurnOutcome) -> bool:
    if tool in ctx.called_tools:
        return True
    # An accepted structured answer (shim call or native JSON) is the StructuredOutput call.
    return tool == STRUCTURED_OUTPUT_TOOL and bool(
        outcome.structured_output and "value" in outcome.structured_output
    )


# ----------------------------------------------------------------------------- goals (R-L2c)


def _save_goal(ctx: TurnContext) -> None:
    if ctx.goal is not None:
        ctx.persist({"goal": ctx.goal.to_dict()})
        ctx.events.emit(GoalChanged(ctx.goal.to_dict()))


async def goal_round_end(ctx: TurnContext, state: TurnState) -> bool:
    """Judge the goal after a completed round; True when the turn should continue. 001's
    order: "评估 → 根据评估结果更新 goal → 读取 goal 状态 → Token 预算" — so a `complete`
    verdict still completes a goal whose budget is spent, and a spent budget ends the turn."""
    goal = ctx.goal
    assert goal is not None
    if goal.status is not GoalStatus.ACTIVE:
        _save_goal(ctx)
        return False
    lanes = list(ctx.goal_lanes) or goal_lanes(
        ctx.provider, ctx.model, ctx.goal_evaluator_model, ctx.limits.goal.attempts
    )
    evaluation = await run_cancellable(
        evaluate(lanes, goal, ctx.todos.as_plan(), ctx.conversation.messages, ctx.limits.goal), ctx.cancel
    )
    for model, usage in evaluation.usage:  # hidden calls are spent tokens too (R-R4)
        state.usage.record(f"goal-evaluator:{model}", usage, ctx.prices.get(model))
        if usage is not None:
            goal.tokens_used += usage.input_tokens + usage.output_tokens + usage.cache_read_tokens
            goal.tokens_used += usage.cache_write_tokens
    if ctx.goal is not goal:
        return False  # the goal was cleared or replaced while it was being judged
    decision = decide_after_evaluation(goal, evaluation.verdict, ctx.limits.goal)
    goal.assign(decision.goal)
    action = decision.action
    verdict_event = GoalRound(evaluation.attempts, action.value)
    if evaluation.verdict is not None:
        verdict_event.verdict = evaluation.verdict.wire()
    if action is GoalAction.VERIFY:
        assert goal.verify is not None
        try:
            passed, output = await run_cancellable(
                run_verification(goal.verify, ctx.cwd, ctx.limits.goal, ctx.shell), ctx.cancel
            )
        except TimeoutError:
            passed, output = False, "verification timed out"
        except OSError as exc:  # the verification could not run at all: it counts as failed
            passed, output = False, f"verification could not run: {exc}"
        if ctx.goal is not goal:
            return False
        verdict_event.verification = {"command": goal.verify, "passed": passed, "output": output[-2000:]}
        decision = decide_after_verification(goal, passed, output, ctx.limits.goal)
        goal.assign(decision.goal)
        action = decision.action
        verdict_event.action = action.value
    if action is GoalAction.CONTINUE:  # read the token budget last
        budget = decide_budget(goal)
        if budget is not None:
            goal.assign(budget.goal)
            action = budget.action
            verdict_event.action = action.value
            verdict_event.budget_spent = True
    state.goal_verdicts.append(verdict_event.wire())
    ctx.events.emit(GoalChanged(goal.to_dict(), state.goal_verdicts[-1]))
    ctx.persist({"goal": goal.to_dict()})
    if action is GoalAction.CONTINUE:
        text = continuation_text(goal, ctx.todos.as_plan())
        ctx.conversation.replace(with_continuation(ctx.conversation.messages, text))
        return True
    return False


async def run_compaction_job(ctx: TurnContext) -> TurnOutcome:
    """A queued `/compact`: fold the history without sampling the agent."""
    state = TurnState()
    try:
        await run_compaction(ctx, state, CompactionReason.REQUESTED)
    except TurnCancelled:
        return TurnOutcome.cancelled(EndReason.USER_CANCELLED)
    except Exception as exc:
        log.exception("compaction job %s crashed", ctx.turn_id)
        return TurnOutcome.failed(HarnessError(ErrorKind.INTERNAL, f"compaction failed: {exc}"))
    return TurnOutcome(OutcomeKind.COMPLETED, turn=state.summary().wire())


async def run_bang(ctx: TurnContext, command: str, call_id: str) -> TurnOutcome:
    """`!cmd`: run it through the ordinary tool path (events, permission rules, plan mode),
    without sampling; the model sees command and output in the next turn."""
    scratch: list[Message] = []
    side = dataclasses.replace(ctx, conversation=Conversation(scratch, lambda i, m: None))
    call = ToolCall(id=call_id, name="bash", arguments=json.dumps({"command": command}))
    result = await execute_tool_round(side, [call])
    output = scratch[-1].content if scratch else ""
    ctx.conversation.append(Message.user(f"I ran `{command}` myself:\n{output}"))
    if result.break_reason is not None:
        return TurnOutcome.cancelled(result.break_reason.end_reason, tools_called=result.executed)
    return TurnOutcome(OutcomeKind.COMPLETED, reason=EndReason.SHELL_COMMAND, tools_called=result.executed)
