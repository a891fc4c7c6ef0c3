"""Running ripgrep for the search tools: its own ignore handling, output streamed.

rg's stdout is read in chunks and split into records as it arrives, each record bounded (a
minified file's megabyte-long line costs only its first bytes), and the caller stops reading
when it has enough: closing the stream kills rg. So the server's memory does not grow with
rg's output. A watchdog kills rg when the call is cancelled or out of time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

_CHUNK = 64 * 1024
_WATCH_POLL = 0.1  # seconds between the watchdog's checks for cancellation
# UTF-8 continuation bytes: a dropped tail's characters are its bytes without these.
_CONTINUATION = bytes(range(0x80, 0xC0))


class SearchStopped(Exception):
    """The search ran out of time (`deadline`) or its caller went away."""

    def __init__(self, deadline: bool) -> None:
        super().__init__("deadline" if deadline else "stopped")
        self.deadline = deadline


def find_rg() -> str | None:
    """ripgrep's path, unless `AGENTD_GREP_ENGINE=python` forces the pure-Python engines."""
    if os.environ.get("AGENTD_GREP_ENGINE", "").lower() == "python":
        return None
    return shutil.which("rg")


def time_left(deadline_at: float, stop: threading.Event) -> float:
    remaining = deadline_at - time.monotonic()
    if stop.is_set() or remaining <= 0:
        raise SearchStopped(deadline=not stop.is_set())
    return remaining


def walk_args(ignoring: bool) -> list[str]:
    """What rg visits, matching `agentd.tools.search.walk.Walk`: hidden files yes, `.git` and symlinks
    no, git's ignore files (not rg's own `.ignore`/`.rgignore`) unless the caller named an
    ignored path. `--no-require-git`: a `.gitignore` counts outside a git checkout too."""
    args = ["--no-config", "--hidden", "--no-ignore-dot", "--no-require-git", "--glob", "!.git"]
    if not ignoring:
        args.append("--no-ignore")
    return args


class RgStream:
    """One rg process; iterate `records()` and close it (a `with` block) when done."""

    def __init__(self, argv: list[str], cwd: Path, stop: threading.Event, deadline_at: float) -> None:
        time_left(deadline_at, stop)
        self.stop = stop
        self.deadline_at = deadline_at
        self.why: str | None = None  # "deadline" or "stopped" once the watchdog killed rg
        self._done = threading.Event()
        # stderr is dropped: rg's complaints (unreadable files) must not fill a pipe and
        # block it; a failed pattern was refused before rg runs.
        self.proc = subprocess.Popen(
            argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        self._watch = threading.Thread(target=self._watchdog, daemon=True, name="rg-watchdog")
        self._watch.start()

    def _watchdog(self) -> None:
        while not self._done.wait(_WATCH_POLL):
            if self.stop.is_set() or time.monotonic() >= self.deadline_at:
                self.why = "stopped" if self.stop.is_set() else "deadline"
                self._kill()
                return

    def _kill(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass

    def records(self, sep: bytes, max_bytes: int) -> Iterator[tuple[bytes, int]]:
        """Records split on `sep`: each as (its first `max_bytes` bytes, how many characters
        of it were dropped). Raises SearchStopped if the watchdog ended rg."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        head = bytearray()
        dropped = 0
        tail_cr = False  # the dropped part ended with "\r": not a character of the line
        while True:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                break
            pos = 0
            while True:
                end = chunk.find(sep, pos)
                piece = chunk[pos:] if end < 0 else chunk[pos:end]
                room = max_bytes - len(head)
                if room > 0:
                    head += piece[:room]
                    piece = piece[room:]
                if piece:
                    dropped += len(piece.translate(None, _CONTINUATION))
                    tail_cr = piece.endswith(b"\r")
                if end < 0:
                    break
                yield bytes(head), dropped - (1 if dropped and tail_cr else 0)
                head, dropped, tail_cr = bytearray(), 0, False
                pos = end + len(sep)
        if head or dropped:
            yield bytes(head), dropped - (1 if dropped and tail_cr else 0)
        self.proc.wait()
        if self.why is not None:
            raise SearchStopped(deadline=self.why == "deadline")

    def close(self) -> None:
        self._done.set()
        self._kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc.wait()

    def __enter__(self) -> RgStream:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def list_files(
    rg: str, cwd: Path, extra: list[str], ignoring: bool, stop: threading.Event, deadline_at: float
) -> Iterator[str]:
    """Paths (relative to `cwd`, '/'-separated) of the files rg would search below `cwd`;
    `extra` adds e.g. `--files-with-matches -e pattern` (default: `--files`, all of them)."""
    mode = extra or ["--files"]
    argv = [rg, *walk_args(ignoring), "--null", "--color", "never", *mode, "--", "."]
    with RgStream(argv, cwd, stop, deadline_at) as stream:
        for raw, dropped in stream.records(b"\0", 64 * 1024):
            if dropped:
                continue  # a path longer than any file system allows: not a real one
            path = os.fsdecode(raw)
            yield path[2:] if path.startswith("./") else path
