"""The L3 step's decisions after a sample (R-L3a/b/e/f/g), as pure functions with a typed result.

`resolve_step` looks at what one provider call produced (a `StepObservation`) and the step
counters so far, and says what happens next: a `NextStep*` value plus the updated counters.
`resolve_after_tools` does the same once the step's tool calls have run. Neither does any
I/O or touches the turn: `run_react` gathers the observation, calls them and acts on the
answer, so every branch of the loop is a row in a table-driven test.

The order of the checks is the loop's contract: the output limit first, then (no tool
calls) pending user input, structured output and the TodoGate, then (tool calls)
repetition before `max_turns` before the structured-output shim. A stationarity stop and the
`max_turns` cap are taken after the step's tools ran, as 001 places them. (A stream cut as
repetitive text never gets here: it goes back to the call retry ladder in `react`.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from agentd.core import EndReason, ErrorKind, HarnessError, OutcomeKind, Reason, StopReason, ToolCall
from agentd.loop.detection import NUDGE_TEXT, LoopAction, LoopVerdict, Nudge, StationarityDecision, Stop
from agentd.loop.max_tokens import (
    CONTINUE_TEXT,
    EMPTY_FAILURE_TEXT,
    EMPTY_NUDGE_TEXT,
    MaxTokensAction,
    MaxTokensLimits,
    on_max_tokens,
)
from agentd.loop.react.toolrun import BreakReason
from agentd.loop.reminders import system_reminder
from agentd.loop.structured import (
    ACCEPTED_TEXT,
    MISSING_CALL_TEXT,
    MIXED_CALL_TEXT,
    STRUCTURED_OUTPUT_TOOL,
    OutputSchema,
    StructuredAccepted,
    StructuredGaveUp,
    StructuredOutputLimits,
    StructuredRetry,
    judge_structured,
    parse_shim_arguments,
    retry_text,
)
from agentd.loop.todo_gate import TodoGateLimits, todo_gate
from agentd.tools import ToolResult

# ----------------------------------------------------------------------------- inputs


class SchemaMode(StrEnum):
    """How this run asks for structured output."""

    NONE = "none"  # no output schema
    NATIVE = "native"  # the provider enforces the schema; the final text must be the JSON
    SHIM = "shim"  # the `StructuredOutput` pseudo-tool carries the answer


@dataclass(frozen=True)
class StepPolicy:
    """What stays fixed for one L3 run."""

    schema: OutputSchema | None = None
    mode: SchemaMode = SchemaMode.NONE
    max_turns: int | None = None
    max_tokens: MaxTokensLimits = field(default_factory=MaxTokensLimits)
    structured: StructuredOutputLimits = field(default_factory=StructuredOutputLimits)
    todo_gate: TodoGateLimits = field(default_factory=TodoGateLimits)


@dataclass(frozen=True)
class StepObservation:
    """What the loop saw after one sample. `stationarity` is the repetition detector's verdict
    on this step's tool calls (the detector is stateful, so the loop asks it for every step
    whose stream was not cut as degenerate; a step without tool calls gets no verdict)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    stop: StopReason | None = None
    stationarity: StationarityDecision | None = None
    cycle: LoopVerdict | None = None  # the sequence layer's verdict on this step (a cycle stop)
    interjections_pending: bool = False  # the user spoke while the model was answering
    open_todos: tuple[dict[str, str], ...] = ()
    tool_rounds: int = 0  # steps whose tools already ran this turn


@dataclass(frozen=True)
class StepCounters:
    """The per-turn counters the decisions read and advance (mirrored on `TurnState`)."""

    max_token_continuations: int = 0
    empty_retries: int = 0
    structured_attempts: int = 0  # failed structured-output attempts
    todo_nudges: int = 0
    todos_remaining: int = 0


# ----------------------------------------------------------------------------- next steps


class ContinueReason(StrEnum):
    INTERJECTION = "interjection"
    MAX_TOKENS = "max_tokens"  # continue a cut-off answer
    EMPTY_OUTPUT = "empty_output"  # the output limit was spent on nothing: nudge
    STRUCTURED_RETRY = "structured_retry"
    TODO_GATE = "todo_gate"
    STATIONARITY_NUDGE = "stationarity_nudge"
    LOOP_NUDGE = "loop_nudge"  # the sequence layer (file churn) asks for a change of approach
    STATIONARITY_STOP = "stationarity_stop"  # the round ran; the next pass's head stops
    TOOLS_RAN = "tools_ran"  # the ordinary case: the model reads the results


@dataclass(frozen=True)
class NextStepContinue:
    """Sample again, after appending `message` (a user message) when there is one."""

    reason: ContinueReason
    message: str | None = None
    nudge: dict[str, Any] | None = None  # a stationarity nudge to record on the turn
    # A stop taken at the head of the next pass, before anything else (001: "每一圈大致顺序
    # {1. 动作停滞硬停检查 …}"): the step that reached the threshold has already run.
    head_stop: NextStepStop | None = None


@dataclass(frozen=True)
class NextStepFinalOutput:
    """The turn completed."""

    refusal: bool = False
    max_tokens: bool = False
    structured_output: dict[str, Any] | None = None


@dataclass(frozen=True)
class NextStepStop:
    """The run ends without completing. `skip_tools` (a final stop with tool calls pending)
    announces the calls and closes each with that text without running them."""

    kind: OutcomeKind
    reason: Reason
    error: HarnessError | None = None
    nudge: dict[str, Any] | None = None  # the detector verdict to record on the turn
    skip_tools: str | None = None


@dataclass(frozen=True)
class NextStepRunTools:
    """Run the step's tool calls. `presets` are results already decided (the shim's calls);
    `structured_output`, when set, completes the turn once the round went through."""

    presets: dict[str, ToolResult] = field(default_factory=dict)
    structured_output: dict[str, Any] | None = None
    nudge: Nudge | None = None  # a stationarity nudge, given after the round
    head_stop: NextStepStop | None = None  # a stationarity stop, taken at the next pass's head


NextStep = NextStepContinue | NextStepFinalOutput | NextStepStop | NextStepRunTools


@dataclass(frozen=True)
class Resolution:
    step: NextStep
    counters: StepCounters


# ----------------------------------------------------------------------------- decisions


def resolve_step(obs: StepObservation, counters: StepCounters, policy: StepPolicy) -> Resolution:
    """What to do after one sample."""
    refusal = obs.stop is StopReason.REFUSAL
    if obs.stop is StopReason.MAX_TOKENS and not obs.tool_calls:
        cut = _on_max_tokens(obs, counters, policy)
        if cut is not None:
            return cut
    if not obs.tool_calls:
        return _no_tool_calls(obs, counters, policy, refusal)
    return _tool_calls(obs, counters, policy)


def _on_max_tokens(obs: StepObservation, counters: StepCounters, policy: StepPolicy) -> Resolution | None:
    action = on_max_tokens(
        has_content=bool(obs.text),
        continuations=counters.max_token_continuations,
        empty_retries=counters.empty_retries,
        limits=policy.max_tokens,
    )
    match action:
        case MaxTokensAction.CONTINUE:
            return Resolution(
                NextStepContinue(ContinueReason.MAX_TOKENS, CONTINUE_TEXT),
                dataclasses.replace(counters, max_token_continuations=counters.max_token_continuations + 1),
            )
        case MaxTokensAction.NUDGE:
            return Resolution(
                NextStepContinue(ContinueReason.EMPTY_OUTPUT, EMPTY_NUDGE_TEXT),
                dataclasses.replace(counters, empty_retries=counters.empty_retries + 1),
            )
        case MaxTokensAction.FAIL:
            text = EMPTY_FAILURE_TEXT.format(n=counters.empty_retries + 1)
            stop = NextStepStop(
                OutcomeKind.FAILED,
                EndReason.EMPTY_MAX_TOKENS,
                error=HarnessError(ErrorKind.INVALID_REQUEST, text),
            )
            return Resolution(stop, counters)
        case MaxTokensAction.ACCEPT:
            return None  # complete with the cut-off answer, flagged max_tokens


def _no_tool_calls(
    obs: StepObservation, counters: StepCounters, policy: StepPolicy, refusal: bool
) -> Resolution:
    # 001, no tool call: "TodoGate（…）：若 todo 列表仍有 pending / in_progress … 可注入 reminder
    # 并 continue" comes before "插话：若 turn 中途攒了用户插话，先写入对话再 continue".
    schema = policy.schema
    gate = todo_gate(
        obs.open_todos,
        counters.todo_nudges,
        refusal=refusal,
        structured=schema is not None,
        limits=policy.todo_gate,
    )
    if gate.nudge is not None:
        after = dataclasses.replace(counters, todo_nudges=counters.todo_nudges + 1)
        return Resolution(NextStepContinue(ContinueReason.TODO_GATE, gate.nudge), after)
    if obs.interjections_pending:
        return Resolution(NextStepContinue(ContinueReason.INTERJECTION), counters)
    if schema is not None and not refusal:
        native = policy.mode is SchemaMode.NATIVE
        value, error = schema.validate_json_text(obs.text) if native else (None, MISSING_CALL_TEXT)
        verdict = judge_structured(value, error, counters.structured_attempts, policy.structured)
        match verdict:
            case StructuredAccepted():
                return Resolution(NextStepFinalOutput(structured_output=verdict.output()), counters)
            case StructuredGaveUp():
                after = dataclasses.replace(counters, structured_attempts=verdict.attempts)
                return Resolution(NextStepFinalOutput(structured_output=verdict.output()), after)
            case StructuredRetry():
                text = system_reminder(
                    retry_text(verdict.error, verdict.attempts, policy.structured, native=native)
                )
                after = dataclasses.replace(counters, structured_attempts=verdict.attempts)
                return Resolution(NextStepContinue(ContinueReason.STRUCTURED_RETRY, text), after)
    if gate.todos_remaining is not None:
        counters = dataclasses.replace(counters, todos_remaining=gate.todos_remaining)
    final = NextStepFinalOutput(refusal=refusal, max_tokens=obs.stop is StopReason.MAX_TOKENS)
    return Resolution(final, counters)


def _tool_calls(obs: StepObservation, counters: StepCounters, policy: StepPolicy) -> Resolution:
    # 001, tool path: "做 动作停滞 统计 … 执行工具" — the step that reaches the stationarity
    # threshold still runs; the stop is taken at the head of the next pass ("圈头：若同一
    # tool+参数已连打满 16 次 → … 整 turn 停"), before sampling again.
    decision = obs.stationarity
    head_stop = None
    if isinstance(decision, Stop):
        head_stop = NextStepStop(OutcomeKind.STATIONARITY_ENDED, decision.reason, nudge=decision.as_data())
    if head_stop is None and obs.cycle is not None and obs.cycle.action is LoopAction.STOP:
        cycle = obs.cycle
        stop = NextStepStop(
            OutcomeKind.STATIONARITY_ENDED, cycle.reason, nudge=cycle.as_data(), skip_tools=cycle.message
        )
        return Resolution(stop, counters)
    # Only reachable with a cap of 0 (or a re-entry past the cap): after the Nth round the
    # run already ended without sampling (`resolve_after_tools`).
    if policy.max_turns is not None and obs.tool_rounds >= policy.max_turns:
        stop = NextStepStop(
            OutcomeKind.MAX_TURNS_REACHED,
            EndReason.MAX_TURNS_REACHED,
            skip_tools=f"Not run: the turn reached its limit of {policy.max_turns} tool rounds.",
        )
        return Resolution(stop, counters)
    nudge = decision if isinstance(decision, Nudge) else None
    if policy.schema is None or policy.mode is not SchemaMode.SHIM:
        return Resolution(NextStepRunTools(nudge=nudge, head_stop=head_stop), counters)
    presets, output, attempts = shim_presets(
        policy.schema, obs.tool_calls, counters.structured_attempts, policy.structured
    )
    after = dataclasses.replace(counters, structured_attempts=attempts)
    return Resolution(NextStepRunTools(presets, output, nudge, head_stop), after)


def shim_presets(
    schema: OutputSchema, calls: Sequence[ToolCall], failed_before: int, limits: StructuredOutputLimits
) -> tuple[dict[str, ToolResult], dict[str, Any] | None, int]:
    """Decide the `StructuredOutput` calls of one step (shim path): the results to write for
    them, the turn's structured output when it is settled, and the failed attempts so far."""
    shim = [c for c in calls if c.name == STRUCTURED_OUTPUT_TOOL]
    if not shim:
        return {}, None, failed_before
    if len(shim) < len(calls):  # mixed with real tools: reject the shim, run the rest
        return {c.id: ToolResult(MIXED_CALL_TEXT, is_error=True) for c in shim}, None, failed_before
    first, extra = shim[0], shim[1:]
    presets = {
        c.id: ToolResult(f"Rejected: call {STRUCTURED_OUTPUT_TOOL} only once.", is_error=True) for c in extra
    }
    value, error = parse_shim_arguments(schema, first.arguments)
    verdict = judge_structured(value, error, failed_before, limits)
    match verdict:
        case StructuredAccepted():
            presets[first.id] = ToolResult(ACCEPTED_TEXT, raw_output={"accepted": True})
            return presets, verdict.output(), failed_before
        case StructuredGaveUp():
            presets[first.id] = ToolResult(verdict.error, is_error=True)
            return presets, verdict.output(), verdict.attempts
        case StructuredRetry():
            text = retry_text(verdict.error, verdict.attempts, limits)
            presets[first.id] = ToolResult(text, is_error=True)
            return presets, None, verdict.attempts


@dataclass(frozen=True)
class ToolRoundObservation:
    """How the step's tool round went."""

    failure: HarnessError | None = None  # a tool kept crashing (the retry bucket is exhausted)
    break_reason: BreakReason | None = None
    loops: tuple[LoopVerdict, ...] = ()  # the sequence layer's verdicts on the round
    tool_rounds: int = 0  # rounds run this turn, this one included


def resolve_after_tools(
    run: NextStepRunTools, round_: ToolRoundObservation, max_turns: int | None = None
) -> NextStep:
    """What to do once the step's tools ran: a crash or a circuit breaker (any of them: the
    user's will stops the turn) ends the run, an accepted (or given-up) structured answer
    completes it, a stationarity stop waits for the next pass's head, the Nth round of a
    `max_turns` cap ends the run without another sample, otherwise sample again."""
    if round_.failure is not None:
        return NextStepStop(OutcomeKind.FAILED, round_.failure.kind, error=round_.failure)
    if round_.break_reason is not None:
        return NextStepStop(OutcomeKind.CANCELLED, round_.break_reason.end_reason)
    if run.structured_output is not None:
        return NextStepFinalOutput(structured_output=run.structured_output)
    stop = next((v for v in round_.loops if v.action is LoopAction.STOP), None)
    if stop is not None:  # file churn, malformed calls or a shell spiral: final, like stationarity
        return NextStepStop(OutcomeKind.STATIONARITY_ENDED, stop.reason, nudge=stop.as_data())
    if run.head_stop is not None:
        return NextStepContinue(ContinueReason.STATIONARITY_STOP, head_stop=run.head_stop)
    # 001: "若配置了 max_turns，工具轮次将超过上限 → MaxTurnsReached，结束 L3，不再采样".
    if max_turns is not None and round_.tool_rounds >= max_turns:
        return NextStepStop(OutcomeKind.MAX_TURNS_REACHED, EndReason.MAX_TURNS_REACHED)
    nudge = next((v for v in round_.loops if v.action is LoopAction.NUDGE), None)
    if nudge is not None:
        texts = [t for t in (nudge.message, NUDGE_TEXT if run.nudge else None) if t]
        data = nudge.as_data()
        return NextStepContinue(ContinueReason.LOOP_NUDGE, "\n\n".join(texts), nudge=data)
    if run.nudge is not None:
        return NextStepContinue(ContinueReason.STATIONARITY_NUDGE, NUDGE_TEXT, nudge=run.nudge.as_data())
    return NextStepContinue(ContinueReason.TOOLS_RAN)
