"""Terminal outcomes of a turn (R-L3a), why they happened, and their mapping to ACP stop reasons.

Each outcome is data: it ends up on the `turn_ended` event and decides the
`session/prompt` response. `Failed` answers the prompt with a JSON-RPC error instead.

`reason` is typed: an `EndReason`, or the enum of the module that decided the stop (an
`ErrorKind` for failures, a `BudgetStopKind`, a stationarity/degeneration reason), or a
`LocalCommandReason` carrying the command's name. Every one of them is a `str` whose value is
the wire string (`"user_cancelled"`, `"local_command:compact"`, …), so events and responses
carry exactly what they carried before, while code compares enum members, never free strings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from agentd.core.errors import ErrorKind, HarnessError
from agentd.core.frozen_init import quick_init
from agentd.protocol import StopReason


# The reasons the loop's gates and detectors stop a turn with (agentd/loop/budget.py,
# agentd/loop/detection/): data on the outcome, so they live with it.
class BudgetStopKind(StrEnum):
    SHUTDOWN = "shutdown"
    MAX_ITERATIONS = "max_iterations"
    IDLE_PROGRESS_TIMEOUT = "idle_progress_timeout"
    ACTIVITY_TIMEOUT = "activity_timeout"
    TOKEN_BUDGET = "token_budget"


class StationarityReason(StrEnum):
    IDENTICAL_STEPS = "identical_steps"
    NOOP_STEPS = "noop_steps"


class DegenerationReason(StrEnum):
    REPETITIVE_TEXT = "repetitive_text"
    # `retriable_response`: answers that say nothing, sent back to the call retry ladder.
    EMPTY_RESPONSE = "empty_response"
    FILTERED_RESPONSE = "filtered_response"
    TOOL_USE_WITHOUT_CALLS = "tool_use_without_calls"


class LoopReason(StrEnum):
    """Why the sequence layer stopped a run (the turn's `reason`, a `stationarity_ended`)."""

    TOOL_CYCLE = "tool_cycle"
    FILE_CHURN = "file_churn"
    SHELL_SPIRAL = "shell_spiral"
    MALFORMED_TOOL_CALLS = "malformed_tool_calls"


class OutcomeKind(StrEnum):
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    MAX_TURNS_REACHED = "max_turns_reached"
    STATIONARITY_ENDED = "stationarity_ended"
    BUDGET_STOPPED = "budget_stopped"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # the server died mid-turn (set on recovery)


class EndReason(StrEnum):
    """Why a turn ended, when no more specific enum (error kind, budget gate, detector) says it."""

    USER_CANCELLED = "user_cancelled"
    PERMISSION_REJECTED = "permission_rejected"
    INTERJECTED = "interjected"  # new user input broke the approval of a step's tool calls
    SERVER_SHUTDOWN = "server_shutdown"  # the server stopped the running turn
    SERVER_SHUTTING_DOWN = "server_shutting_down"  # a prompt arrived while the server stopped
    SERVER_RESTARTED = "server_restarted"  # the turn was found unfinished at startup
    DEFERRED_BY_SHUTDOWN = "deferred_by_shutdown"  # a queued prompt kept for the next start
    REMOVED_FROM_QUEUE = "removed_from_queue"
    MAX_TURNS_REACHED = "max_turns_reached"
    EMPTY_MAX_TOKENS = "empty_max_tokens"
    AUTO_RECOVERY_EXHAUSTED = "auto_recovery_exhausted"
    SHELL_COMMAND = "shell_command"  # a `!command` prompt
    PROMPT_BLOCKED = "prompt_blocked"  # a user_prompt_submit hook refused the prompt
    LOCAL_COMMAND = "local_command"  # wire form is `local_command:<name>`: see LocalCommandReason


LOCAL_COMMAND_PREFIX = f"{EndReason.LOCAL_COMMAND.value}:"


class LocalCommandReason(str):
    """`local_command:<name>`: a prompt answered by a local slash command. A small value type so
    the command name is data (`.command`) while the value stays the wire string."""

    command: str

    def __new__(cls, command: str) -> LocalCommandReason:
        self = super().__new__(cls, f"{LOCAL_COMMAND_PREFIX}{command}")
        self.command = command
        return self

    @property
    def code(self) -> EndReason:
        return EndReason.LOCAL_COMMAND

    def __repr__(self) -> str:
        return f"LocalCommandReason({self.command!r})"


Reason = (
    EndReason
    | ErrorKind
    | BudgetStopKind
    | StationarityReason
    | DegenerationReason
    | LoopReason
    | LocalCommandReason
)

# Tried in order by `parse_reason`; no wire string belongs to two of them.
_REASON_ENUMS: tuple[type[StrEnum], ...] = (
    EndReason,
    ErrorKind,
    BudgetStopKind,
    StationarityReason,
    DegenerationReason,
    LoopReason,
)


def parse_reason(wire: str) -> Reason:
    """The typed reason for a wire string (a stored event, or a caller still passing strings).
    Raises ValueError for a string no enum knows."""
    if isinstance(wire, Reason):  # already typed
        return wire
    if wire.startswith(LOCAL_COMMAND_PREFIX):
        return LocalCommandReason(wire[len(LOCAL_COMMAND_PREFIX) :])
    for enum in _REASON_ENUMS:
        try:
            return enum(wire)  # type: ignore[return-value]
        except ValueError:
            continue
    raise ValueError(f"unknown turn-end reason {wire!r}")


@quick_init
@dataclass(frozen=True)
class TurnOutcome:
    kind: OutcomeKind
    # Why it ended (see the module doc). A plain wire string is still accepted and parsed, so
    # callers that pass strings keep working; it is always a typed `Reason` once constructed.
    reason: Reason | None = None
    refusal: bool = False
    max_tokens: bool = False
    tools_called: int = 0
    error: HarnessError | None = None
    # What the turn went through (iterations, repairs, nudges), for the turn_ended event.
    turn: dict[str, Any] = field(default_factory=dict)
    # With an output schema: {"value": ...} or {"error": "..."} (R-L3e).
    structured_output: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.reason is not None and not isinstance(self.reason, Reason):
            object.__setattr__(self, "reason", parse_reason(self.reason))

    def with_turn(self, turn: dict[str, Any]) -> TurnOutcome:
        """`dataclasses.replace(self, turn=turn)`, once per turn, without `replace`'s walk
        over the fields (tests check both give the same for every field)."""
        return TurnOutcome(
            self.kind,
            self.reason,
            self.refusal,
            self.max_tokens,
            self.tools_called,
            self.error,
            turn,
            self.structured_output,
        )

    @property
    def wire_reason(self) -> str | None:
        """The reason as it goes on the `turn_ended` event and the prompt response."""
        return None if self.reason is None else str(self.reason)

    @classmethod
    def completed(cls, *, tools_called: int, refusal: bool = False, max_tokens: bool = False) -> TurnOutcome:
        return cls(OutcomeKind.COMPLETED, refusal=refusal, max_tokens=max_tokens, tools_called=tools_called)

    @classmethod
    def cancelled(cls, reason: Reason | str, *, tools_called: int = 0) -> TurnOutcome:
        return cls(OutcomeKind.CANCELLED, reason=parse_reason(reason), tools_called=tools_called)

    @classmethod
    def failed(cls, error: HarnessError, *, tools_called: int = 0) -> TurnOutcome:
        return cls(OutcomeKind.FAILED, reason=error.kind, error=error, tools_called=tools_called)

    @classmethod
    def local_command(cls, name: str) -> TurnOutcome:
        """A prompt answered by a local slash command (`local_command:<name>`)."""
        return cls(OutcomeKind.COMPLETED, reason=LocalCommandReason(name))

    @classmethod
    def from_event(cls, payload: dict[str, Any]) -> TurnOutcome:
        """The outcome a `turn_ended` event recorded (to answer a retried request after a
        restart exactly as the original would have been answered)."""
        error = None
        if isinstance(payload.get("error"), dict):
            try:
                kind = ErrorKind(payload["error"].get("kind"))
            except ValueError:
                kind = ErrorKind.INTERNAL
            error = HarnessError(kind, str(payload["error"].get("message", "")))
        stop = payload.get("stopReason")
        reason: Reason | None = None
        if isinstance(payload.get("reason"), str):
            try:
                reason = parse_reason(payload["reason"])
            except ValueError:
                reason = None  # a reason no version of agentd wrote: answer without one
        return cls(
            OutcomeKind(payload["outcome"]),
            reason=reason,
            refusal=stop == StopReason.REFUSAL.value,
            max_tokens=stop == StopReason.MAX_TOKENS.value,
            tools_called=int(payload.get("toolsCalled", 0)),
            error=error,
            structured_output=payload.get("structuredOutput"),
        )


def reported_as(kind: OutcomeKind, reason: Reason | None) -> dict[str, str] | None:
    """How telemetry classifies an outcome, when not by its own kind. 000: "MaxTurnsReached
    上报时归类为 Cancelled 加 reason:max_turns_reached 标签" — running out of turns counts as a
    system-initiated cancellation, not an event of its own."""
    if kind is OutcomeKind.MAX_TURNS_REACHED:
        return {"outcome": OutcomeKind.CANCELLED.value, "reason": EndReason.MAX_TURNS_REACHED.value}
    return None


def stop_reason(outcome: TurnOutcome) -> StopReason:
    match outcome.kind:
        case OutcomeKind.COMPLETED:
            if outcome.refusal:
                return StopReason.REFUSAL
            if outcome.max_tokens:
                return StopReason.MAX_TOKENS
            return StopReason.END_TURN
        case OutcomeKind.CANCELLED | OutcomeKind.INTERRUPTED:
            return StopReason.CANCELLED
        case OutcomeKind.STATIONARITY_ENDED:
            return StopReason.END_TURN
        case OutcomeKind.MAX_TURNS_REACHED | OutcomeKind.BUDGET_STOPPED:
            return StopReason.MAX_TURN_REQUESTS
        case OutcomeKind.FAILED:
            return StopReason.END_TURN  # not sent: Failed answers with an error
