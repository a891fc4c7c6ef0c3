"""agentd/session/changes.py's pure decisions: which snapshot is a file's base, what the
changes view lists for it, what the session's last write left, and when a revert may go."""

from __future__ import annotations

from pathlib import Path

from agentd.session.changes import bases, changes_text, file_change, last_writes, may_revert
from agentd.store.snapshots import FileSnapshot

ORDER = {"t1": 10, "t2": 20, "t3": 30}


def snap(turn: str, path: str, content: bytes | None, state: str = "present") -> FileSnapshot:
    return FileSnapshot(turn, path, "absent" if content is None and state == "present" else state, content)


def test_the_base_is_the_earliest_turns_snapshot_from_since_on() -> None:
    found = [
        snap("t2", "a", b"two"),
        snap("t1", "a", b"one"),
        snap("t3", "b", None),
        snap("t3", "a", b"three"),
    ]
    assert bases(found, ORDER, None) == {"a": found[1], "b": found[2]}
    assert bases(found, ORDER, 20) == {"a": found[0], "b": found[2]}
    assert bases(found, ORDER, 30) == {"a": found[3], "b": found[2]}
    assert bases([snap("gone", "c", b"x")], ORDER, 10) == {}  # a turn not among the marks: before any


def test_file_change_statuses_and_diffs() -> None:
    assert file_change("a", snap("t1", "a", b"same\n"), b"same\n") is None
    assert file_change("n", snap("t1", "n", None), None) is None  # created, then removed again
    modified = file_change("a", snap("t1", "a", b"x\ny\n"), b"x\nz\n")
    assert modified is not None and modified["status"] == "modified" and modified["revertible"]
    assert modified["diff"].splitlines()[:2] == ["--- a/a", "+++ b/a"] and "-y" in modified["diff"]
    added = file_change("n", snap("t1", "n", None), b"new")
    assert added is not None and added["status"] == "added"
    assert added["diff"].startswith("--- /dev/null") and "\\ No newline at end of file" in added["diff"]
    deleted = file_change("a", snap("t1", "a", b"gone\n"), None)
    assert deleted is not None and deleted["status"] == "deleted" and "+++ /dev/null" in deleted["diff"]
    binary = file_change("b", snap("t1", "b", b"\xff\x00"), b"\xfe")
    assert binary is not None and binary["binary"] and "diff" not in binary
    big = file_change("g", snap("t1", "g", None, state="too_large"), b"now")
    assert big is not None and not big["revertible"] and big["diff"] == ""


def test_last_writes_come_from_completed_diffs_inside_the_workspace() -> None:
    cwd = Path("/w")
    updates = [
        {"status": "completed", "content": [{"type": "diff", "path": "/w/a.txt", "newText": "one"}]},
        {"status": "failed", "content": [{"type": "diff", "path": "/w/a.txt", "newText": "never"}]},
        {"status": "completed", "content": [{"type": "diff", "path": "/elsewhere/x", "newText": "no"}]},
        {"status": "completed", "content": [{"type": "content", "content": {"text": "hi"}}]},
        {"status": "completed", "content": [{"type": "diff", "path": "/w/a.txt", "newText": "two"}]},
    ]
    assert last_writes(updates, cwd) == {"a.txt": "two"}


def test_a_revert_needs_the_file_as_the_session_left_it_unless_forced() -> None:
    base = snap("t1", "a", b"before")
    assert may_revert(base, b"after", "after", force=False).ok
    assert may_revert(base, b"edited by hand", "after", force=False).reason == "changed_outside"
    assert may_revert(base, None, "after", force=False).reason == "changed_outside"
    assert may_revert(base, b"after", None, force=False).reason == "unknown_last_write"
    assert may_revert(base, b"edited by hand", "after", force=True).ok
    too_large = snap("t1", "a", None, state="too_large")
    assert may_revert(too_large, b"after", "after", force=True).reason == "not_restorable"


def test_changes_text_fences_each_diff() -> None:
    assert changes_text({"files": []}).startswith("No changes")
    shown = changes_text(
        {
            "files": [
                {
                    "path": "a",
                    "status": "modified",
                    "source": "snapshot",
                    "diff": "--- a/a\n+++ b/a\n-x\n+y\n",
                },
                {"path": "g", "status": "added", "source": "git", "diff": "```\n"},
                {"path": "b", "status": "modified", "source": "snapshot", "binary": True},
            ],
            "omitted": 3,
        }
    )
    assert "a (modified)\n```diff\n--- a/a\n+++ b/a\n-x\n+y\n```" in shown
    assert "g (added) — from git, not revertible\n````diff\n```\n````" in shown
    assert "(binary file)" in shown and shown.endswith("… and 3 more file(s)")
