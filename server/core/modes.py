"""Setting enums shared across layers: the permission mode (config, tools, loop, transport) and
SQLite's synchronous level (config and the store)."""

from __future__ import annotations

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
    PLAN = "plan"  # read-only; refuses writes whatever else is on record
