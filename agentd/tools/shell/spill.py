"""The full output of a long shell command, in a log file in the workspace (issue 13).

The model sees a command's output head and tail (`agentd.tools.shell.output`); what was cut
from the middle goes to `.agentd/output/bash-<time>-<id>.log` in the workspace, so the
model can read or grep it with the file tools. Output is held in memory only up to a
small threshold (most commands never need a file), then streamed to the file, which is
capped; only the newest `KEEP` logs are kept. The directory is reached without following
symlinks (`agentd.tools.files.safefs`): a command cannot redirect the server's writes.

Writes are plain blocking `os.write` calls on the event loop: they go to the page cache,
and a command is paced by how fast they are read anyway (the pipe fills, it waits).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
import time
from pathlib import Path

from agentd.tools.errors import ToolError
from agentd.tools.files import parent_dir

log = logging.getLogger(__name__)

SPILL_DIR = Path(".agentd") / "output"
SPILL_CAP = 64 * 1024 * 1024  # bytes of one log
KEEP = 20  # newest logs kept in a workspace
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def spill_name() -> str:
    return f"bash-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}.log"


def prune(dir_fd: int, keep: int) -> None:
    """Delete the oldest `bash-*.log` files in the directory until at most `keep` remain."""
    logs: list[tuple[float, str]] = []
    for name in os.listdir(dir_fd):
        if not (name.startswith("bash-") and name.endswith(".log")):
            continue
        with contextlib.suppress(OSError):
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISREG(st.st_mode):
                logs.append((st.st_mtime, name))
    logs.sort()
    for _, name in logs[: max(0, len(logs) - keep)]:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)


class Spill:
    """One command's output: in memory up to `threshold` bytes, then in a log file."""

    def __init__(self, workspace: Path, *, threshold: int, cap: int = SPILL_CAP, keep: int = KEEP) -> None:
        self._workspace = Path(workspace)
        self._threshold = threshold
        self._cap = cap
        self._keep = keep
        self._buffer = bytearray()
        self._fd: int | None = None
        self.path: Path | None = None  # relative to the workspace, once a file exists
        self.saved = 0  # bytes in the file
        self.capped = False  # the file stopped at `cap`
        self.error: str | None = None  # the file could not be written; output is still shown

    def write(self, data: bytes) -> None:
        if self.error is not None or self.capped:
            return
        if self._fd is None:
            self._buffer += data
            if len(self._buffer) > self._threshold:
                self._open_and_flush()
            return
        self._append(data)

    def close(self, *, needed: bool) -> None:
        """`needed`: the model was shown a cut version, so the file must exist."""
        if needed and self._fd is None and self.error is None:
            self._open_and_flush()
        self._buffer = bytearray()
        if self._fd is not None:
            if self.capped:
                self._raw(f"\n[... log cut at {self._cap} bytes; later output was not saved ...]\n".encode())
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _open_and_flush(self) -> None:
        rel = SPILL_DIR / spill_name()
        try:
            with parent_dir(self._workspace, self._workspace.resolve() / rel, str(rel), create=True) as (
                dir_fd,
                name,
            ):
                prune(dir_fd, self._keep - 1)
                with contextlib.suppress(FileExistsError):
                    # Logs are not part of the project: keep them out of `git status`.
                    ignore = os.open(".gitignore", _FLAGS, 0o644, dir_fd=dir_fd)
                    os.write(ignore, b"*\n")
                    os.close(ignore)
                self._fd = os.open(name, _FLAGS, 0o644, dir_fd=dir_fd)
        except (OSError, ToolError) as exc:
            self.error = str(exc)
            log.warning("cannot save a command's full output in %s: %s", self._workspace, exc)
            self._buffer = bytearray()
            return
        self.path = rel
        data, self._buffer = bytes(self._buffer), bytearray()
        self._append(data)

    def _append(self, data: bytes) -> None:
        room = self._cap - self.saved
        if len(data) > room:
            data = data[:room]
            self.capped = True
        self._raw(data)
        self.saved += len(data)

    def _raw(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:  # disk full, RLIMIT_FSIZE, ...: stop saving, keep running
            self.error = str(exc)
            self.capped = True
