"""Permission policy (R-T4): a pure decision over mode, access and remembered answers —
and, apart from it, the plan gate.

The plan gate (`plan_gate_refuses`) is checked before the permission layer and owns its
invariant: no remembered "always allow" and no permission mode (not even bypass) can open
it. Seed 000: "两个都能说“不”的系统串联时，各自把守各自的不变量".
"""

from __future__ import annotations

from enum import StrEnum

from agentd.core import PermissionMode
from agentd.tools.base import Access


class Decision(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


class Remembered(StrEnum):
    ALLOW_ALWAYS = "allow_always"
    REJECT_ALWAYS = "reject_always"


def plan_gate_refuses(plan: bool, access: Access) -> bool:
    """The plan gate: while it is on, nothing that changes the workspace runs."""
    return plan and access is not Access.READ


def plan_mode_refuses(mode: PermissionMode, access: Access) -> bool:
    return mode is PermissionMode.PLAN and access is not Access.READ


def decide(mode: PermissionMode, access: Access, remembered: Remembered | None) -> Decision:
    if plan_mode_refuses(mode, access):
        return Decision.DENY
    if access is Access.READ or mode is PermissionMode.BYPASS:
        return Decision.ALLOW
    if remembered is Remembered.REJECT_ALWAYS:
        return Decision.DENY
    if remembered is Remembered.ALLOW_ALWAYS:
        return Decision.ALLOW
    if mode is PermissionMode.ACCEPT_EDITS and access is Access.WRITE:
        return Decision.ALLOW
    return Decision.ASK


PERMISSION_OPTIONS: list[dict[str, str]] = [
    {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject_always", "name": "Always reject", "kind": "reject_always"},
]
