"""How grep matches lines: ripgrep when it is installed, else the `regex` module.

Both engines take files already read and checked by grep (regular, single-link, small,
text) as lists of lines, and yield the matching lines in order. Neither can stall the
server:

- `RgEngine` pipes the lines to `rg` on stdin (rg never opens a path itself, so it
  cannot be redirected by a symlink swapped in after grep's checks). rg's engine is
  linear-time; the process is killed on cancellation or at the deadline. Used only for
  patterns rg accepts: Python-only syntax (look-arounds, backreferences) falls back.
- `PythonEngine` matches with the `regex` module, which releases the GIL while matching
  and takes a timeout: a line that needs more than `line_budget` is refused as
  catastrophic backtracking.

`AGENTD_GREP_ENGINE=python` forces the `regex` engine.
"""

from __future__ import annotations

import bisect
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

import regex  # no stubs published; pyproject tells mypy to ignore it

from server.tools.base import ToolError

RG_BATCH_BYTES = 8 * 1024 * 1024  # text per rg process
_POLL = 0.2  # seconds between checks for cancellation while rg runs


class SearchStopped(Exception):
    """The search ran out of time (`deadline`) or its caller went away."""

    def __init__(self, deadline: bool) -> None:
        super().__init__("deadline" if deadline else "stopped")
        self.deadline = deadline


@dataclass
class FileLines:
    shown: str
    lines: list[str]  # without terminators; a final "" after a trailing newline included


class Engine(Protocol):
    def matches(self, files: Iterable[FileLines]) -> Iterator[tuple[FileLines, int]]:
        """(file, 0-based line index) of every matching line, in file and line order."""
        ...


def find_rg() -> str | None:
    if os.environ.get("AGENTD_GREP_ENGINE", "").lower() == "python":
        return None
    return shutil.which("rg")


def _time_left(deadline_at: float, stop: threading.Event) -> float:
    remaining = deadline_at - time.monotonic()
    if stop.is_set() or remaining <= 0:
        raise SearchStopped(deadline=not stop.is_set())
    return remaining


class PythonEngine:
    def __init__(
        self, compiled: regex.Pattern[str], deadline_at: float, stop: threading.Event, line_budget: float
    ) -> None:
        self.compiled = compiled
        self.deadline_at = deadline_at
        self.stop = stop
        self.line_budget = line_budget

    def matches(self, files: Iterable[FileLines]) -> Iterator[tuple[FileLines, int]]:
        for f in files:
            for i, line in enumerate(f.lines):
                budget = min(_time_left(self.deadline_at, self.stop), self.line_budget)
                try:
                    # concurrent=True releases the GIL while matching: the event loop keeps running.
                    found = self.compiled.search(line, timeout=budget, concurrent=True)
                except TimeoutError:
                    if budget < self.line_budget:  # the whole search ran out of time
                        raise SearchStopped(deadline=True) from None
                    raise ToolError(
                        f"the pattern /{self.compiled.pattern}/ took over {self.line_budget:g} s on one "
                        f"line ({f.shown}:{i + 1}), so the search was stopped: it backtracks "
                        "catastrophically. Avoid nested or overlapping quantifiers such as (a*)* or (a|a)*"
                    ) from None
                if found is not None:
                    yield f, i


class RgEngine:
    def __init__(
        self, rg: str, pattern: str, ignore_case: bool, limit: int, deadline_at: float, stop: threading.Event
    ) -> None:
        self.deadline_at = deadline_at
        self.stop = stop
        self.argv = [
            rg, "--no-config", "--text", "--line-number", "--no-filename", "--color", "never",
            "--max-columns", "1",  # only line numbers are needed: long lines print as a short note
            "--max-count", str(limit + 1),
            *(["--ignore-case"] if ignore_case else []),
            "--regexp", pattern, "-",
        ]  # fmt: skip

    @staticmethod
    def accepts(rg: str, pattern: str, ignore_case: bool) -> bool:
        """Whether rg compiles `pattern` (exit 1: no match in empty input; 2: an error)."""
        argv = [rg, "--no-config", *(["--ignore-case"] if ignore_case else []), "--regexp", pattern, "-"]
        try:
            done = subprocess.run(argv, input=b"", capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode in (0, 1)

    def matches(self, files: Iterable[FileLines]) -> Iterator[tuple[FileLines, int]]:
        batch: list[FileLines] = []
        size = 0
        for f in files:
            batch.append(f)
            size += sum(len(line) + 1 for line in f.lines)
            if size >= RG_BATCH_BYTES:
                yield from self._run(batch)
                batch, size = [], 0
        if batch:
            yield from self._run(batch)

    def _run(self, batch: list[FileLines]) -> Iterator[tuple[FileLines, int]]:
        starts: list[int] = []  # 1-based stream line number of each file's first line
        n = 1
        for f in batch:
            starts.append(n)
            n += len(f.lines)
        data = "".join("\n".join(f.lines) + "\n" for f in batch).encode("utf-8", errors="replace")
        proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = self._communicate(proc, data)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if proc.returncode not in (0, 1):
            raise ToolError(f"rg failed: {err.decode(errors='replace').strip()[:500]}")
        for raw in out.splitlines():
            number, sep, _ = raw.partition(b":")
            if not sep or not number.isdigit():
                continue
            k = bisect.bisect_right(starts, int(number)) - 1
            yield batch[k], int(number) - starts[k]

    def _communicate(self, proc: subprocess.Popen[bytes], data: bytes) -> tuple[bytes, bytes]:
        pending: bytes | None = data
        while True:
            wait = min(_time_left(self.deadline_at, self.stop), _POLL)
            try:
                return proc.communicate(pending, timeout=wait)
            except subprocess.TimeoutExpired:
                pending = None  # the rest of the input is still being sent
