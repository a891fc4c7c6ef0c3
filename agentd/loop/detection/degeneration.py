"""Degeneration detection for the sampling/tool loop (R-L3b).

Three detectors, all pure over small typed state so the loop (and a test) can drive them
step by step and put every verdict on an event as data:

- `Stationarity`: consecutive identical model *steps* (all tool calls of one step), counted
  per L3 run. A nudge when a streak reaches `nudge_at` (each new streak earns its own), a
  final stop at `stop_at`; true no-op steps (`bash` running `true`, or a tool that declares
  itself a no-op) share one signature and stop sooner.
- `NoProgress`: the same call returning the same result several times in a row earns a
  "[no progress]" note on its result, a hint rather than a stop.
- `detect_repetitive_text` / `RepetitionDetector`: a streamed text whose tail is a short
  pattern that keeps occurring is a degenerate response: the stream is cut off and the
  call goes back to the retry ladder (`react`, the `degenerate_output` bucket).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import orjson

from agentd.core import DegenerationReason, StationarityReason, StopReason, ToolCall, repetition_wire
from agentd.loop.reminders import system_reminder


@dataclass(frozen=True)
class StationarityLimits:
    """Every threshold of this module; operators override it, tests read it."""

    nudge_at: int = 8  # identical consecutive steps before the streak's nudge
    stop_at: int = 16  # identical consecutive steps before the final stop
    noop_stop_at: int = 4  # consecutive true no-op steps before the final stop
    no_progress_after: int = 3  # same call, same result, this many times in a row
    text_window: int = 500  # only the tail of a stream is examined
    min_stream_chars: int = 200  # streams of at most this many chars are never judged
    pattern_lengths: tuple[int, ...] = (20, 40, 60, 100)
    min_repeats: int = 4
    # A pattern made of fewer distinct characters (a "=====" divider, a run of blanks)
    # is only degenerate when it fills the whole window: an 80-char rule is normal prose.
    min_pattern_distinct_chars: int = 2


DEFAULT_LIMITS = StationarityLimits()

NOOP_TOOL = "bash"
NOOP_COMMAND = "true"
# Real signatures are "step:<sha256>", so this one can never collide with them.
NOOP_SIGNATURE = "noop"

NUDGE_TEXT = system_reminder(
    "You have made the same tool call(s) many times in a row and the situation is not changing: "
    "stop polling, step back and change your approach (inspect the cause, try a different tool "
    "or command, or finish with what you have) instead of repeating the same call."
)
NO_PROGRESS_NOTE = (
    "[no progress] This exact call has returned this exact result several times in a row; "
    "repeating it will not change anything, so try something different."
)


# --------------------------------------------------------------------------- stationarity


class StationarityAction(StrEnum):
    NUDGE = "nudge"
    STOP = "stop"


@dataclass(frozen=True)
class Nudge:
    """Inject `NUDGE_TEXT` and keep going."""

    count: int
    noop: bool = False

    @property
    def action(self) -> StationarityAction:
        return StationarityAction.NUDGE

    @property
    def reason(self) -> StationarityReason:
        return StationarityReason.NOOP_STEPS if self.noop else StationarityReason.IDENTICAL_STEPS

    def as_data(self) -> dict[str, Any]:
        return {"action": self.action.value, "reason": self.reason.value, "count": self.count}


@dataclass(frozen=True)
class Stop:
    """End L3 with `StationarityEnded`; final, nothing reopens it."""

    count: int
    noop: bool

    @property
    def action(self) -> StationarityAction:
        return StationarityAction.STOP

    @property
    def reason(self) -> StationarityReason:
        return StationarityReason.NOOP_STEPS if self.noop else StationarityReason.IDENTICAL_STEPS

    def as_data(self) -> dict[str, Any]:
        return {"action": self.action.value, "reason": self.reason.value, "count": self.count}


StationarityDecision = Nudge | Stop


def _is_noop_call(call: ToolCall, noop_tools: frozenset[str]) -> bool:
    if call.name in noop_tools:
        return True
    if call.name != NOOP_TOOL:
        return False
    try:
        args = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return False
    if not isinstance(args, dict):
        return False
    command = args.get("command")
    # Surrounding whitespace is stripped: `true `, `\ttrue\n` run exactly the same no-op in
    # the shell, and a model spinning on it should not escape the lower threshold by
    # jittering blanks. Nothing else is normalised (`:`, `/bin/true`, `true; true` are not
    # no-ops here) so the rule stays narrow and predictable.
    return isinstance(command, str) and command.strip() == NOOP_COMMAND


def step_signature(calls: list[ToolCall], noop_tools: frozenset[str] = frozenset()) -> str:
    """Signature of one model step: every call's name and raw arguments, in order.

    A true no-op step (exactly one call, `bash` whose parsed `command` is `true` whatever
    its other arguments, or a tool listed in `noop_tools`) maps to `NOOP_SIGNATURE`.
    """
    if len(calls) == 1 and _is_noop_call(calls[0], noop_tools):
        return NOOP_SIGNATURE
    # JSON framing keeps the encoding unambiguous; hashing keeps the state small whatever
    # the argument sizes (a step may write a whole file).
    # (orjson: one C call; the signature is only ever compared within a run. A string it
    # refuses — a lone surrogate from a bad escape — falls back to the json module.)
    pairs = [[c.name, c.arguments] for c in calls]
    try:
        framed = orjson.dumps(pairs)
    except TypeError:
        framed = json.dumps(pairs, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return "step:" + hashlib.sha256(framed).hexdigest()


@dataclass
class Stationarity:
    """Consecutive-identical-step counter for one run of the L3 loop.

    Seed 001: "连续相同 tool call 约 8 次 → 注入 nudge … 16 次 → 硬停". The loop feeds it
    every step (one without tool calls too) and `reset`s it when an L3 run starts: a
    completion-recovery, goal or stop-hook re-entry is a new run whose count starts at 0.
    """

    limits: StationarityLimits = DEFAULT_LIMITS
    noop_tools: frozenset[str] = frozenset()
    last_signature: str | None = None
    count: int = 0
    noop: bool = False

    def reset(self) -> None:
        """A new L3 run: no streak yet."""
        self.last_signature, self.count, self.noop = None, 0, False

    def observe(self, step_calls: list[ToolCall]) -> StationarityDecision | None:
        """Record one step; return the decision it triggers, if any."""
        if not step_calls:
            # A step without tool calls breaks the run of consecutive identical calls (the
            # model answered in text); the next tool step starts a new streak. (`reset`, written
            # out: every step that ends a turn gets here)
            self.last_signature, self.count, self.noop = None, 0, False
            return None
        signature = step_signature(step_calls, self.noop_tools)
        if signature == self.last_signature:
            self.count += 1
        else:
            self.last_signature, self.count = signature, 1
            self.noop = signature == NOOP_SIGNATURE
        stop_at = self.limits.noop_stop_at if self.noop else self.limits.stop_at
        if self.count >= stop_at:
            return Stop(self.count, noop=self.noop)
        # Exactly at the threshold: once per streak, and every new streak earns its own.
        if self.count == self.limits.nudge_at:
            return Nudge(self.count, noop=self.noop)
        return None


# --------------------------------------------------------------------------- no progress


def canonical_arguments(arguments: str) -> str:
    """Arguments as sorted-key compact JSON; unparseable text is kept verbatim."""
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return arguments
    return json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass
class _CallHistory:
    result: str
    streak: int


@dataclass
class NoProgress:
    """Same call (name + canonical arguments) returning the same result N times in a row.

    "In a row" counts invocations of that same call, so a model alternating two polls
    (`git status`, `sleep 5`, `git status`, ...) is still caught. A different result for
    the call resets its streak.
    """

    limits: StationarityLimits = DEFAULT_LIMITS
    max_tracked: int = 256  # bound memory over a long session; the oldest call is forgotten
    calls: dict[tuple[str, str], _CallHistory] = field(default_factory=dict)

    def observe(self, call: ToolCall, result_text: str) -> bool:
        """True when the result should get `NO_PROGRESS_NOTE` (at N and every repeat after)."""
        key = (call.name, canonical_arguments(call.arguments))
        seen = self.calls.pop(key, None)  # re-inserted below: dict order is recency order
        if seen is not None and seen.result == result_text:
            seen.streak += 1
        else:
            seen = _CallHistory(result_text, 1)
        self.calls[key] = seen
        if len(self.calls) > self.max_tracked:
            del self.calls[next(iter(self.calls))]
        return seen.streak >= self.limits.no_progress_after


def with_no_progress_note(result_text: str) -> str:
    return f"{result_text}\n\n{NO_PROGRESS_NOTE}"


# --------------------------------------------------------------------------- repetitive text


@dataclass(frozen=True)
class RepetitionHit:
    pattern: str
    repeats: int  # occurrences of `pattern` (the stream's last chars) within the window
    reason: DegenerationReason = DegenerationReason.REPETITIVE_TEXT

    def as_data(self) -> dict[str, Any]:
        return repetition_wire(self.reason.value, self.pattern, self.repeats)


def _trailing_repeats(window: str, length: int) -> int:
    """How many back-to-back copies of the last `length` chars end `window`."""
    pattern = window[-length:]
    repeats = 1
    end = len(window) - length
    while end >= length and window[end - length : end] == pattern:
        repeats += 1
        end -= length
    return repeats


def _detect_in_tail(window: str, total_chars: int, limits: StationarityLimits) -> RepetitionHit | None:
    if total_chars <= limits.min_stream_chars:
        return None
    for length in limits.pattern_lengths:
        if length <= 0 or length * limits.min_repeats > len(window):
            continue
        pattern = window[-length:]
        # The seeds' rule (003, `is_repetitive_output`): the trailing pattern's occurrences
        # anywhere in the window, not only back-to-back copies — a model looping over the
        # same line with a changing counter in front of it is just as stuck.
        repeats = window.count(pattern)  # non-overlapping, like the seed's `matches().count()`
        if repeats < limits.min_repeats:
            continue
        if len(set(pattern)) < limits.min_pattern_distinct_chars:
            # Low-diversity run: degenerate only once no other text fits in the window.
            if len(window) - _trailing_repeats(window, length) * length >= length:
                continue
        return RepetitionHit(pattern, repeats)
    return None


def detect_repetitive_text(text: str, limits: StationarityLimits = DEFAULT_LIMITS) -> RepetitionHit | None:
    """The last 20/40/60/100 chars of `text` occur ≥ 4 times in its tail (shortest first).

    Only streams longer than `min_stream_chars` are judged, and only their last
    `text_window` chars are looked at.
    """
    return _detect_in_tail(text[max(0, len(text) - limits.text_window) :], len(text), limits)


@dataclass
class RepetitionDetector:
    """Streaming form of `detect_repetitive_text`: keeps only the last `text_window` chars,
    so each `feed` costs O(window) however long the stream gets."""

    limits: StationarityLimits = DEFAULT_LIMITS
    tail: str = ""
    total_chars: int = 0

    def feed(self, delta: str) -> RepetitionHit | None:
        """Add a chunk; return the verdict for the whole stream so far."""
        window = self.limits.text_window
        self.total_chars += len(delta)
        # Slice the delta first: one huge chunk must not be concatenated onto the tail whole.
        joined = self.tail + delta[max(0, len(delta) - window) :]
        self.tail = joined[max(0, len(joined) - window) :]
        if self.total_chars <= self.limits.min_stream_chars:
            return None  # too short to judge (`_detect_in_tail`'s first test, without the call)
        return _detect_in_tail(self.tail, self.total_chars, self.limits)


# --------------------------------------------------------------------------- retriable responses


@dataclass(frozen=True)
class RetriableHit:
    """A response that answered nothing (seed 003 `is_retriable_response`)."""

    reason: DegenerationReason

    def as_data(self) -> dict[str, Any]:
        return {"reason": self.reason.value}


def retriable_response(
    text: str, has_reasoning: bool, tool_calls: int, stop: StopReason | None
) -> RetriableHit | None:
    """Seed 003: "is_retriable_response（空响应等可在调用层重试的形态）": no text, no tool
    call and no reasoning; a content filter that left nothing (a refusal *with* text stays a
    refusal, R-L3a); or "tool use" announced without any call. An empty answer cut by the
    output limit is not one of them: R-L3g nudges it (`max_tokens.py`)."""
    if tool_calls:
        return None
    if stop is StopReason.TOOL_USE:
        return RetriableHit(DegenerationReason.TOOL_USE_WITHOUT_CALLS)
    if text:
        return None
    if stop is StopReason.REFUSAL:
        return RetriableHit(DegenerationReason.FILTERED_RESPONSE)
    if stop is StopReason.MAX_TOKENS or has_reasoning:
        return None
    return RetriableHit(DegenerationReason.EMPTY_RESPONSE)
