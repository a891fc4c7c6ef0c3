"""One process per SQLite database file (R-C1: several replicas need Postgres).

SQLite's own locking keeps two processes from corrupting the file, but two agentd servers
on it would each run their own actor for a session and write the same seqs. `agentd
serve` and a local `agentd acp` therefore hold an exclusive `flock` on `<database>.lock`
beside the file for as long as they run; a second one fails at start-up, naming the first
one's pid — or, for `agentd acp`, relays to the first through the WebSocket address the
lock file names (the holder writes where it serves, if it does). The kernel drops the lock
when the process ends, however it ends (`kill -9` included): nothing stale to clean up.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import IO

from sqlalchemy.engine import make_url


class DatabaseInUse(Exception):
    """Another process serves this SQLite file: its pid, and its WebSocket address when it
    serves one (`ws://…/acp`)."""

    def __init__(self, message: str, pid: str, url: str | None) -> None:
        super().__init__(message)
        self.pid = pid
        self.url = url


def _holder(text: str) -> tuple[str, str | None]:
    """(pid, url) from a lock file: `<pid>` or `<pid> <ws url>` (older servers wrote the pid)."""
    pid, _, url = text.strip().partition(" ")
    return pid or "unknown", url.strip() or None


def lock_path(url: str) -> Path | None:
    """The lock file of a SQLite database file; None for Postgres or in-memory SQLite."""
    try:
        parsed = make_url(url)
    except Exception:  # not a URL: the database check names the mistake
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    db = Path(parsed.database).resolve()
    return db.with_name(db.name + ".lock")


def lock_database(url: str, serving: str | None = None) -> IO[str] | None:
    """Hold the database's lock until the returned file is closed (or the process ends);
    `DatabaseInUse` when another process holds it. `serving`: this process's WebSocket
    address, written for a later `agentd acp` to relay to."""
    path = lock_path(url)
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        pid, held_url = _holder(handle.read())
        handle.close()
        raise DatabaseInUse(
            f"the SQLite database {path.with_suffix('')} is in use by another agentd process (pid {pid}, "
            f"lock {path}); SQLite serves one process — stop that one, or share a Postgres database "
            "(postgresql+asyncpg://…) between several replicas",
            pid,
            held_url,
        ) from None
    with contextlib.suppress(OSError):
        handle.truncate(0)
        handle.write(f"{os.getpid()} {serving}\n" if serving else f"{os.getpid()}\n")
        handle.flush()
    return handle
