"""Loop detection beyond stationarity (R-L3b, seed 003 `LoopDetector`).

Seed 003 describes three layers: the response layer (`detection.py`: repetitive text and
`retriable_response`, sent back to the call retry ladder), the *sequence* layer here ("工具序列
层面的 LoopDetector（窗口 12）… 序列层停住本轮工具执行并上抛最近输出") and the bucket layer
(`retry.py`, `shell_spiral`). Every detector is pure over small typed state, fed by the loop
once per step (before the tools run) or once per tool round (after), and returns a typed
verdict the resolver (`step.py`) turns into a next step:

- `CycleDetector`: the last steps of the run repeat a cycle of 2..`max_cycle_length` steps
  (A-B-A-B-A-B) `cycle_repeats` times within a window of `cycle_window` steps: stop before
  the step's tools run. A cycle of one step is stationarity's job (`detection.Stationarity`).
- `FileChurn`: a file whose content goes back to an earlier state (A → B → A) is being
  rewritten back and forth: a nudge from `churn_nudge_at` reverts, a stop at `churn_stop_at`.
- `ShellSpiral`: `shell_spiral_at` failing `bash` calls in a row (no successful one between)
  is a shell-retry spiral; the loop counts it in the `shell_spiral` bucket, whose decision
  (escalate the first time, exhausted after) stops the turn and surfaces the last output.
- `MalformedCalls`: `malformed_stop_at` steps in a row whose every tool call was malformed
  (unknown tool, arguments not JSON or not matching the schema) end the turn: the model is
  not producing calls that can run, and retrying until the iteration cap only burns tokens.

Each detector belongs to one L3 run (`reset` when a run starts), like stationarity.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from agentd.core import LoopReason, ToolCall, cycle_wire, shell_exit_code
from agentd.loop.detection.degeneration import step_signature

SHELL_TOOL = "bash"


@dataclass(frozen=True)
class LoopDetectorLimits:
    """Every threshold of this module; `AGENTD_LIMITS` `{"loop_detector": {...}}` overrides them."""

    cycle_window: int = 12  # seed 003: "LoopDetector（窗口 12）"
    max_cycle_length: int = 4  # cycles of 2..4 steps (3 repeats of 4 fill the window)
    cycle_repeats: int = 3  # the cycle seen this many times back to back
    churn_nudge_at: int = 2  # reverts of one file before a "[file churn]" nudge
    churn_stop_at: int = 4  # reverts of one file before the run stops
    shell_spiral_at: int = 4  # failing bash calls in a row (octos SHELL_RETRY_RECOVERY_THRESHOLD)
    malformed_stop_at: int = 3  # consecutive steps whose every call was malformed


class LoopAction(StrEnum):
    NUDGE = "nudge"
    STOP = "stop"


RECENT_OUTPUT_CHARS = 2000  # how much of the last output a cycle stop surfaces
CYCLE_STOP_TEXT = "Not run: the last {n} steps repeat a cycle of {length} steps; the turn stopped."
CHURN_NUDGE_TEXT = (
    "[file churn] {path} has gone back to an earlier content {reverts} times in this turn: you are "
    "rewriting it back and forth. Stop patching blindly: look at the current state, find the root "
    "cause and make one deliberate change, or finish with what you have."
)


@dataclass(frozen=True)
class LoopVerdict:
    """A detector's verdict: `reason`, `action`, and what it saw (`detail`, event data)."""

    reason: LoopReason
    action: LoopAction
    count: int
    detail: dict[str, Any] = field(default_factory=dict)
    message: str | None = None  # the nudge written for the model, or the stop's explanation

    def as_data(self) -> dict[str, Any]:
        return {"action": self.action.value, "reason": self.reason.value, "count": self.count, **self.detail}


# --------------------------------------------------------------------------- cycles


def find_cycle(signatures: list[str], limits: LoopDetectorLimits) -> int | None:
    """The shortest cycle length p (2..max) whose last `cycle_repeats` copies end the sequence
    back to back, the cycle holding at least two different steps; None when there is none."""
    for length in range(2, limits.max_cycle_length + 1):
        span = length * limits.cycle_repeats
        if span > min(len(signatures), limits.cycle_window):
            break
        tail = signatures[-span:]
        pattern = tail[:length]
        if len(set(pattern)) < 2:
            continue  # one step repeated: stationarity counts those
        if all(tail[i] == pattern[i % length] for i in range(span)):
            return length
    return None


@dataclass
class CycleDetector:
    limits: LoopDetectorLimits = field(default_factory=LoopDetectorLimits)
    noop_tools: frozenset[str] = frozenset()
    signatures: deque[str] = field(default_factory=deque)

    def reset(self) -> None:
        self.signatures.clear()

    def observe(self, step_calls: list[ToolCall]) -> LoopVerdict | None:
        """Record one step (before its tools run); a stop verdict when it closes a cycle."""
        if not step_calls:
            # An answer in text breaks the sequence, as for stationarity (`reset` without its
            # call: every step that ends a turn gets here).
            self.signatures.clear()
            return None
        self.signatures.append(step_signature(step_calls, self.noop_tools))
        while len(self.signatures) > self.limits.cycle_window:
            self.signatures.popleft()
        length = find_cycle(list(self.signatures), self.limits)
        if length is None:
            return None
        steps = length * self.limits.cycle_repeats
        self.reset()
        return LoopVerdict(
            LoopReason.TOOL_CYCLE,
            LoopAction.STOP,
            steps,
            cycle_wire(length),
            CYCLE_STOP_TEXT.format(n=steps, length=length),
        )


# --------------------------------------------------------------------------- tool round records


@dataclass(frozen=True)
class CallRecord:
    """How one call of a tool round went, as the round-level detectors need it."""

    name: str
    malformed: bool = False  # never ran: unknown tool, unparseable or invalid arguments
    ran: bool = False
    failed: bool = False  # an error result, or a shell command with a non-zero exit
    output: str = ""
    # Files a successful write left behind: (path, sha256 of the content after the write).
    writes: tuple[tuple[str, str], ...] = ()


def shell_failed(is_error: bool, raw_output: dict[str, Any] | None) -> bool:
    """A bash call failed: an error result or a non-zero exit (which bash reports as data)."""
    code = shell_exit_code(raw_output)
    return is_error or (isinstance(code, int) and code != 0)


# --------------------------------------------------------------------------- file churn


@dataclass
class _FileHistory:
    digests: list[str] = field(default_factory=list)
    reverts: int = 0


@dataclass
class FileChurn:
    """Per file, the contents the run's writes left (as digests). A write whose result equals
    an earlier content of that file other than the one just before is a revert."""

    limits: LoopDetectorLimits = field(default_factory=LoopDetectorLimits)
    max_tracked: int = 256
    max_history: int = 32
    files: dict[str, _FileHistory] = field(default_factory=dict)

    def reset(self) -> None:
        self.files.clear()

    def observe(self, records: list[CallRecord]) -> LoopVerdict | None:
        worst: LoopVerdict | None = None
        for record in records:
            for path, digest in record.writes:
                verdict = self._write(path, digest)
                if verdict is not None and (worst is None or verdict.action is LoopAction.STOP):
                    worst = verdict
        return worst

    def _write(self, path: str, digest: str) -> LoopVerdict | None:
        history = self.files.pop(path, None) or _FileHistory()
        self.files[path] = history  # most recently written last
        if len(self.files) > self.max_tracked:
            del self.files[next(iter(self.files))]
        digests = history.digests
        if digests and digests[-1] == digest:
            return None  # rewritten with the same content: no change, no revert
        reverted = digest in digests
        digests.append(digest)
        del digests[: -self.max_history]
        if not reverted:
            return None
        history.reverts += 1
        n = history.reverts
        detail = {"path": path}
        if n >= self.limits.churn_stop_at:
            text = f"{path} was rewritten back and forth ({n} reverts); the turn stopped."
            return LoopVerdict(LoopReason.FILE_CHURN, LoopAction.STOP, n, detail, text)
        if n >= self.limits.churn_nudge_at:
            text = CHURN_NUDGE_TEXT.format(path=path, reverts=n)
            return LoopVerdict(LoopReason.FILE_CHURN, LoopAction.NUDGE, n, detail, text)
        return None


# --------------------------------------------------------------------------- shell spirals


@dataclass
class ShellSpiral:
    """Failing `bash` calls in a row; other tools in between neither count nor break the run
    (a model alternating `cat` and the same failing build is still spiralling)."""

    limits: LoopDetectorLimits = field(default_factory=LoopDetectorLimits)
    failures: int = 0
    last_output: str = ""

    def reset(self) -> None:
        self.failures, self.last_output = 0, ""

    def observe(self, records: list[CallRecord]) -> LoopVerdict | None:
        spiral = False
        for record in records:
            if record.name != SHELL_TOOL or not record.ran:
                continue
            if not record.failed:
                self.failures = 0
                continue
            self.failures += 1
            self.last_output = record.output
            spiral = spiral or self.failures >= self.limits.shell_spiral_at
        if not spiral:
            return None
        n, output = self.failures, self.last_output
        self.reset()  # a new spiral needs a new run of failures
        text = f"The shell commands kept failing ({n} in a row); the last output was:\n{output}"
        return LoopVerdict(LoopReason.SHELL_SPIRAL, LoopAction.STOP, n, {}, text)


# --------------------------------------------------------------------------- malformed calls


@dataclass
class MalformedCalls:
    limits: LoopDetectorLimits = field(default_factory=LoopDetectorLimits)
    steps: int = 0

    def reset(self) -> None:
        self.steps = 0

    def observe(self, records: list[CallRecord]) -> LoopVerdict | None:
        if not records or not all(r.malformed for r in records):
            self.steps = 0  # a call that could run (or no call at all) breaks the run
            return None
        self.steps += 1
        if self.steps < self.limits.malformed_stop_at:
            return None
        n = self.steps
        self.reset()
        text = f"The model produced only malformed tool calls {n} steps in a row; the turn stopped."
        return LoopVerdict(LoopReason.MALFORMED_TOOL_CALLS, LoopAction.STOP, n, {}, text)


# --------------------------------------------------------------------------- the run's detectors


@dataclass
class LoopDetector:
    """The sequence layer of one L3 run: the cycle check before a step's tools run, the
    round checks after. `observe_round` returns the verdicts in the order they act: file churn,
    malformed calls, shell spiral (a stop wins over a nudge in `step.resolve_after_tools`)."""

    limits: LoopDetectorLimits = field(default_factory=LoopDetectorLimits)
    cycles: CycleDetector = field(init=False)
    churn: FileChurn = field(init=False)
    shell: ShellSpiral = field(init=False)
    malformed: MalformedCalls = field(init=False)
    last_output: str = ""  # the latest call output seen (bounded), surfaced by a cycle stop

    def __post_init__(self) -> None:
        self.cycles = CycleDetector(self.limits)
        self.churn = FileChurn(self.limits)
        self.shell = ShellSpiral(self.limits)
        self.malformed = MalformedCalls(self.limits)

    def reset(self) -> None:
        for detector in (self.cycles, self.churn, self.shell, self.malformed):
            detector.reset()
        self.last_output = ""

    def observe_step(self, step_calls: list[ToolCall]) -> LoopVerdict | None:
        """A cycle stop carries the recent output (003: "序列层停住本轮工具执行并上抛最近输出"),
        as the shell-spiral stop does."""
        verdict = self.cycles.observe(step_calls)
        if verdict is None or not self.last_output:
            return verdict
        text = f"{verdict.message}\nThe last output was:\n{self.last_output}"
        return dataclasses.replace(verdict, message=text)

    def observe_round(self, records: list[CallRecord]) -> list[LoopVerdict]:
        ran = [r for r in records if r.ran and r.output]
        if ran:
            self.last_output = ran[-1].output[-RECENT_OUTPUT_CHARS:]
        verdicts = [self.churn.observe(records), self.malformed.observe(records), self.shell.observe(records)]
        return [v for v in verdicts if v is not None]
