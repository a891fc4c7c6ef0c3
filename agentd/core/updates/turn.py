"""A turn's own events as typed updates: its start and end, usage, retries, recoveries,
hooks and the goal.

Each payload keeps the exact keys, order and values of the events already stored; nested
records the loop builds (a retry decision, the goal's state, a hook's verdict, the usage
ledger) ride as their stored JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from agentd.core.frozen_init import quick_init
from agentd.core.kinds import EventKind
from agentd.core.updates.wire import BadPayload, Flat, Json, expect

# The key a turn's request digest is stored under (a restart tells a retry from a reuse).
REQUEST_DIGEST = "requestDigest"


@quick_init
@dataclass(frozen=True)
class TurnStarted(Flat):
    """A turn started: which prompt, why (`source`), where it cuts the conversation."""

    kind: ClassVar[EventKind] = EventKind.TURN_STARTED
    _keys: ClassVar[Mapping[str, str]] = {
        "turn_id": "turnId",
        "prompt_id": "promptId",
        "turn_kind": "kind",
        "source": "source",
        "message_index": "messageIndex",
        "request_id": "requestId",
        "request_digest": REQUEST_DIGEST,
    }
    _optional: ClassVar[frozenset[str]] = frozenset({"message_index", "request_id", "request_digest"})

    turn_id: str
    prompt_id: str
    turn_kind: str  # the queued entry's kind: prompt, compact, …
    source: str  # who started it: a user, a finished task (agentd/session/wake.py)
    message_index: int | None = None
    request_id: str | None = None
    request_digest: str | None = None


@quick_init
@dataclass(frozen=True)
class TurnEnded(Flat):
    """A turn ended: its outcome, the ACP stop reason, and what the answer to its prompt says
    (`agentd/core/answers.py`)."""

    kind: ClassVar[EventKind] = EventKind.TURN_ENDED
    _keys: ClassVar[Mapping[str, str]] = {
        "turn_id": "turnId",
        "prompt_id": "promptId",
        "outcome": "outcome",
        "stop_reason": "stopReason",
        "tools_called": "toolsCalled",
        "request_id": "requestId",
        "reason": "reason",
        "error": "error",
        "structured_output": "structuredOutput",
        "turn": "turn",
        "session_usage": "sessionUsage",
        "request_digest": REQUEST_DIGEST,
    }
    _optional: ClassVar[frozenset[str]] = frozenset(
        {"request_id", "reason", "error", "structured_output", "turn", "request_digest"}
    )

    turn_id: str
    prompt_id: str | None
    outcome: str  # the outcome kind's value
    stop_reason: str  # the ACP stop reason's value
    tools_called: int
    request_id: str | None = None
    reason: Json = None  # the reason on the wire (a string, or a record for some reasons)
    error: Mapping[str, Json] | None = None  # {kind, message}
    structured_output: Json = None
    turn: Mapping[str, Json] | None = None  # the turn's summary
    session_usage: Mapping[str, Json] | None = None
    request_digest: str | None = None


@quick_init
@dataclass(frozen=True)
class UsageReported(Flat):
    """The context used against its size, the prompt's usage ledger, its cost so far."""

    kind: ClassVar[EventKind] = EventKind.USAGE
    _keys: ClassVar[Mapping[str, str]] = {"used": "used", "size": "size", "prompt": "prompt", "cost": "cost"}
    _optional: ClassVar[frozenset[str]] = frozenset({"cost"})

    used: int
    size: int
    prompt: Mapping[str, Json]
    cost: Mapping[str, Json] | None = None  # {amount, currency}


@dataclass(frozen=True)
class RetryDecided:
    """A retry bucket's decision (the decision's own record, `agentd/loop/retry.py`), with
    what caused it: a model error, degenerate output or a tool loop; and the lane it ran on."""

    kind: ClassVar[EventKind] = EventKind.RETRY
    _causes: ClassVar[tuple[str, ...]] = ("error", "degenerate", "loop")

    decision: Mapping[str, Json]
    error: Mapping[str, Json] | None = None
    degenerate: Mapping[str, Json] | None = None
    loop: Mapping[str, Json] | None = None
    lane: str | None = None

    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = dict(self.decision)
        for key in self._causes:
            if (value := getattr(self, key)) is not None:
                data[key] = value
        if self.lane is not None:
            data["lane"] = self.lane
        return data

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> RetryDecided:
        rest = dict(p)
        causes = {k: rest.pop(k) for k in cls._causes if k in rest}
        lane = rest.pop("lane", None)
        return cls(rest, lane=lane, **causes)

    def to_record(self) -> dict[str, Any]:
        """The retry as the turn's summary lists it (the same record)."""
        return self.payload()


@dataclass(frozen=True)
class CompletionRecovery(Flat):
    """A required tool was not called: the turn asks again (`agentd/loop/turn.py`)."""

    kind: ClassVar[EventKind] = EventKind.COMPLETION_RECOVERY
    _keys: ClassVar[Mapping[str, str]] = {
        "tool": "tool",
        "attempt": "attempt",
        "max_retries": "maxRetries",
        "delay_seconds": "delaySeconds",
    }

    tool: str
    attempt: int
    max_retries: int
    delay_seconds: float


@dataclass(frozen=True)
class StopHooksRan(Flat):
    """The stop hooks' verdicts at a turn's end, and how often the turn was sent back."""

    kind: ClassVar[EventKind] = EventKind.STOP_HOOKS
    _keys: ClassVar[Mapping[str, str]] = {"reentries": "reentries", "verdicts": "verdicts"}

    reentries: int
    verdicts: Sequence[Mapping[str, Json]]


@dataclass(frozen=True)
class PromptHooksRan(Flat):
    """The user_prompt_submit hooks' verdicts at a turn's start."""

    kind: ClassVar[EventKind] = EventKind.PROMPT_HOOKS
    _keys: ClassVar[Mapping[str, str]] = {"verdicts": "verdicts"}

    verdicts: Sequence[Mapping[str, Json]]


_CLEARED = {"status": "cleared"}


@dataclass(frozen=True)
class GoalChanged:
    """The goal's state after a change or a verdict (its own record, `agentd/loop/goals/`),
    None once cleared; `verdict` the verdict that changed it."""

    kind: ClassVar[EventKind] = EventKind.GOAL

    goal: Mapping[str, Json] | None
    verdict: Mapping[str, Json] | None = None

    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = dict(self.goal) if self.goal is not None else dict(_CLEARED)
        if self.verdict is not None:
            data["verdictEvent"] = self.verdict
        return data

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> GoalChanged:
        rest = dict(p)
        verdict = rest.pop("verdictEvent", None)
        if verdict is not None:
            expect(verdict, dict, "verdictEvent")
        if "status" not in rest:
            raise BadPayload("goal: no status")
        return cls(None if rest == _CLEARED else rest, verdict)
