"""What a session changed, and undoing one file (issue 33 item 2).

The base of a file is its snapshot before the first turn (from `since`, or from the start)
that changed it — the snapshots `file_history.py` keeps before every edit; the diff is from
that base to what the file holds now. Changes the file tools did not make (a `bash`
command's, say) are found with git when the workspace is in a repository: against HEAD,
marked `source: "git"`, and not revertible (the session kept no copy of them).

`revert_file` puts one file back to its base. It refuses when the file changed outside the
session since the session last wrote it (what its last write left is the `newText` of the
diff its tool call reported); `force` reverts anyway.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentd.core import EventKind, FileReverted
from agentd.session.errors import SessionError, SessionErrorKind
from agentd.session.file_history import ABSENT, PRESENT, read_prior
from agentd.session.rewind import restore_snapshot
from agentd.store import FileSnapshot, safe_relative
from agentd.store import snapshots as rows
from agentd.tools import ToolError

if TYPE_CHECKING:
    from agentd.session.eventlog import Journal
    from agentd.session.services import ActorServices


class ChangesHost(Protocol):
    """The actor as the changes view sees it: only these names."""

    @property
    def id(self) -> str: ...
    @property
    def cwd(self) -> Path: ...
    @property
    def services(self) -> ActorServices: ...
    @property
    def journal(self) -> Journal: ...


MAX_DIFF_CHARS = 256 * 1024  # one file's diff; a longer one is cut (`truncated`)
MAX_FILES = 500  # files listed; more are counted in `omitted`
WRITE_EVENTS_READ = 5000  # the newest tool-call results searched for a file's last write
GIT_TIMEOUT_S = 10.0
GIT_MAX_OUTPUT = 4 * 1024 * 1024
# Nothing a repository's own config could run: no fsmonitor hook, no external diff or textconv.
_GIT = ("git", "-c", "core.fsmonitor=", "-c", "core.quotePath=false")


def invalid(message: str, **data: Any) -> SessionError:
    return SessionError(SessionErrorKind.INVALID, message, data or None)


# ------------------------------------------------------------------------- pure decisions


def bases(
    snaps: list[FileSnapshot], turn_order: dict[str, int], since: int | None
) -> dict[str, FileSnapshot]:
    """Each path's base: its snapshot of the earliest turn (at or after `since`) that changed it."""
    ordered = sorted(enumerate(snaps), key=lambda p: (turn_order.get(p[1].turn_id, -1), p[0]))
    found: dict[str, FileSnapshot] = {}
    for _, snap in ordered:
        at = turn_order.get(snap.turn_id)
        if since is not None and (at is None or at < since):
            continue
        found.setdefault(snap.path, snap)
    return found


def _text(data: bytes | None) -> str | None:
    try:
        return None if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def file_change(path: str, base: FileSnapshot, now: bytes | None) -> dict[str, Any] | None:
    """The entry `changes` lists for one file (None: it is as it was)."""
    before = base.content if base.state == PRESENT else None
    if base.state != "too_large" and before == now:
        return None
    if base.state == ABSENT:
        status = "unchanged" if now is None else "added"
    else:
        status = "deleted" if now is None else "modified"
    if status == "unchanged":
        return None  # created, then removed again
    entry: dict[str, Any] = {"path": path, "status": status, "source": "snapshot", "turnId": base.turn_id}
    entry["revertible"] = base.state in (PRESENT, ABSENT)
    old, new = _text(before), _text(now)
    if (before is not None and old is None) or (now is not None and new is None):
        entry["binary"] = True
        return entry
    if base.state == "too_large":
        entry["diff"] = ""
        entry["note"] = "the file was over the snapshot cap: no diff, not revertible"
        return entry
    return _with_diff(entry, path, old or "", new or "", before is None, now is None)


def _with_diff(
    entry: dict[str, Any], path: str, old: str, new: str, added: bool, gone: bool
) -> dict[str, Any]:
    import difflib  # with the first diff, not with every first session (issue 32 item 3)

    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        "/dev/null" if added else f"a/{path}",
        "/dev/null" if gone else f"b/{path}",
    )
    text = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )
    if len(text) > MAX_DIFF_CHARS:
        text, entry["truncated"] = text[:MAX_DIFF_CHARS], True
    entry["diff"] = text
    return entry


def last_writes(updates: list[dict[str, Any]], cwd: Path) -> dict[str, str]:
    """path → the text the session's last completed write left in it (tool-call diffs)."""
    found: dict[str, str] = {}
    for update in updates:
        if update.get("status") != "completed":
            continue
        for item in update.get("content") or []:
            if not isinstance(item, dict) or item.get("type") != "diff":
                continue
            raw, new = item.get("path"), item.get("newText")
            if not isinstance(raw, str) or not isinstance(new, str):
                continue
            try:
                rel = Path(raw).relative_to(cwd).as_posix() if Path(raw).is_absolute() else raw
            except ValueError:
                continue
            found[rel] = new
    return found


@dataclass(frozen=True)
class RevertCheck:
    ok: bool
    reason: str = ""


def may_revert(base: FileSnapshot, now: bytes | None, last_written: str | None, force: bool) -> RevertCheck:
    """Whether one file may go back to `base` (pure: the caller read the disk and the log)."""
    if base.state not in (PRESENT, ABSENT):
        return RevertCheck(False, "not_restorable")
    if force:
        return RevertCheck(True)
    if last_written is None:
        return RevertCheck(False, "unknown_last_write")
    if now is None or now != last_written.encode("utf-8"):
        return RevertCheck(False, "changed_outside")
    return RevertCheck(True)


def changes_text(result: dict[str, Any]) -> str:
    """`/diff`: the changes as a chat client shows them (a header line, then the diff)."""
    files = result["files"]
    if not files:
        return "No changes: the session's files are as they were."
    parts = []
    for f in files:
        how = "" if f["source"] == "snapshot" else " — from git, not revertible"
        parts.append(f"{f['path']} ({f['status']}){how}")
        if f.get("binary"):
            parts.append("(binary file)")
        elif f.get("diff"):  # fenced: clients render agent text as markdown
            fence = "````" if "```" in f["diff"] else "```"
            parts.append(f"{fence}diff\n{f['diff'].rstrip(chr(10))}\n{fence}")
    if result.get("omitted"):
        parts.append(f"… and {result['omitted']} more file(s)")
    return "\n".join(parts)


# ------------------------------------------------------------------------------ reading


async def _turn_order(actor: ChangesHost) -> dict[str, int]:
    store = actor.services.store
    assert store is not None
    await actor.journal.flushed()
    marks = await rows.marks(store.engine, actor.id, EventKind.TURN_STARTED.value, 0)
    return {m.turn_id: m.seq for m in marks}


async def _since_seq(order: dict[str, int], since: str | None) -> int | None:
    if since is None:
        return None
    if since not in order:
        raise invalid(f"unknown turn {since!r}: not a turn of this session", turnId=since)
    return order[since]


def _read_now(cwd: Path, rel: str) -> bytes | None:
    try:
        return read_prior(cwd, cwd / rel)
    except (ToolError, OSError):
        return None


def _snapshot_changes(cwd: Path, found: dict[str, FileSnapshot]) -> list[dict[str, Any]]:
    entries = (file_change(path, found[path], _read_now(cwd, path)) for path in sorted(found))
    return [e for e in entries if e is not None]


async def _current(cwd: Path, rel: str) -> bytes | None:
    try:
        return await asyncio.to_thread(read_prior, cwd, cwd / rel)
    except (ToolError, OSError):
        return None


async def session_changes(actor: ChangesHost, since: str | None) -> dict[str, Any]:
    store = actor.services.store
    if store is None:
        raise invalid("changes are not available: this server keeps no snapshots")
    order = await _turn_order(actor)
    since_seq = await _since_seq(order, since)
    found = bases(await rows.session_snapshots(store.engine, actor.id), order, since_seq)
    files = await asyncio.to_thread(_snapshot_changes, actor.cwd, found)  # diffs: off the event loop
    git = await git_changes(actor.cwd, set(found)) if since is None else None
    if git is not None:
        files.extend(git)
    out: dict[str, Any] = {"sessionId": actor.id, "files": files[:MAX_FILES], "git": git is not None}
    if since is not None:
        out["since"] = since
    if len(files) > MAX_FILES:
        out["omitted"] = len(files) - MAX_FILES
    return out


async def revert_file(actor: ChangesHost, path: str, turn_id: str | None, force: bool) -> dict[str, Any]:
    """One file back to its state before the session (or before `turn_id`)."""
    store = actor.services.store
    if store is None:
        raise invalid("revert is not available: this server keeps no snapshots")
    try:
        rel = safe_relative(
            Path(path).relative_to(actor.cwd).as_posix() if Path(path).is_absolute() else path
        )
    except ValueError:
        raise invalid(f"{path!r} is not a path inside the session's workspace", path=path) from None
    order = await _turn_order(actor)
    since_seq = await _since_seq(order, turn_id)
    base = bases(await rows.session_snapshots(store.engine, actor.id), order, since_seq).get(rel)
    if base is None:
        why = f" since turn {turn_id}" if turn_id else ""
        raise invalid(
            f"{rel}: the session's file tools did not change it{why}", path=rel, reason="not_changed"
        )
    now = await _current(actor.cwd, rel)
    updates = await store.latest_events(actor.id, [EventKind.TOOL_CALL_UPDATE.value], limit=WRITE_EVENTS_READ)
    written = last_writes([u.payload for u in updates], actor.cwd).get(rel)
    check = may_revert(base, now, written, force)
    if not check.ok:
        messages = {
            "not_restorable": "its snapshot was over the size cap",
            "changed_outside": "it changed outside the session since the session last wrote it",
            "unknown_last_write": "the session's last write to it is not known",
        }
        hint = "" if check.reason == "not_restorable" else " (force: true reverts anyway)"
        raise invalid(f"cannot revert {rel}: {messages[check.reason]}{hint}", path=rel, reason=check.reason)
    outcome = await asyncio.to_thread(restore_snapshot, actor.cwd, base)
    if outcome == "notRestored":
        raise invalid(f"cannot revert {rel}: the file could not be written", path=rel, reason="write_failed")
    reverted = FileReverted(rel, outcome, base.turn_id)
    actor.journal.emit(reverted)  # every client's changes view reads again
    result = reverted.payload()
    await actor.journal.flushed()
    return result


# ---------------------------------------------------------------------------------- git


async def _git(cwd: Path, *args: str) -> bytes | None:
    """Output of one git command in `cwd`; None when git is missing, fails or is slow."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *_GIT,
            *args,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError:
        return None
    try:
        assert proc.stdout is not None
        out = await asyncio.wait_for(proc.stdout.read(GIT_MAX_OUTPUT), GIT_TIMEOUT_S)
        await asyncio.wait_for(proc.wait(), GIT_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return None
    return out if proc.returncode == 0 else None


async def git_changes(cwd: Path, skip: set[str]) -> list[dict[str, Any]] | None:
    """Files changed against HEAD (and untracked ones) that no snapshot covers; None when
    the workspace is not in a git repository (or has no commit yet)."""
    if await _git(cwd, "rev-parse", "--verify", "-q", "HEAD") is None:
        return None
    tracked = await _git(cwd, "diff", "HEAD", "--relative", "--name-status", "-z", "--no-renames")
    untracked = await _git(cwd, "ls-files", "--others", "--exclude-standard", "-z")
    if tracked is None or untracked is None:
        return None
    parts = tracked.decode("utf-8", "replace").split("\0")
    statuses = {parts[i + 1]: parts[i] for i in range(0, len(parts) - 1, 2)}
    new_files = {p for p in untracked.decode("utf-8", "replace").split("\0") if p}
    statuses.update({p: "A" for p in new_files})
    found: list[dict[str, Any]] = []
    for path in sorted(statuses):
        if path in skip or len(found) >= MAX_FILES:
            continue
        status = {"A": "added", "D": "deleted"}.get(statuses[path][:1], "modified")
        entry: dict[str, Any] = {"path": path, "status": status, "source": "git", "revertible": False}
        if path in new_files:
            text = _text(await _current(cwd, path))
            if text is None:
                entry["binary"] = True
            else:
                await asyncio.to_thread(_with_diff, entry, path, "", text, True, False)
        else:
            diff = await _git(cwd, "diff", "HEAD", "--relative", "--no-ext-diff", "--no-textconv", "--", path)
            entry["diff"] = (diff or b"").decode("utf-8", "replace")[:MAX_DIFF_CHARS]
        found.append(entry)
    return found
