"""The sequence layer's pure detectors (`agentd/loop/detection/sequence.py`) and the response
layer's `retriable_response` (`agentd/loop/detection/degeneration.py`), driven step by step."""

from __future__ import annotations

import json

import pytest

from agentd.core import DegenerationReason, LoopReason, parse_reason
from agentd.core.conversation import ToolCall
from agentd.core.provider import StopReason
from agentd.loop.detection.degeneration import retriable_response, step_signature
from agentd.loop.detection.sequence import (
    CallRecord,
    CycleDetector,
    FileChurn,
    LoopAction,
    LoopDetector,
    LoopDetectorLimits,
    MalformedCalls,
    ShellSpiral,
    find_cycle,
    shell_failed,
)
from agentd.loop.limits import LoopLimits

LIMITS = LoopDetectorLimits()


def call(name: str, **args: object) -> list[ToolCall]:
    return [ToolCall(id=f"c_{name}", name=name, arguments=json.dumps(args))]


A, B, C, D = (
    call("list_dir", path="."),
    call("glob", pattern="*"),
    call("read_file", path="x"),
    call("grep", q="y"),
)


# ---------------------------------------------------------------------------- cycles


@pytest.mark.parametrize(
    ("sequence", "expected"),
    [
        ("ababab", 2),
        ("abab", None),  # two repeats only
        ("aaaaaa", None),  # one step repeated: stationarity's job
        ("abcabcabc", 3),
        ("abcdabcdabcd", 4),
        ("aabbaabbaabb", 4),
        ("xababab", 2),  # what came before the cycle does not matter
        ("ababax", None),
        ("abcabcab", None),
    ],
)
def test_find_cycle(sequence: str, expected: int | None) -> None:
    assert find_cycle(list(sequence), LIMITS) == expected


def test_a_cycle_longer_than_the_window_allows_is_not_looked_for() -> None:
    limits = LoopDetectorLimits(cycle_window=8, max_cycle_length=4)
    assert find_cycle(list("abcdabcdabcd"), limits) is None
    assert find_cycle(list("abcabcabc"), limits) is None  # 9 steps > window of 8
    assert find_cycle(list("ababab"), limits) == 2


def test_cycle_detector_stops_at_the_third_repeat_and_starts_over() -> None:
    detector = CycleDetector(LIMITS)
    verdicts = [detector.observe(s) for s in (A, B, A, B, A)]
    assert verdicts == [None] * 5
    stop = detector.observe(B)
    assert stop is not None
    assert (stop.reason, stop.action, stop.count) == (LoopReason.TOOL_CYCLE, LoopAction.STOP, 6)
    assert stop.as_data() == {"action": "stop", "reason": "tool_cycle", "count": 6, "cycleLength": 2}
    assert stop.message is not None and "cycle of 2 steps" in stop.message
    assert list(detector.signatures) == []  # a new sequence after a stop


def test_a_text_step_breaks_a_cycle() -> None:
    detector = CycleDetector(LIMITS)
    for s in (A, B, A, B):
        assert detector.observe(s) is None
    assert detector.observe([]) is None
    assert [detector.observe(s) for s in (A, B, A, B, A)] == [None] * 5


def test_the_cycle_window_is_bounded() -> None:
    detector = CycleDetector(LIMITS)
    for i in range(100):
        detector.observe(call("bash", command=f"echo {i}"))
    assert len(detector.signatures) == LIMITS.cycle_window


def test_cycle_signatures_are_step_signatures() -> None:
    detector = CycleDetector(LIMITS)
    detector.observe(A + B)
    assert list(detector.signatures) == [step_signature(A + B)]


# ---------------------------------------------------------------------------- file churn


def writes(path: str, digest: str) -> list[CallRecord]:
    return [CallRecord("write_file", ran=True, writes=((path, digest),))]


def test_file_churn_counts_reverts_and_nudges_then_stops() -> None:
    churn = FileChurn(LIMITS)
    verdicts = [churn.observe(writes("/w/x", d)) for d in "ABABAB"]
    assert verdicts[:3] == [None, None, None]  # A, B, back to A (1 revert)
    kinds = [(v.action, v.count) for v in verdicts[3:] if v is not None]
    assert kinds == [(LoopAction.NUDGE, 2), (LoopAction.NUDGE, 3), (LoopAction.STOP, 4)]
    nudge = verdicts[3]
    assert nudge is not None and nudge.message is not None
    assert nudge.message.startswith("[file churn]") and "/w/x" in nudge.message
    assert nudge.as_data() == {"action": "nudge", "reason": "file_churn", "count": 2, "path": "/w/x"}


def test_forward_progress_and_identical_rewrites_are_not_churn() -> None:
    churn = FileChurn(LIMITS)
    assert [churn.observe(writes("/w/x", d)) for d in "ABCDEFGH"] == [None] * 8
    assert [churn.observe(writes("/w/y", d)) for d in "AAAAAA"] == [None] * 6
    assert churn.files["/w/y"].reverts == 0


def test_churn_is_per_file() -> None:
    churn = FileChurn(LIMITS)
    for d in "ABA":
        churn.observe(writes("/w/x", d))
        churn.observe(writes("/w/y", d))
    assert churn.files["/w/x"].reverts == churn.files["/w/y"].reverts == 1


def test_churn_stop_wins_over_a_nudge_in_one_round() -> None:
    churn = FileChurn(LoopDetectorLimits(churn_nudge_at=1, churn_stop_at=2))
    for d in "AB":
        churn.observe(writes("/w/x", d))
        churn.observe(writes("/w/y", d))
    churn.observe(writes("/w/x", "A"))  # x: 1 revert
    round_ = writes("/w/x", "B") + writes("/w/y", "A")  # x: 2 (stop), y: 1 (nudge)
    verdict = churn.observe(round_)
    assert verdict is not None and verdict.action is LoopAction.STOP and verdict.detail["path"] == "/w/x"


def test_churn_memory_is_bounded() -> None:
    churn = FileChurn(LIMITS, max_tracked=4, max_history=3)
    for i in range(10):
        churn.observe(writes(f"/w/{i}", "A"))
    assert len(churn.files) == 4
    for d in "ABCDEFG":
        churn.observe(writes("/w/z", d))
    assert len(churn.files["/w/z"].digests) == 3


# ---------------------------------------------------------------------------- shell spirals


def shell(failed: bool, output: str = "") -> CallRecord:
    return CallRecord("bash", ran=True, failed=failed, output=output)


def test_four_failing_shell_calls_in_a_row_are_a_spiral() -> None:
    spiral = ShellSpiral(LIMITS)
    assert [spiral.observe([shell(True, f"out {i}")]) for i in range(3)] == [None] * 3
    verdict = spiral.observe([shell(True, "out 3")])
    assert verdict is not None
    assert (verdict.reason, verdict.action, verdict.count) == (LoopReason.SHELL_SPIRAL, LoopAction.STOP, 4)
    assert verdict.message is not None and verdict.message.endswith("out 3")
    assert spiral.failures == 0  # the next spiral needs a new run of failures


def test_a_successful_shell_call_breaks_the_spiral_other_tools_do_not() -> None:
    spiral = ShellSpiral(LIMITS)
    for _ in range(3):
        spiral.observe([shell(True)])
    assert spiral.observe([shell(False)]) is None
    assert spiral.failures == 0
    for _ in range(3):
        spiral.observe([shell(True), CallRecord("read_file", ran=True)])
    assert spiral.observe([CallRecord("read_file", ran=True, failed=True), shell(True)]) is not None


def test_a_shell_call_that_never_ran_is_not_counted() -> None:
    spiral = ShellSpiral(LIMITS)
    for _ in range(5):
        assert spiral.observe([CallRecord("bash", ran=False, failed=True)]) is None


@pytest.mark.parametrize(
    ("is_error", "raw", "failed"),
    [
        (False, {"exitCode": 0}, False),
        (False, {"exitCode": 2}, True),
        (True, None, True),
        (False, None, False),
        (False, {"exitCode": None}, False),
    ],
)
def test_shell_failed(is_error: bool, raw: dict[str, object] | None, failed: bool) -> None:
    assert shell_failed(is_error, raw) is failed


# ---------------------------------------------------------------------------- malformed calls


def bad() -> CallRecord:
    return CallRecord("no_such_tool", malformed=True)


def test_three_steps_of_only_malformed_calls_stop() -> None:
    malformed = MalformedCalls(LIMITS)
    assert malformed.observe([bad()]) is None
    assert malformed.observe([bad(), bad()]) is None
    verdict = malformed.observe([bad()])
    assert verdict is not None and verdict.reason is LoopReason.MALFORMED_TOOL_CALLS
    assert verdict.as_data() == {"action": "stop", "reason": "malformed_tool_calls", "count": 3}


def test_a_step_with_one_good_call_resets_the_malformed_count() -> None:
    malformed = MalformedCalls(LIMITS)
    malformed.observe([bad()])
    malformed.observe([bad()])
    assert malformed.observe([bad(), CallRecord("list_dir", ran=True)]) is None
    assert malformed.observe([bad()]) is None
    assert malformed.observe([bad()]) is None


# ---------------------------------------------------------------------------- the run's detector


def test_loop_detector_resets_every_detector_per_run() -> None:
    detector = LoopDetector(LIMITS)
    for s in (A, B, A, B):
        detector.observe_step(s)
    detector.observe_round([shell(True)] * 3)
    detector.observe_round([bad()])
    detector.observe_round(writes("/w/x", "A"))
    detector.reset()
    assert list(detector.cycles.signatures) == []
    assert (detector.shell.failures, detector.malformed.steps, detector.churn.files) == (0, 0, {})


def test_limits_are_configurable_through_loop_limits() -> None:
    limits = LoopLimits().with_overrides({"loop_detector": {"shell_spiral_at": 2, "cycle_repeats": 2}})
    assert limits.loop_detector.shell_spiral_at == 2
    assert find_cycle(list("abab"), limits.loop_detector) == 2
    assert LoopLimits().loop_detector.cycle_window == 12
    with pytest.raises(ValueError, match="unknown field"):
        LoopLimits().with_overrides({"loop_detector": {"nope": 1}})


@pytest.mark.parametrize("reason", [*LoopReason, *DegenerationReason])
def test_every_reason_parses_back_from_its_wire_string(reason: str) -> None:
    assert parse_reason(str(reason)) is reason


# ---------------------------------------------------------------------------- retriable responses


@pytest.mark.parametrize(
    ("text", "reasoning", "calls", "stop", "expected"),
    [
        ("", False, 0, StopReason.END_TURN, DegenerationReason.EMPTY_RESPONSE),
        ("", False, 0, None, DegenerationReason.EMPTY_RESPONSE),
        ("", False, 0, StopReason.REFUSAL, DegenerationReason.FILTERED_RESPONSE),
        ("Hi", False, 0, StopReason.TOOL_USE, DegenerationReason.TOOL_USE_WITHOUT_CALLS),
        ("Hi", False, 0, StopReason.END_TURN, None),
        ("I can't help.", False, 0, StopReason.REFUSAL, None),  # a refusal with text stays one
        ("", True, 0, StopReason.END_TURN, None),  # reasoning only: not empty (octos)
        ("", False, 0, StopReason.MAX_TOKENS, None),  # R-L3g's nudge handles it
        ("", False, 1, StopReason.TOOL_USE, None),
        ("", False, 2, StopReason.END_TURN, None),
    ],
)
def test_retriable_response(
    text: str, reasoning: bool, calls: int, stop: StopReason | None, expected: DegenerationReason | None
) -> None:
    hit = retriable_response(text, reasoning, calls, stop)
    assert (hit.reason if hit else None) is expected
    if hit is not None:
        assert hit.as_data() == {"reason": expected}


def test_a_cycle_stop_surfaces_the_most_recent_output() -> None:
    """003: "序列层停住本轮工具执行并上抛最近输出" — the cycle stop carries the last output (bounded)."""
    detector = LoopDetector()
    verdict = None
    for i in range(6):
        verdict = detector.observe_step(call("glob" if i % 2 else "list_dir"))
        if verdict is None:
            detector.observe_round([CallRecord("x", ran=True, output=f"output {i} " + "y" * 5000)])
    assert verdict is not None and verdict.reason is LoopReason.TOOL_CYCLE
    assert verdict.message is not None and "The last output was:" in verdict.message
    assert verdict.message.endswith("y" * 100) and "output 4" not in verdict.message[-2000:]
    assert len(verdict.message) < 2200
    detector.reset()
    assert detector.last_output == ""
