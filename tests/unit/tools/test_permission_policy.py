"""The permission policy (R-T4) as a table: every mode × access × remembered answer, with
no server. The end-to-end wiring (asking over ACP, remembering answers per session, plan
mode's readable refusal) is in tests/e2e/tools/test_permissions.py."""

from __future__ import annotations

import itertools

import pytest

from agentd.core.modes import PermissionMode
from agentd.tools.base import Access
from agentd.tools.permissions import Decision, Remembered, decide, plan_mode_refuses

ALLOW, ASK, DENY = Decision.ALLOW, Decision.ASK, Decision.DENY
R, W, X, N = Access.READ, Access.WRITE, Access.EXECUTE, Access.NETWORK
ALWAYS, NEVER = Remembered.ALLOW_ALWAYS, Remembered.REJECT_ALWAYS

# mode → access → {remembered: decision}; None is "nothing remembered".
MATRIX: dict[PermissionMode, dict[Access, dict[Remembered | None, Decision]]] = {
    PermissionMode.DEFAULT: {
        R: {None: ALLOW, ALWAYS: ALLOW, NEVER: ALLOW},  # reads never ask, whatever was said
        W: {None: ASK, ALWAYS: ALLOW, NEVER: DENY},
        X: {None: ASK, ALWAYS: ALLOW, NEVER: DENY},
        N: {None: ASK, ALWAYS: ALLOW, NEVER: DENY},  # web_fetch: asks like a command
    },
    PermissionMode.ACCEPT_EDITS: {
        R: {None: ALLOW, ALWAYS: ALLOW, NEVER: ALLOW},
        W: {None: ALLOW, ALWAYS: ALLOW, NEVER: DENY},  # a remembered rejection still wins
        X: {None: ASK, ALWAYS: ALLOW, NEVER: DENY},
        N: {None: ASK, ALWAYS: ALLOW, NEVER: DENY},  # not an edit
    },
    PermissionMode.BYPASS: {
        R: {None: ALLOW, ALWAYS: ALLOW, NEVER: ALLOW},
        W: {None: ALLOW, ALWAYS: ALLOW, NEVER: ALLOW},  # bypass approves everything
        X: {None: ALLOW, ALWAYS: ALLOW, NEVER: ALLOW},
        N: {None: ALLOW, ALWAYS: ALLOW, NEVER: ALLOW},
    },
    PermissionMode.PLAN: {
        R: {None: ALLOW, ALWAYS: ALLOW, NEVER: ALLOW},
        W: {None: DENY, ALWAYS: DENY, NEVER: DENY},  # read-only: no "always allow" opens it
        X: {None: DENY, ALWAYS: DENY, NEVER: DENY},
        N: {None: DENY, ALWAYS: DENY, NEVER: DENY},
    },
}

CASES = [
    pytest.param(mode, access, remembered, decision, id=f"{mode}-{access}-{remembered or 'none'}")
    for mode, by_access in MATRIX.items()
    for access, by_remembered in by_access.items()
    for remembered, decision in by_remembered.items()
]


def test_the_table_covers_every_combination() -> None:
    every = set(itertools.product(PermissionMode, Access, [None, *Remembered]))
    assert {tuple(c.values[:3]) for c in CASES} == every


@pytest.mark.parametrize(("mode", "access", "remembered", "decision"), CASES)
def test_decide(
    mode: PermissionMode, access: Access, remembered: Remembered | None, decision: Decision
) -> None:
    assert decide(mode, access, remembered) is decision


@pytest.mark.parametrize(
    ("mode", "access", "refuses"),
    [(m, a, m is PermissionMode.PLAN and a is not R) for m in PermissionMode for a in Access],
)
def test_plan_mode_refuses_only_changes_in_plan_mode(
    mode: PermissionMode, access: Access, refuses: bool
) -> None:
    assert plan_mode_refuses(mode, access) is refuses
