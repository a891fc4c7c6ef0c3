"""Which replica this process is (R-C1): an id kept in the server's home, so a server
restarted after a crash is the same replica again and takes its sessions back at once."""

from __future__ import annotations

import fcntl
import os
import secrets
import socket
from pathlib import Path
from typing import IO

__all__ = ["default_replica_id", "home_replica_id"]


def default_replica_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def home_replica_id(home: Path) -> tuple[str, IO[str] | None]:
    """The replica id kept in `home` (`replica-id`), and the file holding its lock while
    this process runs. A server restarted after a crash (`kill -9`: the kernel dropped the
    lock) is the same replica again and takes its sessions back at once, instead of
    waiting for their leases to run out; a second live process on the same home gets an
    id of its own (hostname-pid-random), so no two live processes ever share one."""
    try:
        home.mkdir(parents=True, exist_ok=True)
        handle = (home / "replica-id").open("a+")
    except OSError:
        return default_replica_id(), None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return default_replica_id(), None
    handle.seek(0)
    kept = handle.read().strip()
    if not kept:
        kept = default_replica_id()
        handle.write(kept + "\n")
        handle.flush()
    return kept, handle
