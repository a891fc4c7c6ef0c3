"""Degeneration detection (R-L3b): stationarity, no-progress hints, repetitive text."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentd.core import StationarityReason
from agentd.core.conversation import ToolCall
from agentd.loop.detection.degeneration import (
    NO_PROGRESS_NOTE,
    NOOP_SIGNATURE,
    NUDGE_TEXT,
    NoProgress,
    Nudge,
    RepetitionDetector,
    Stationarity,
    StationarityLimits,
    Stop,
    detect_repetitive_text,
    step_signature,
    with_no_progress_note,
)
from agentd.loop.reminders import is_system_reminder

LIMITS = StationarityLimits()
_ids = iter(range(10**9))


def call(name: str = "bash", args: object = None, raw: str | None = None) -> ToolCall:
    """A call with a fresh id each time, as a model produces them."""
    arguments = raw if raw is not None else json.dumps(args if args is not None else {"command": "ls"})
    return ToolCall(id=f"call_{next(_ids)}", name=name, arguments=arguments)


def run(state: Stationarity, steps: list[list[ToolCall]]) -> list[tuple[int, Nudge | Stop]]:
    """Feed steps; return (1-based step number, decision) for every decision."""
    out = []
    for n, step in enumerate(steps, start=1):
        decision = state.observe(step)
        if decision is not None:
            out.append((n, decision))
    return out


def varied(n: int) -> str:
    """Prose-like text of exactly n chars with no short period anywhere."""
    words = " ".join(f"w{i * 7919 % 10007}" for i in range(n))
    return words[:n]


def pattern_of(length: int) -> str:
    text = hashlib.sha512(str(length).encode()).hexdigest()
    assert len(set(text[:length])) > 2
    return text[:length]


# --------------------------------------------------------------------------- defaults


def test_defaults_are_the_spec_values() -> None:
    assert LIMITS.nudge_at == 8
    assert LIMITS.stop_at == 16
    assert LIMITS.noop_stop_at == 4
    assert LIMITS.no_progress_after == 3
    assert LIMITS.text_window == 500
    assert LIMITS.min_stream_chars == 200
    assert LIMITS.pattern_lengths == (20, 40, 60, 100)
    assert LIMITS.min_repeats == 4
    with pytest.raises(AttributeError):
        LIMITS.stop_at = 3  # type: ignore[misc]


def test_nudge_text_is_a_full_sentence_about_changing_approach() -> None:
    assert "stop polling" in NUDGE_TEXT
    assert "approach" in NUDGE_TEXT
    # 001: "<system-reminder> 标签会作为某条 user content 里的文本"
    assert is_system_reminder(NUDGE_TEXT)
    inner = NUDGE_TEXT.removeprefix("<system-reminder>\n").removesuffix("\n</system-reminder>")
    assert inner[0].isupper() and inner.endswith(".")


# --------------------------------------------------------------------------- signature


def test_signature_ignores_call_ids_but_not_name_or_arguments() -> None:
    assert step_signature([call()]) == step_signature([call()])
    assert step_signature([call()]) != step_signature([call("read_file")])
    assert step_signature([call(args={"command": "ls"})]) != step_signature([call(args={"command": "pwd"})])


def test_signature_covers_every_call_of_the_step_in_order() -> None:
    a, b = call(args={"command": "a"}), call(args={"command": "b"})
    assert step_signature([a, b]) == step_signature(
        [call(args={"command": "a"}), call(args={"command": "b"})]
    )
    assert step_signature([a, b]) != step_signature([b, a])
    assert step_signature([a, b]) != step_signature([a])


def test_signature_uses_raw_arguments() -> None:
    # Raw text, as the spec's step signature says: a model repeating itself repeats bytes.
    assert step_signature([call(raw='{"a":1,"b":2}')]) != step_signature([call(raw='{"b":2,"a":1}')])


def test_signature_of_a_lone_surrogate_is_a_signature_not_a_crash() -> None:
    # A bad escape in the provider's JSON can leave one in the arguments: orjson refuses it,
    # the json module's framing takes over — still stable, still telling steps apart.
    odd = call(raw='{"path": "\ud800"}')
    assert step_signature([odd]) == step_signature([call(raw='{"path": "\ud800"}')])
    assert step_signature([odd]) != step_signature([call(raw='{"path": "x"}')])
    assert step_signature([odd]).startswith("step:")


def test_bash_true_is_noop_whatever_its_other_arguments() -> None:
    assert step_signature([call(args={"command": "true", "timeout": 5})]) == NOOP_SIGNATURE
    assert step_signature([call(args={"command": "true"})]) == NOOP_SIGNATURE


@pytest.mark.parametrize("command", ["true ", " true", "\ttrue\n"])
def test_bash_true_with_surrounding_whitespace_is_noop(command: str) -> None:
    # Documented choice: surrounding whitespace is stripped (the shell runs the same no-op).
    assert step_signature([call(args={"command": command})]) == NOOP_SIGNATURE


@pytest.mark.parametrize(
    "step",
    [
        [call(args={"command": "true; true"})],
        [call(args={"command": ":"})],
        [call(args={"command": "/bin/true"})],
        [call(args={"command": "tr ue"})],
        [call(args={"cmd": "true"})],
        [call(args={"command": ["true"]})],
        [call(raw='{"command": "true"')],  # malformed JSON
        [call(raw='"true"')],
        [call("sh", args={"command": "true"})],
        [call(args={"command": "true"}), call(args={"command": "true"})],  # two calls
    ],
)
def test_not_noop(step: list[ToolCall]) -> None:
    assert step_signature(step) != NOOP_SIGNATURE


def test_declared_noop_tool_is_noop_with_any_arguments() -> None:
    tools = frozenset({"wait"})
    assert step_signature([call("wait", args={"seconds": 1})], tools) == NOOP_SIGNATURE
    assert step_signature([call("wait", args={"seconds": 1})]) != NOOP_SIGNATURE


# --------------------------------------------------------------------------- stationarity


def test_nudge_at_exactly_8_and_stop_at_exactly_16() -> None:
    decisions = run(Stationarity(), [[call()] for _ in range(16)])
    assert decisions == [(8, Nudge(8)), (16, Stop(16, noop=False))]
    nudge, stop = decisions[0][1], decisions[1][1]
    assert nudge.reason is StationarityReason.IDENTICAL_STEPS
    assert stop.reason is StationarityReason.IDENTICAL_STEPS
    assert stop.as_data() == {"action": "stop", "reason": "identical_steps", "count": 16}
    assert nudge.as_data() == {"action": "nudge", "reason": "identical_steps", "count": 8}


def test_identical_multi_call_steps_count() -> None:
    def step() -> list[ToolCall]:
        return [call(args={"command": "git status"}), call("read_file", args={"path": "a"})]

    assert run(Stationarity(), [step() for _ in range(16)]) == [(8, Nudge(8)), (16, Stop(16, noop=False))]


def test_a_different_step_resets_the_count() -> None:
    steps = [[call()] for _ in range(7)] + [[call(args={"command": "pwd"})]] + [[call()] for _ in range(15)]
    decisions = run(Stationarity(), steps)
    # The streak restarts at step 9: nudge at its 8th step (16), no stop after 15 steps.
    assert decisions == [(16, Nudge(8))]


def test_a_step_without_tool_calls_resets_the_count() -> None:
    """Seed 001: "连续相同 tool call … 16 次 硬停" — *consecutive* identical calls; a step that
    answers in text breaks the run (the loop feeds it every step, see the e2e twin
    `test_a_text_step_between_two_streaks_resets_the_count`)."""
    steps = [[call()] for _ in range(15)] + [[]] + [[call()] for _ in range(15)]
    decisions = run(Stationarity(), steps)
    assert [d for _, d in decisions if isinstance(d, Stop)] == []
    assert decisions == [(8, Nudge(8)), (24, Nudge(8))]  # each streak has its own nudge


def test_each_new_streak_gets_its_own_nudge() -> None:
    """Seed 001: "连续相同 tool call 约 8 次 → 注入 nudge reminder" — per streak, not once per run."""
    steps = [[call()] for _ in range(8)] + [[call(args={"command": "pwd"})]] + [[call()] for _ in range(16)]
    assert run(Stationarity(), steps) == [(8, Nudge(8)), (17, Nudge(8)), (25, Stop(16, noop=False))]


def test_a_long_streak_is_nudged_once() -> None:
    decisions = run(Stationarity(limits=StationarityLimits(stop_at=100)), [[call()] for _ in range(40)])
    assert decisions == [(8, Nudge(8))]


def test_reset_starts_a_new_run() -> None:
    """Counted per L3 run: 7 steps, a re-entry (reset), 9 more steps never reach 16."""
    state = Stationarity()
    assert run(state, [[call()] for _ in range(7)]) == []
    state.reset()
    assert (state.last_signature, state.count, state.noop) == (None, 0, False)
    assert run(state, [[call()] for _ in range(9)]) == [(8, Nudge(8))]


def test_noop_variants_share_one_signature_and_stop_at_4() -> None:
    steps = [
        [call(args={"command": "true", "timeout": 5})],
        [call(args={"command": "true"})],
        [call(args={"command": "true ", "timeout": 30})],
        [call(args={"command": "true"})],
    ]
    decisions = run(Stationarity(), steps)
    assert decisions == [(4, Stop(4, noop=True))]
    assert decisions[0][1].reason is StationarityReason.NOOP_STEPS
    assert decisions[0][1].as_data()["reason"] == "noop_steps"


def test_noop_streak_resets_on_a_real_step() -> None:
    noop = [call(args={"command": "true"})]
    steps = [noop, noop, noop, [call()], noop, noop, noop]
    assert run(Stationarity(), steps) == []


def test_real_step_after_noops_uses_the_normal_threshold() -> None:
    noop = [call(args={"command": "true"})]
    steps = [noop, noop, noop] + [[call()] for _ in range(5)]
    assert run(Stationarity(), steps) == []


def test_declared_noop_tool_stops_at_4() -> None:
    state = Stationarity(noop_tools=frozenset({"wait"}))
    steps = [[call("wait", args={"seconds": n})] for n in range(4)]
    assert run(state, steps) == [(4, Stop(4, noop=True))]


def test_limits_are_configurable() -> None:
    state = Stationarity(limits=StationarityLimits(nudge_at=2, stop_at=3, noop_stop_at=2))
    assert run(state, [[call()] for _ in range(3)]) == [(2, Nudge(2)), (3, Stop(3, noop=False))]


# --------------------------------------------------------------------------- no progress


def test_no_progress_after_exactly_3() -> None:
    tracker = NoProgress()
    assert [tracker.observe(call(), "same") for _ in range(5)] == [False, False, True, True, True]


def test_no_progress_resets_on_a_different_result() -> None:
    tracker = NoProgress()
    results = ["a", "a", "b", "b", "b"]
    assert [tracker.observe(call(), r) for r in results] == [False, False, False, False, True]


def test_no_progress_uses_canonical_arguments() -> None:
    tracker = NoProgress()
    raws = ['{"a": 1, "b": 2}', '{"b":2,"a":1}', '{ "a" : 1 , "b" : 2 }']
    assert [tracker.observe(call("grep", raw=r), "x") for r in raws] == [False, False, True]


def test_no_progress_distinguishes_calls() -> None:
    tracker = NoProgress()
    assert not tracker.observe(call(args={"command": "a"}), "x")
    assert not tracker.observe(call(args={"command": "b"}), "x")
    assert not tracker.observe(call("other", args={"command": "a"}), "x")
    assert not tracker.observe(call(args={"command": "a"}), "x")


def test_no_progress_catches_alternating_polls() -> None:
    tracker = NoProgress()
    seq = [("git status", "clean"), ("sleep 5", ""), ("git status", "clean"), ("sleep 5", "")]
    seq += [("git status", "clean")]
    flags = [tracker.observe(call(args={"command": c}), r) for c, r in seq]
    assert flags == [False, False, False, False, True]


def test_no_progress_memory_is_bounded() -> None:
    tracker = NoProgress(max_tracked=4)
    for n in range(100):
        tracker.observe(call(args={"command": f"c{n}"}), "x")
    assert len(tracker.calls) == 4


def test_no_progress_note() -> None:
    assert NO_PROGRESS_NOTE.startswith("[no progress] ")
    assert with_no_progress_note("out").startswith("out")
    assert with_no_progress_note("out").endswith(NO_PROGRESS_NOTE)


# --------------------------------------------------------------------------- repetitive text


@pytest.mark.parametrize("length", [20, 40, 60, 100])
def test_repetition_hit_for_each_pattern_length(length: int) -> None:
    pattern = pattern_of(length)
    hit = detect_repetitive_text(varied(250) + pattern * 4)
    assert hit is not None
    # The shortest length is tried first, and the 20-char tail of a longer period occurs as
    # often as the period itself: that is the hit reported.
    assert hit.pattern == pattern[-20:]
    assert hit.repeats == 4
    assert hit.as_data()["reason"] == "repetitive_text"
    assert hit.as_data()["patternLength"] == 20


@pytest.mark.parametrize("length", [20, 40, 60, 100])
def test_no_hit_for_3_repeats(length: int) -> None:
    assert detect_repetitive_text(varied(300) + pattern_of(length) * 3) is None


def test_shortest_pattern_wins_and_repeats_are_counted_in_the_window() -> None:
    hit = detect_repetitive_text(varied(300) + "ab" * 300)
    assert hit is not None
    assert hit.pattern == "ab" * 10
    assert hit.repeats == 25  # the whole 500-char window


def test_occurrences_in_the_window_count_not_only_back_to_back_copies() -> None:
    """003: `is_repetitive_output` (重复文本检测) counts the trailing pattern's occurrences in
    the last 500 chars (`check_region.matches(&pattern).count() >= 4`): a model looping over
    the same line with a changing counter in front of it is caught too."""
    line = "still waiting for the build to finish, checking again.\n"  # 55 chars
    looping = varied(250) + "".join(f"[{n}] {line}" for n in range(4))
    hit = detect_repetitive_text(looping)
    assert hit is not None
    assert hit.pattern == line[-20:] and hit.repeats == 4
    # Back-to-back copies of that 20-char tail: none — the old rule saw nothing here.
    assert not looping.endswith(line[-20:] * 2)
    # Three occurrences are not enough, and neither are four outside the window.
    assert detect_repetitive_text(varied(250) + "".join(f"[{n}] {line}" for n in range(3))) is None
    far_apart = "".join(f"[{n}] {line}" + varied(150) for n in range(3)) + f"[3] {line}"
    assert detect_repetitive_text(far_apart) is None


def test_overlapping_occurrences_are_not_counted() -> None:
    # "aaab" * k: the 20-char tail occurs only at period-aligned offsets, as `str::matches` counts.
    text = varied(300) + "xyz" + "aaab" * 30
    hit = detect_repetitive_text(text)
    assert hit is not None and hit.repeats == text[-500:].count(hit.pattern)


def test_no_hit_for_varied_text() -> None:
    assert detect_repetitive_text(varied(5000)) is None


def test_no_hit_when_the_stream_is_200_chars_or_less() -> None:
    assert detect_repetitive_text("ab" * 100) is None
    assert detect_repetitive_text("abc" * 66) is None
    assert detect_repetitive_text("ab" * 101) is not None


def test_only_the_tail_counts() -> None:
    assert detect_repetitive_text(pattern_of(20) * 20 + varied(30)) is None


def test_a_divider_line_is_not_degenerate_but_a_wall_of_it_is() -> None:
    assert detect_repetitive_text(varied(300) + "\n" + "=" * 100) is None
    assert detect_repetitive_text(varied(300) + "\n" + " " * 120) is None
    assert detect_repetitive_text("=" * 600) is not None
    assert detect_repetitive_text(varied(300) + "\n" + "=" * 600) is not None


def test_streaming_keeps_a_bounded_tail() -> None:
    detector = RepetitionDetector()
    assert detector.feed(varied(1_000_000)) is None
    assert len(detector.tail) == LIMITS.text_window
    hit = detector.feed(pattern_of(40) * 4)
    assert hit is not None and hit.pattern == pattern_of(40)[-20:] and hit.repeats == 4
    assert detector.total_chars == 1_000_000 + 160


_text = st.builds(
    lambda prefix, pattern, n, suffix: varied(prefix) + pattern * n + suffix,
    st.integers(0, 400),
    st.sampled_from(["", "ab", "=", pattern_of(20), pattern_of(60), pattern_of(100), "ha ha "]),
    st.integers(0, 12),
    st.text(alphabet="xyz= ", max_size=30),
)


@settings(max_examples=300, deadline=None)
@given(text=_text, chunks=st.lists(st.integers(1, 150), min_size=1, max_size=50))
def test_streaming_detector_equals_the_batch_function(text: str, chunks: list[int]) -> None:
    detector = RepetitionDetector()
    pos = 0
    for size in [*chunks, len(text)]:  # the last chunk takes whatever is left
        piece = text[pos : pos + size]
        pos += len(piece)
        assert detector.feed(piece) == detect_repetitive_text(text[:pos])
        assert len(detector.tail) <= LIMITS.text_window
        if pos >= len(text):
            break
