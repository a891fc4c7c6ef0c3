"""Rewind (R-T12, issue 16 item 14): files and/or the conversation back to before a turn.

Seed 003: "快照（snapshot_before_mutating_tools，变更类工具执行前留底）" — the snapshots
`file_history.py` keeps before each change are what this restores.

Rewinding to turn T undoes T and every turn after it: each path those turns changed gets
the content it had before the first of them changed it (a file they created is removed);
a file whose snapshot was over the cap is listed in `notRestored`, never silently skipped.
Only paths inside the session's workspace are touched, reached without following symlinks.
The conversation is cut back to its length before T's prompt. The event log stays
append-only: a `rewound` event (rendered as `_agentd/event`) tells every client.
Refused while a turn runs (`session_busy`); `/rewind` runs as its own local turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentd.core import EventKind, Rewound
from agentd.session.errors import SessionError, SessionErrorKind
from agentd.session.file_history import ABSENT, PRESENT
from agentd.store import FileSnapshot, TurnMark
from agentd.store import snapshots as rows
from agentd.tools import ToolError, parent_dir, replace_atomically

if TYPE_CHECKING:
    from agentd.core import Conversation
    from agentd.session.eventlog import Journal
    from agentd.session.file_history import FileHistory
    from agentd.session.services import ActorServices


class RewindHost(Protocol):
    """The actor as a rewind sees it: only these names."""

    @property
    def id(self) -> str: ...
    @property
    def cwd(self) -> Path: ...
    @property
    def services(self) -> ActorServices: ...
    @property
    def journal(self) -> Journal: ...
    @property
    def conversation(self) -> Conversation: ...
    @property
    def files(self) -> FileHistory: ...


def invalid(message: str) -> SessionError:
    return SessionError(SessionErrorKind.INVALID, message)


async def _compacted_at(actor: RewindHost) -> int:
    """The seq of the session's last compaction (0: none); no turn before it can be rewound."""
    store = actor.services.store
    assert store is not None
    found = await store.latest_events(actor.id, [EventKind.COMPACTION.value], limit=1)
    return found[0].seq if found else 0


async def rewindable_turns(actor: RewindHost, after_seq: int | None = None) -> list[TurnMark]:
    """The turns a rewind can reach, oldest first: the session's `turn_started` events after
    its last compaction (read once they are committed), less those rewinds undid."""
    store = actor.services.store
    if store is None:
        return []
    await actor.journal.flushed()
    if after_seq is None:
        after_seq = await _compacted_at(actor)
    return await rows.marks(store.engine, actor.id, EventKind.TURN_STARTED.value, after_seq)


async def rewind(actor: RewindHost, turn_id: str, *, files: bool) -> dict[str, Any]:
    """Undo `turn_id` and the turns after it; the result says what was restored."""
    store = actor.services.store
    if store is None:
        raise invalid("rewind is not available: this server keeps no snapshots")
    compacted = await _compacted_at(actor)
    marks = await rewindable_turns(actor, compacted)
    at = next((i for i, m in enumerate(marks) if m.turn_id == turn_id), None)
    if at is None:
        known = [m.turn_id for m in marks[-5:]]
        why = " (or one before the last compaction)" if compacted else ""
        raise SessionError(
            SessionErrorKind.INVALID,
            f"unknown turn {turn_id!r}: not a turn of this session that can be rewound{why}",
            {"turnId": turn_id, "recentTurns": known},
        )
    target, undone = marks[at], marks[at:]
    if target.message_idx > len(actor.conversation):
        raise invalid(f"the conversation no longer reaches turn {turn_id} (it was cleared)")
    result: dict[str, Any] = {
        "turnId": turn_id,
        "files": files,
        "restored": [],
        "removed": [],
        "notRestored": [],
    }
    if files:
        order = {m.turn_id: i for i, m in enumerate(undone)}
        snaps = await rows.snapshots(store.engine, actor.id, list(order))
        first: dict[str, FileSnapshot] = {}
        for snap in sorted(snaps, key=lambda s: order[s.turn_id]):
            first.setdefault(snap.path, snap)  # the state before the earliest undone turn
        for path in sorted(first):
            outcome = await asyncio.to_thread(restore_snapshot, actor.cwd, first[path])
            result[outcome].append(path)
        actor.files.forget(sum(len(s.content or b"") for s in snaps))
    actor.conversation.replace(actor.conversation.messages[: target.message_idx])
    result["messages"] = target.message_idx
    result["turnsUndone"] = undone_ids = [m.turn_id for m in undone]
    # The turns started in [target, now] are undone: one rare row, with their snapshots gone.
    await rows.drop_turns(store.engine, actor.id, undone_ids, target.seq, actor.journal.seq)
    actor.journal.emit(
        Rewound(
            turn_id,
            files,
            result["restored"],
            result["removed"],
            result["notRestored"],
            result["messages"],
            undone_ids,
        )
    )
    await actor.journal.flushed()
    return result


def restore_snapshot(root: Path, snap: FileSnapshot) -> str:
    """Put one file back; which list of the result it belongs to."""
    if snap.state not in (PRESENT, ABSENT):
        return "notRestored"
    path = root / snap.path
    disp = snap.path
    try:
        if snap.state == PRESENT:
            with parent_dir(root, path, disp, create=True) as (dir_fd, name):
                replace_atomically(dir_fd, name, disp, snap.content or b"")
            return "restored"
        with parent_dir(root, path, disp) as (dir_fd, name):
            # unlink removes a symlink itself, never its target; a directory stays.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=dir_fd)
        return "removed"
    except FileNotFoundError:
        return "removed"  # its directory is gone too
    except (ToolError, OSError):
        return "notRestored"
