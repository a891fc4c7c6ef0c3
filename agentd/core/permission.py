"""A client's answer to a permission request, as typed data the loop acts on.

The wire strings are ACP's (`RequestPermissionOutcome.outcome`, `PermissionOption.kind`) plus
agentd's own `timeout`; the enums keep them, so events carry exactly what they did before.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class PermissionOutcome(StrEnum):
    SELECTED = "selected"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"  # nobody answered in time
    # Every client asked answered with an error (or left) and none is left to ask: refused at
    # once (a stock client may answer `-32601`; waiting for the timeout would hang the turn).
    UNANSWERED = "unanswered"


class PermissionOptionKind(StrEnum):
    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    REJECT_ONCE = "reject_once"
    REJECT_ALWAYS = "reject_always"


_ALLOWING = frozenset({PermissionOptionKind.ALLOW_ONCE, PermissionOptionKind.ALLOW_ALWAYS})


@dataclass(frozen=True)
class PermissionAnswer:
    """What the user answered. Plain wire strings are accepted and parsed (callers that still
    pass strings keep working); the fields are always the enums once constructed."""

    outcome: PermissionOutcome
    option_kind: PermissionOptionKind | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcome", PermissionOutcome(self.outcome))
        if self.option_kind is not None:
            object.__setattr__(self, "option_kind", PermissionOptionKind(self.option_kind))

    @property
    def allowed(self) -> bool:
        return self.outcome is PermissionOutcome.SELECTED and self.option_kind in _ALLOWING
