"""A session's two switches, permission mode and plan gate, as tables (issue 16 item 8).

Seed 000: "PlanEditGate 刻意独立于权限管理器…即便用户开了全部批准，plan 模式下的写操作依然被拦".
"""

from __future__ import annotations

import itertools

import pytest

from agentd.core.modes import PermissionMode, SessionModes
from agentd.tools.base import Access
from agentd.tools.permissions import plan_gate_refuses

D, AE, B, P = PermissionMode.DEFAULT, PermissionMode.ACCEPT_EDITS, PermissionMode.BYPASS, PermissionMode.PLAN
LAYER = (D, AE, B)  # the permission layer's modes


@pytest.mark.parametrize(
    ("start", "selected", "expected"),
    [
        (SessionModes(D), P, SessionModes(D, plan=True)),
        (SessionModes(B), P, SessionModes(B, plan=True)),
        (SessionModes(D, plan=True), B, SessionModes(B, plan=True)),  # bypass never opens the gate
        (SessionModes(B, plan=True), D, SessionModes(D, plan=True)),  # nor does any other mode
        (SessionModes(D), AE, SessionModes(AE)),
        (SessionModes(AE, plan=True), P, SessionModes(AE, plan=True)),
    ],
)
def test_selecting_a_mode_id(start: SessionModes, selected: PermissionMode, expected: SessionModes) -> None:
    assert start.select(selected) == expected


@pytest.mark.parametrize(("permission", "plan"), list(itertools.product(LAYER, (False, True))))
def test_the_shown_mode_id_is_plan_while_the_gate_is_on(permission: PermissionMode, plan: bool) -> None:
    modes = SessionModes(permission, plan)
    assert modes.mode_id is (P if plan else permission)
    assert modes.with_plan(False) == SessionModes(permission)
    assert modes.with_plan(True) == SessionModes(permission, True)


@pytest.mark.parametrize(
    ("stored", "plan", "expected"),
    [
        ("plan", False, SessionModes(D, True)),  # a row from before the gate had its own column
        ("bypass", True, SessionModes(B, True)),
        ("accept_edits", False, SessionModes(AE)),
        (P, False, SessionModes(D, True)),  # AGENTD_PERMISSION_MODE=plan
    ],
)
def test_of_normalises_a_stored_plan_mode(stored: str, plan: bool, expected: SessionModes) -> None:
    assert SessionModes.of(stored, plan) == expected
    assert expected.permission is not P


@pytest.mark.parametrize(("plan", "access"), list(itertools.product((False, True), Access)))
def test_the_plan_gate_refuses_every_change_and_only_when_on(plan: bool, access: Access) -> None:
    assert plan_gate_refuses(plan, access) is (plan and access is not Access.READ)
