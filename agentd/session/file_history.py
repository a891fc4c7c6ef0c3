"""Snapshots before edits (R-T12, issue 16 item 14).

Seed 003: "快照（snapshot_before_mutating_tools，变更类工具执行前留底）" — before a mutating
tool runs, the files it will change are kept. Here: the first time a turn's write tool
(`Access.WRITE`: `write_file`, `edit_file`, any tool whose locations name the paths it
writes) is about to change a path, the file's bytes (or "absent" when the turn creates it)
are committed to the store, then the tool runs. `bash` and other commands are not tracked:
what a shell command changes cannot be known before it runs. When the editor writes the file
(ACP `fs/write_text_file`), the snapshot is still the file on disk, not an unsaved buffer.
A snapshot that cannot be stored fails the tool call: no change goes unguarded.

A turn's mark is its `turn_started` event, which carries the conversation's length before
its prompt (`messageIndex`): it rides the turn's group commit, so a turn that changes no
file costs no store write here.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from agentd.store import FileSnapshot, Store, TurnCut
from agentd.store import snapshots as rows
from agentd.tools import ToolError, parent_dir, read_existing

log = logging.getLogger(__name__)

PRESENT, ABSENT, TOO_LARGE = "present", "absent", "too_large"


def read_prior(root: Path, path: Path) -> bytes | None:
    """The file's bytes, None when it does not exist; reached from the workspace root
    without following a symlink (raises `ToolError` for one, as the tool itself would)."""
    disp = str(path)
    try:
        with parent_dir(root, path, disp) as (dir_fd, name):
            return read_existing(dir_fd, name, disp)
    except FileNotFoundError:  # a missing directory on the way: the file is new
        return None


class FileHistory:
    """One session's snapshot recorder (owned by its actor)."""

    def __init__(
        self, session_id: str, cwd: Path, store: Store | None, max_file: int, max_session: int
    ) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.store = store
        self.max_file = max_file
        self.max_session = max_session
        self._seen: dict[str, set[str]] = {}  # turn id → paths already snapshotted
        self._bytes: int | None = None  # bytes kept for this session (read once, then counted)

    def end_turn(self, turn_id: str) -> None:
        self._seen.pop(turn_id, None)

    async def before_write(self, turn_id: str, paths: list[str]) -> None:
        """Snapshot each path this turn has not changed yet, committed before the change."""
        if self.store is None:
            return
        seen = self._seen.setdefault(turn_id, set())
        for raw in paths:
            path = Path(raw)
            try:
                rel = path.relative_to(self.cwd).as_posix()
            except ValueError:
                continue  # outside the workspace: the tool refuses it anyway
            if rel in seen:
                continue
            try:
                prior = await asyncio.to_thread(read_prior, self.cwd, path)
            except (ToolError, OSError) as exc:  # a symlink or unreadable: the tool fails too
                log.info("no snapshot of %s: %s", rel, exc)
                continue
            seen.add(rel)
            if self._bytes is None:
                self._bytes = await rows.stored_bytes(self.store.engine, self.session_id)
            size = 0 if prior is None else len(prior)
            if prior is None:
                snap = FileSnapshot(turn_id, rel, ABSENT, None)
            elif size > self.max_file or self._bytes + size > self.max_session:
                snap = FileSnapshot(turn_id, rel, TOO_LARGE, None)
            else:
                snap = FileSnapshot(turn_id, rel, PRESENT, prior)
            kept = size if snap.state == PRESENT else 0
            try:
                await rows.add_snapshot(self.store.engine, self.session_id, snap, kept)
            except Exception as exc:  # no unguarded change: the tool call fails instead
                seen.discard(rel)
                raise ToolError(f"could not save a snapshot of {rel} before changing it: {exc}") from None
            self._bytes += kept

    async def conversation_cleared(self, up_to_seq: int) -> None:
        """`/clear` emptied the conversation: a rewind to a turn started up to `up_to_seq`
        cuts it to empty (a rare write, only at this moment)."""
        if self.store is not None:
            await rows.add_cut(self.store.engine, self.session_id, TurnCut(0, up_to_seq, 0))

    def forget(self, released: int) -> None:
        if self._bytes is not None:
            self._bytes = max(0, self._bytes - released)
