"""The L3 step's post-sample decisions (`resolve_step`, `resolve_after_tools`, `shim_presets`),
table-driven, with no server: each row is one branch of the loop."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentd.core import EndReason, LoopReason, OutcomeKind, StationarityReason, reported_as
from agentd.core.conversation import ToolCall
from agentd.core.errors import ErrorKind, HarnessError
from agentd.core.provider import StopReason
from agentd.loop.detection.degeneration import NUDGE_TEXT, Nudge, Stop
from agentd.loop.detection.sequence import LoopAction, LoopVerdict
from agentd.loop.max_tokens import CONTINUE_TEXT, EMPTY_NUDGE_TEXT, MaxTokensLimits
from agentd.loop.react.step import (
    ContinueReason,
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
    shim_presets,
)
from agentd.loop.react.toolrun import BreakReason
from agentd.loop.reminders import is_system_reminder, system_reminder
from agentd.loop.structured import (
    ACCEPTED_TEXT,
    MISSING_CALL_TEXT,
    MIXED_CALL_TEXT,
    STRUCTURED_OUTPUT_TOOL,
    OutputSchema,
    StructuredOutputLimits,
)
from agentd.loop.todo_gate import TodoGateLimits

SCHEMA = OutputSchema.check({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
NATIVE = StepPolicy(schema=SCHEMA, mode=SchemaMode.NATIVE)
SHIM = StepPolicy(schema=SCHEMA, mode=SchemaMode.SHIM)
PLAIN = StepPolicy()
CALL = ToolCall(id="c1", name="read_file", arguments='{"path": "a"}')
TODO = {"content": "write tests", "status": "pending"}


def shim_call(args: Any, call_id: str = "s1") -> ToolCall:
    return ToolCall(id=call_id, name=STRUCTURED_OUTPUT_TOOL, arguments=json.dumps(args))


C0 = StepCounters()

# (id, observation, counters, policy, expected next step, expected counters)
CASES: list[tuple[str, StepObservation, StepCounters, StepPolicy, Any, StepCounters]] = [
    (
        "plain answer completes",
        StepObservation(text="done", stop=StopReason.END_TURN),
        C0,
        PLAIN,
        NextStepFinalOutput(),
        C0,
    ),
    (
        "refusal completes flagged, even with a schema",
        StepObservation(text="no", stop=StopReason.REFUSAL),
        C0,
        NATIVE,
        NextStepFinalOutput(refusal=True),
        C0,
    ),
    (
        "cut-off answer is continued",
        StepObservation(text="half", stop=StopReason.MAX_TOKENS),
        C0,
        PLAIN,
        NextStepContinue(ContinueReason.MAX_TOKENS, CONTINUE_TEXT),
        StepCounters(max_token_continuations=1),
    ),
    (
        "cut-off answer with continuations used up completes flagged",
        StepObservation(text="half", stop=StopReason.MAX_TOKENS),
        StepCounters(max_token_continuations=2),
        PLAIN,
        NextStepFinalOutput(max_tokens=True),
        StepCounters(max_token_continuations=2),
    ),
    (
        "empty cut-off answer is nudged",
        StepObservation(stop=StopReason.MAX_TOKENS),
        C0,
        PLAIN,
        NextStepContinue(ContinueReason.EMPTY_OUTPUT, EMPTY_NUDGE_TEXT),
        StepCounters(empty_retries=1),
    ),
    (
        "empty cut-off answer that stays empty fails readably",
        StepObservation(stop=StopReason.MAX_TOKENS),
        StepCounters(empty_retries=2),
        PLAIN,
        NextStepStop(
            OutcomeKind.FAILED,
            EndReason.EMPTY_MAX_TOKENS,
            error=HarnessError(ErrorKind.INVALID_REQUEST, "placeholder"),
        ),
        StepCounters(empty_retries=2),
    ),
    (
        # 001: TodoGate "可注入 reminder 并 continue" is listed before "插话 … 先写入对话再 continue"
        "the todo gate comes before pending user input",
        StepObservation(text="done", interjections_pending=True, open_todos=(TODO,)),
        C0,
        PLAIN,
        "todo_nudge",
        StepCounters(todo_nudges=1),
    ),
    (
        "pending user input is answered before anything else",
        StepObservation(text="done", interjections_pending=True, open_todos=(TODO,)),
        C0,
        NATIVE,
        NextStepContinue(ContinueReason.INTERJECTION),
        C0,
    ),
    (
        "native: valid JSON completes with the value",
        StepObservation(text='{"n": 3}', stop=StopReason.END_TURN),
        C0,
        NATIVE,
        NextStepFinalOutput(structured_output={"value": {"n": 3}}),
        C0,
    ),
    (
        "native: invalid JSON is retried",
        StepObservation(text="three", stop=StopReason.END_TURN),
        C0,
        NATIVE,
        "retry",
        StepCounters(structured_attempts=1),
    ),
    (
        "native: the third retry is still given",
        StepObservation(text="{}", stop=StopReason.END_TURN),
        StepCounters(structured_attempts=2),
        NATIVE,
        "retry",
        StepCounters(structured_attempts=3),
    ),
    (
        "native: last attempt (the third retry) fails → completes carrying the error",
        StepObservation(text="{}", stop=StopReason.END_TURN),
        StepCounters(structured_attempts=3),
        NATIVE,
        "gave_up",
        StepCounters(structured_attempts=4),
    ),
    (
        "shim: stopping without the call is retried",
        StepObservation(text="the answer is 3", stop=StopReason.END_TURN),
        C0,
        SHIM,
        NextStepContinue(
            ContinueReason.STRUCTURED_RETRY,
            system_reminder(
                f"{MISSING_CALL_TEXT}\nFix the output and call `{STRUCTURED_OUTPUT_TOOL}` again "
                "(3 attempt(s) left)."
            ),
        ),
        StepCounters(structured_attempts=1),
    ),
    (
        "todo gate nudges while todos are open",
        StepObservation(text="done", open_todos=(TODO,)),
        StepCounters(todo_nudges=1),
        PLAIN,
        "todo_nudge",
        StepCounters(todo_nudges=2),
    ),
    (
        "todo gate lets go after its nudges and records what remains",
        StepObservation(text="done", open_todos=(TODO, TODO)),
        StepCounters(todo_nudges=2),
        PLAIN,
        NextStepFinalOutput(),
        StepCounters(todo_nudges=2, todos_remaining=2),
    ),
    (
        "todo gate stays quiet for structured turns",
        StepObservation(text='{"n": 1}', open_todos=(TODO,)),
        C0,
        NATIVE,
        NextStepFinalOutput(structured_output={"value": {"n": 1}}),
        C0,
    ),
    (
        "tool calls run",
        StepObservation(tool_calls=(CALL,), stop=StopReason.TOOL_USE),
        C0,
        PLAIN,
        NextStepRunTools(),
        C0,
    ),
    (
        # 001: "做 动作停滞 统计 … 执行工具" then "圈头：若同一 tool+参数已连打满 16 次 → … 整 turn 停"
        "a repetition stop lets the step run and stops at the next pass's head",
        StepObservation(tool_calls=(CALL,), stationarity=Stop(16, noop=False), tool_rounds=2),
        C0,
        StepPolicy(max_turns=5),
        NextStepRunTools(
            head_stop=NextStepStop(
                OutcomeKind.STATIONARITY_ENDED,
                StationarityReason.IDENTICAL_STEPS,
                nudge=Stop(16, noop=False).as_data(),
            )
        ),
        C0,
    ),
    (
        "a cap already spent (max_turns 0) skips the calls",
        StepObservation(tool_calls=(CALL,), tool_rounds=3),
        C0,
        StepPolicy(max_turns=3),
        NextStepStop(
            OutcomeKind.MAX_TURNS_REACHED,
            EndReason.MAX_TURNS_REACHED,
            skip_tools="Not run: the turn reached its limit of 3 tool rounds.",
        ),
        C0,
    ),
    (
        "a repetition nudge rides along with the round",
        StepObservation(tool_calls=(CALL,), stationarity=Nudge(8), tool_rounds=2),
        C0,
        StepPolicy(max_turns=3),
        NextStepRunTools(nudge=Nudge(8)),
        C0,
    ),
    (
        "native mode never presets tool results",
        StepObservation(tool_calls=(shim_call({"n": 1}),)),
        C0,
        NATIVE,
        NextStepRunTools(),
        C0,
    ),
]


@pytest.mark.parametrize(
    ("obs", "counters", "policy", "expected", "after"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_resolve_step(
    obs: StepObservation, counters: StepCounters, policy: StepPolicy, expected: Any, after: StepCounters
) -> None:
    resolution = resolve_step(obs, counters, policy)
    step = resolution.step
    assert resolution.counters == after
    if expected == "retry":
        assert isinstance(step, NextStepContinue) and step.reason is ContinueReason.STRUCTURED_RETRY
        assert step.message is not None and "Answer again with only JSON" in step.message
        assert is_system_reminder(step.message)
    elif expected == "gave_up":
        assert isinstance(step, NextStepFinalOutput)
        assert step.structured_output is not None and "error" in step.structured_output
    elif expected == "todo_nudge":
        assert isinstance(step, NextStepContinue) and step.reason is ContinueReason.TODO_GATE
        assert step.message is not None and "- [pending] write tests" in step.message
        assert is_system_reminder(step.message)
    elif isinstance(expected, NextStepStop) and expected.error is not None:
        assert isinstance(step, NextStepStop)
        assert (step.kind, step.reason, step.error is not None) == (expected.kind, expected.reason, True)
        assert step.error is not None and step.error.kind is ErrorKind.INVALID_REQUEST
        assert "3 times in a row" in step.error.message
    else:
        assert step == expected


def test_resolve_step_is_pure() -> None:
    """Same input, same answer; the counters passed in are never changed."""
    obs = StepObservation(text="half", stop=StopReason.MAX_TOKENS)
    counters = StepCounters()
    first = resolve_step(obs, counters, PLAIN)
    assert resolve_step(obs, counters, PLAIN) == first
    assert counters == StepCounters()


def test_policy_limits_are_the_ones_used() -> None:
    policy = StepPolicy(
        max_tokens=MaxTokensLimits(max_continuations=0), todo_gate=TodoGateLimits(max_nudges=0)
    )
    cut = resolve_step(StepObservation(text="half", stop=StopReason.MAX_TOKENS), C0, policy)
    assert cut.step == NextStepFinalOutput(max_tokens=True)
    gated = resolve_step(StepObservation(text="done", open_todos=(TODO,)), C0, policy)
    assert gated.step == NextStepFinalOutput() and gated.counters.todos_remaining == 1
    one_try = StepPolicy(
        schema=SCHEMA, mode=SchemaMode.NATIVE, structured=StructuredOutputLimits(max_retries=0)
    )
    gave_up = resolve_step(StepObservation(text="x"), C0, one_try)
    assert isinstance(gave_up.step, NextStepFinalOutput) and gave_up.counters.structured_attempts == 1


# ----------------------------------------------------------------------------- the shim's calls

LIMITS = StructuredOutputLimits()


@pytest.mark.parametrize(
    ("calls", "failed_before", "results", "output", "attempts"),
    [
        ([CALL], 0, {}, None, 0),
        ([shim_call({"n": 1}), CALL], 0, {"s1": (MIXED_CALL_TEXT, True)}, None, 0),
        ([shim_call({"n": 1})], 1, {"s1": (ACCEPTED_TEXT, False)}, {"value": {"n": 1}}, 1),
        (
            [shim_call({"n": 1}), shim_call({"n": 2}, "s2")],
            0,
            {
                "s1": (ACCEPTED_TEXT, False),
                "s2": (f"Rejected: call {STRUCTURED_OUTPUT_TOOL} only once.", True),
            },
            {"value": {"n": 1}},
            0,
        ),
        ([shim_call({"n": "x"})], 0, {"s1": ("retry", True)}, None, 1),
        ([shim_call({"n": "x"})], 2, {"s1": ("retry", True)}, None, 3),
        ([shim_call({"n": "x"})], 3, {"s1": ("error", True)}, "error", 4),
        (
            [ToolCall(id="s1", name=STRUCTURED_OUTPUT_TOOL, arguments="{")],
            0,
            {"s1": ("retry", True)},
            None,
            1,
        ),
    ],
    ids=[
        "no shim",
        "mixed",
        "accepted",
        "twice",
        "invalid retried",
        "third retry given",
        "invalid given up",
        "bad json",
    ],
)
def test_shim_presets(
    calls: list[ToolCall],
    failed_before: int,
    results: dict[str, tuple[str, bool]],
    output: Any,
    attempts: int,
) -> None:
    presets, structured, after = shim_presets(SCHEMA, calls, failed_before, LIMITS)
    assert set(presets) == set(results)
    for call_id, (text, is_error) in results.items():
        assert presets[call_id].is_error is is_error
        if text == "retry":
            assert "attempt(s) left" in presets[call_id].output
        elif text != "error":
            assert presets[call_id].output == text
    if output == "error":
        assert structured is not None and set(structured) == {"error"}
        assert structured["error"] == presets["s1"].output
    else:
        assert structured == output
    assert after == attempts


# ----------------------------------------------------------------------------- after the tools ran

FAILURE = HarnessError(ErrorKind.TOOL_EXECUTION, "boom")


@pytest.mark.parametrize(
    ("run", "round_", "expected"),
    [
        (NextStepRunTools(), ToolRoundObservation(), NextStepContinue(ContinueReason.TOOLS_RAN)),
        (
            NextStepRunTools(structured_output={"value": 1}),
            ToolRoundObservation(failure=FAILURE),
            NextStepStop(OutcomeKind.FAILED, ErrorKind.TOOL_EXECUTION, error=FAILURE),
        ),
        (
            NextStepRunTools(structured_output={"value": 1}),
            ToolRoundObservation(break_reason=BreakReason.PERMISSION_REJECTED),
            NextStepStop(OutcomeKind.CANCELLED, EndReason.PERMISSION_REJECTED),
        ),
        (
            NextStepRunTools(),
            ToolRoundObservation(break_reason=BreakReason.USER_CANCELLED),
            NextStepStop(OutcomeKind.CANCELLED, EndReason.USER_CANCELLED),
        ),
        (
            NextStepRunTools(structured_output={"value": 1}),
            ToolRoundObservation(break_reason=BreakReason.INTERJECTED),
            NextStepStop(OutcomeKind.CANCELLED, EndReason.INTERJECTED),
        ),
        (
            NextStepRunTools(nudge=Nudge(8)),
            ToolRoundObservation(break_reason=BreakReason.INTERJECTED),
            NextStepStop(OutcomeKind.CANCELLED, EndReason.INTERJECTED),
        ),
        (
            NextStepRunTools(nudge=Nudge(8)),
            ToolRoundObservation(),
            NextStepContinue(ContinueReason.STATIONARITY_NUDGE, NUDGE_TEXT, nudge=Nudge(8).as_data()),
        ),
    ],
    ids=[
        "continue",
        "crash beats structured",
        "rejected",
        "cancelled",
        "interjection ends beating structured",
        "interjection ends beating a nudge",
        "nudge",
    ],
)
def test_resolve_after_tools(run: NextStepRunTools, round_: ToolRoundObservation, expected: Any) -> None:
    assert resolve_after_tools(run, round_) == expected


@pytest.mark.parametrize(
    ("breaker", "reason"),
    [
        (BreakReason.PERMISSION_REJECTED, EndReason.PERMISSION_REJECTED),
        (BreakReason.USER_CANCELLED, EndReason.USER_CANCELLED),
        (BreakReason.INTERJECTED, EndReason.INTERJECTED),
    ],
)
def test_every_approval_breaker_ends_the_turn_cancelled(breaker: BreakReason, reason: EndReason) -> None:
    """000: "一旦出现权限拒绝、用户取消或插话…后续调用不再执行…拒绝点之前已批准的调用仍会进入
    并行阶段执行完毕并回填结果，turn 才以 Cancelled 收尾" — all three failures of the user's
    will end the turn `Cancelled`, each with its own reason."""
    assert breaker.end_reason is reason
    step = resolve_after_tools(NextStepRunTools(), ToolRoundObservation(break_reason=breaker))
    assert step == NextStepStop(OutcomeKind.CANCELLED, reason)


# ----------------------------------------------------------------------------- the sequence layer

CYCLE_STOP = LoopVerdict(LoopReason.TOOL_CYCLE, LoopAction.STOP, 6, {"cycleLength": 2}, "Not run: cycle")
CHURN_NUDGE = LoopVerdict(LoopReason.FILE_CHURN, LoopAction.NUDGE, 2, {"path": "x"}, "[file churn] x")
SPIRAL_STOP = LoopVerdict(LoopReason.SHELL_SPIRAL, LoopAction.STOP, 4, {}, "kept failing")


def test_a_cycle_stop_skips_the_steps_tools_before_max_turns() -> None:
    obs = StepObservation(tool_calls=(CALL,), cycle=CYCLE_STOP, tool_rounds=10)
    step = resolve_step(obs, C0, StepPolicy(max_turns=1)).step
    assert step == NextStepStop(
        OutcomeKind.STATIONARITY_ENDED,
        LoopReason.TOOL_CYCLE,
        nudge=CYCLE_STOP.as_data(),
        skip_tools="Not run: cycle",
    )


def test_a_stationarity_stop_wins_over_a_cycle_stop() -> None:
    obs = StepObservation(tool_calls=(CALL,), stationarity=Stop(16, noop=False), cycle=CYCLE_STOP)
    step = resolve_step(obs, C0, PLAIN).step
    assert isinstance(step, NextStepRunTools) and step.head_stop is not None
    assert step.head_stop.reason is StationarityReason.IDENTICAL_STEPS


HEAD_STOP = NextStepStop(
    OutcomeKind.STATIONARITY_ENDED, StationarityReason.NOOP_STEPS, nudge=Stop(4, noop=True).as_data()
)


def test_a_stationarity_stop_waits_for_the_round_then_stops_at_the_head() -> None:
    """001: "每一圈大致顺序 {1. 动作停滞硬停检查 …}" — the round that reached the threshold ran;
    the stop is handed to the next pass's head instead of sampling again."""
    step = resolve_after_tools(NextStepRunTools(head_stop=HEAD_STOP), ToolRoundObservation(tool_rounds=4))
    assert step == NextStepContinue(ContinueReason.STATIONARITY_STOP, head_stop=HEAD_STOP)


def test_a_crash_or_cancel_wins_over_a_head_stop() -> None:
    round_ = ToolRoundObservation(break_reason=BreakReason.USER_CANCELLED)
    step = resolve_after_tools(NextStepRunTools(head_stop=HEAD_STOP), round_)
    assert isinstance(step, NextStepStop) and step.kind is OutcomeKind.CANCELLED


@pytest.mark.parametrize(("rounds", "cap", "ends"), [(2, 2, True), (1, 2, False), (5, None, False)])
def test_max_turns_ends_after_the_nth_round_without_sampling(
    rounds: int, cap: int | None, ends: bool
) -> None:
    """001: "若配置了 max_turns，工具轮次将超过上限 → MaxTurnsReached，结束 L3，不再采样"."""
    step = resolve_after_tools(NextStepRunTools(), ToolRoundObservation(tool_rounds=rounds), cap)
    if ends:
        assert step == NextStepStop(OutcomeKind.MAX_TURNS_REACHED, EndReason.MAX_TURNS_REACHED)
    else:
        assert step == NextStepContinue(ContinueReason.TOOLS_RAN)


def test_max_turns_is_reported_as_cancelled_with_its_reason() -> None:
    """000: "MaxTurnsReached 上报时归类为 Cancelled 加 reason:max_turns_reached 标签"."""
    assert reported_as(OutcomeKind.MAX_TURNS_REACHED, EndReason.MAX_TURNS_REACHED) == {
        "outcome": "cancelled",
        "reason": "max_turns_reached",
    }
    assert reported_as(OutcomeKind.COMPLETED, None) is None


@pytest.mark.parametrize(
    ("run", "loops", "expected"),
    [
        (
            NextStepRunTools(),
            (CHURN_NUDGE, SPIRAL_STOP),
            NextStepStop(
                OutcomeKind.STATIONARITY_ENDED, LoopReason.SHELL_SPIRAL, nudge=SPIRAL_STOP.as_data()
            ),
        ),
        (
            NextStepRunTools(),
            (CHURN_NUDGE,),
            NextStepContinue(ContinueReason.LOOP_NUDGE, "[file churn] x", nudge=CHURN_NUDGE.as_data()),
        ),
        (
            NextStepRunTools(nudge=Nudge(8)),
            (CHURN_NUDGE,),
            NextStepContinue(
                ContinueReason.LOOP_NUDGE, f"[file churn] x\n\n{NUDGE_TEXT}", nudge=CHURN_NUDGE.as_data()
            ),
        ),
        (
            NextStepRunTools(structured_output={"value": 1}),
            (SPIRAL_STOP,),
            NextStepFinalOutput(structured_output={"value": 1}),
        ),
    ],
    ids=["stop-wins", "churn-nudge", "with-stationarity-nudge", "structured-output-first"],
)
def test_resolve_after_tools_acts_on_loop_verdicts(
    run: NextStepRunTools, loops: tuple[LoopVerdict, ...], expected: Any
) -> None:
    assert resolve_after_tools(run, ToolRoundObservation(loops=loops)) == expected


def test_a_cancel_wins_over_a_loop_stop() -> None:
    round_ = ToolRoundObservation(break_reason=BreakReason.USER_CANCELLED, loops=(SPIRAL_STOP,))
    step = resolve_after_tools(NextStepRunTools(), round_)
    assert isinstance(step, NextStepStop) and step.kind is OutcomeKind.CANCELLED
