"""Setting enums shared across layers: the permission mode (config, tools, loop, transport), a
session's modes (permission mode and plan gate), and SQLite's synchronous level (config and
the store)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum


class SqliteSynchronous(StrEnum):
    """SQLite's `PRAGMA synchronous` (in WAL mode): when a commit waits for the disk."""

    NORMAL = "normal"  # survives a crash of agentd; a power loss may undo the last commits
    FULL = "full"  # every commit is on disk before it returns: survives a power loss too
    EXTRA = "extra"  # FULL, and the directory is synced as well


class PermissionMode(StrEnum):
    DEFAULT = "default"  # ask for edits and commands
    ACCEPT_EDITS = "accept_edits"  # edits allowed, commands ask
    BYPASS = "bypass"  # approve everything
    PLAN = "plan"  # read-only: the plan gate (a mode id; `SessionModes` keeps it apart)


@dataclass(frozen=True)
class SessionModes:
    """A session's two independent switches (R-T4). `permission` is the permission layer's
    mode (what needs asking); `plan` is the plan gate, which refuses every write or command
    whatever `permission` says — seed 000: "PlanEditGate 刻意独立于权限管理器…即便用户开了全部
    批准，plan 模式下的写操作依然被拦". Turning bypass on never turns plan off; only clearing
    the gate does (`/plan off`, the `plan` config option).

    ACP knows one mode per session, so clients are shown `mode_id`: `plan` while the gate is
    on, else the permission mode. Selecting `plan` turns the gate on; selecting another id
    sets the permission mode underneath and leaves the gate as it is."""

    permission: PermissionMode = PermissionMode.DEFAULT  # never PLAN (see `of`)
    plan: bool = False

    @classmethod
    def of(cls, mode: PermissionMode | str, plan: bool = False) -> SessionModes:
        """From a stored or configured mode: a `plan` permission mode (rows from before the
        gate had its own column, `AGENTD_PERMISSION_MODE=plan`) is the gate over `default`."""
        mode = PermissionMode(mode)
        if mode is PermissionMode.PLAN:
            return cls(PermissionMode.DEFAULT, True)
        return cls(mode, plan)

    @property
    def mode_id(self) -> PermissionMode:
        return PermissionMode.PLAN if self.plan else self.permission

    def select(self, mode_id: PermissionMode) -> SessionModes:
        """`session/set_mode`, `/mode`: `plan` turns the gate on; any other id is the new
        permission mode, and the gate stays as it was."""
        if mode_id is PermissionMode.PLAN:
            return replace(self, plan=True)
        return replace(self, permission=mode_id)

    def with_plan(self, on: bool) -> SessionModes:
        return replace(self, plan=on)
