"""A session's own events as typed updates: its title, modes, config options, queue,
permission requests, rewinds and reverted files.

Each payload keeps the exact keys, order and values of the events already stored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from agentd.core.kinds import EventKind
from agentd.core.updates.wire import Flat, Json


@dataclass(frozen=True)
class SessionInfoChanged(Flat):
    """The session's title (ACP `session_info_update`)."""

    kind: ClassVar[EventKind] = EventKind.SESSION_INFO
    _keys: ClassVar[Mapping[str, str]] = {"title": "title", "updated_at": "updatedAt"}

    title: str | None
    updated_at: str  # ISO 8601


@dataclass(frozen=True)
class PlanModeChanged(Flat):
    """The plan gate turned on or off."""

    kind: ClassVar[EventKind] = EventKind.PLAN_MODE
    _keys: ClassVar[Mapping[str, str]] = {"plan": "plan"}

    plan: bool


@dataclass(frozen=True)
class ModeChanged(Flat):
    """The mode clients are shown, the permission mode under it, the plan gate."""

    kind: ClassVar[EventKind] = EventKind.MODE_CHANGED
    _keys: ClassVar[Mapping[str, str]] = {
        "mode_id": "modeId",
        "permission_mode": "permissionMode",
        "plan": "plan",
    }

    mode_id: str
    permission_mode: str
    plan: bool


@dataclass(frozen=True)
class ConfigOptionsChanged(Flat):
    """The full set of config options after a mode, model or agent changed."""

    kind: ClassVar[EventKind] = EventKind.CONFIG_OPTIONS
    _keys: ClassVar[Mapping[str, str]] = {"config_options": "configOptions"}

    config_options: Sequence[Mapping[str, Json]]


@dataclass(frozen=True)
class QueueChanged(Flat):
    """What changed in the visible queue (added, updated, removed, moved), and its length."""

    kind: ClassVar[EventKind] = EventKind.QUEUE_UPDATE
    _keys: ClassVar[Mapping[str, str]] = {"changes": "changes", "length": "length"}

    changes: Sequence[Mapping[str, Json]]
    length: int


@dataclass(frozen=True)
class PermissionRequested(Flat):
    """The gate asked the clients whether a tool call may run."""

    kind: ClassVar[EventKind] = EventKind.PERMISSION_REQUESTED
    _keys: ClassVar[Mapping[str, str]] = {
        "request_id": "requestId",
        "tool_call": "toolCall",
        "options": "options",
    }

    request_id: str
    tool_call: Mapping[str, Json]
    options: Sequence[Mapping[str, str]]


@dataclass(frozen=True)
class PermissionResolved(Flat):
    """How a permission request was answered."""

    kind: ClassVar[EventKind] = EventKind.PERMISSION_RESOLVED
    _keys: ClassVar[Mapping[str, str]] = {
        "request_id": "requestId",
        "outcome": "outcome",
        "option_id": "optionId",
    }
    _optional: ClassVar[frozenset[str]] = frozenset({"option_id"})

    request_id: str
    outcome: str
    option_id: str | None = None


@dataclass(frozen=True)
class Rewound(Flat):
    """Turns undone: the files put back (or not) and where the conversation was cut."""

    kind: ClassVar[EventKind] = EventKind.REWOUND
    _keys: ClassVar[Mapping[str, str]] = {
        "turn_id": "turnId",
        "files": "files",
        "restored": "restored",
        "removed": "removed",
        "not_restored": "notRestored",
        "messages": "messages",
        "turns_undone": "turnsUndone",
    }

    turn_id: str
    files: bool
    restored: list[str]
    removed: list[str]
    not_restored: list[str]
    messages: int
    turns_undone: list[str]


@dataclass(frozen=True)
class FileReverted(Flat):
    """One file put back as it was before a turn (`_agentd/session/revert_file`)."""

    kind: ClassVar[EventKind] = EventKind.FILE_REVERTED
    _keys: ClassVar[Mapping[str, str]] = {"path": "path", "reverted": "reverted", "turn_id": "turnId"}

    path: str
    reverted: str
    turn_id: str | None
