"""Terminal outcomes of a turn (R-L3a) and their mapping to ACP stop reasons.

Each outcome is data: it ends up on the `turn_ended` event and decides the
`session/prompt` response. `Failed` answers the prompt with a JSON-RPC error instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from protocol.acp import StopReason
from server.core.errors import ErrorKind, HarnessError


class OutcomeKind(StrEnum):
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    MAX_TURNS_REACHED = "max_turns_reached"
    STATIONARITY_ENDED = "stationarity_ended"
    BUDGET_STOPPED = "budget_stopped"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # the server died mid-turn (set on recovery)


@dataclass(frozen=True)
class TurnOutcome:
    kind: OutcomeKind
    reason: str | None = None  # precise reason, e.g. "user_cancelled", "permission_rejected"
    refusal: bool = False
    max_tokens: bool = False
    tools_called: int = 0
    error: HarnessError | None = None
    # What the turn went through (iterations, repairs, nudges), for the turn_ended event.
    turn: dict[str, Any] = field(default_factory=dict)
    # With an output schema: {"value": ...} or {"error": "..."} (R-L3e).
    structured_output: dict[str, Any] | None = None

    @classmethod
    def completed(cls, *, tools_called: int, refusal: bool = False, max_tokens: bool = False) -> TurnOutcome:
        return cls(OutcomeKind.COMPLETED, refusal=refusal, max_tokens=max_tokens, tools_called=tools_called)

    @classmethod
    def cancelled(cls, reason: str, *, tools_called: int = 0) -> TurnOutcome:
        return cls(OutcomeKind.CANCELLED, reason=reason, tools_called=tools_called)

    @classmethod
    def failed(cls, error: HarnessError, *, tools_called: int = 0) -> TurnOutcome:
        return cls(OutcomeKind.FAILED, reason=error.kind.value, error=error, tools_called=tools_called)

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
        return cls(
            OutcomeKind(payload["outcome"]),
            reason=payload.get("reason"),
            refusal=stop == StopReason.REFUSAL.value,
            max_tokens=stop == StopReason.MAX_TOKENS.value,
            tools_called=int(payload.get("toolsCalled", 0)),
            error=error,
            structured_output=payload.get("structuredOutput"),
        )


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
