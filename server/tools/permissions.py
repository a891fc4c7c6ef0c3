"""Permission policy (R-T4): a pure decision over mode, access and remembered answers.

Plan mode's write refusal is checked first and owns its invariant: no remembered
"always allow" and no other mode setting can open it.
"""

from __future__ import annotations

from enum import StrEnum

from server.core.modes import PermissionMode
from server.tools.base import Access


class Decision(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


class Remembered(StrEnum):
    ALLOW_ALWAYS = "allow_always"
    REJECT_ALWAYS = "reject_always"


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
