"""How grep matches lines: ripgrep when it is installed, else the `regex` module.

Both engines get the files to search in order (newest first, already filtered for ignore
rules, globs, links, size and binary content) and yield `Match`es in that order, lazily:
grep stops pulling at its cap, so neither the server's memory nor the work done grows with
the number of matches.

- `RgEngine` runs `rg` over the files (a few hundred per process, one thread so the order
  holds), streaming its output (`agentd.tools.search.ripgrep`); rg's engine is linear-time. Used only
  for patterns rg accepts: Python-only syntax (look-arounds, backreferences) falls back.
- `PythonEngine` matches with the `regex` module, which releases the GIL while matching and
  takes a timeout: a line that needs more than `line_budget` is refused as catastrophic
  backtracking.

`AGENTD_GREP_ENGINE=python` forces the `regex` engine and the pathspec walk.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only annotations here; search.py imports `regex` when it compiles
    import regex

from agentd.tools.errors import ToolError
from agentd.tools.search.ripgrep import RgStream, SearchStopped, find_rg, time_left

__all__ = ["Match", "PythonEngine", "RgEngine", "SearchStopped", "find_rg", "text_lines"]

RG_FILES_PER_RUN = 256  # explicit paths per rg process (argv stays far below its limit)


@dataclass(frozen=True)
class Match:
    shown: str  # the file as shown to the model
    line: int  # 1-based
    text: str  # the line without its terminator, at most `max_chars` characters
    more: int  # characters cut from the end of a long line


def text_lines(text: str) -> Iterator[str]:
    """`text`'s lines without terminators ("\\r\\n" too), one at a time (no list of a
    million strings); like rg, no empty line after a final newline."""
    pos, n = 0, len(text)
    while pos < n:
        end = text.find("\n", pos)
        if end < 0:
            end = n
        yield text[pos:end].removesuffix("\r")
        pos = end + 1


class PythonEngine:
    def __init__(
        self,
        compiled: regex.Pattern[str],
        deadline_at: float,
        stop: threading.Event,
        line_budget: float,
        max_chars: int,
    ) -> None:
        self.compiled = compiled
        self.deadline_at = deadline_at
        self.stop = stop
        self.line_budget = line_budget
        self.max_chars = max_chars

    def matches(self, files: Iterable[tuple[str, str]]) -> Generator[Match, None, None]:
        """`files`: (shown path, text) pairs, read lazily."""
        for shown, text in files:
            for i, line in enumerate(text_lines(text), 1):
                budget = min(time_left(self.deadline_at, self.stop), self.line_budget)
                try:
                    # concurrent=True releases the GIL while matching: the event loop keeps running.
                    found = self.compiled.search(line, timeout=budget, concurrent=True)
                except TimeoutError:
                    if budget < self.line_budget:  # the whole search ran out of time
                        raise SearchStopped(deadline=True) from None
                    raise ToolError(
                        f"the pattern /{self.compiled.pattern}/ took over {self.line_budget:g} s on one "
                        f"line ({shown}:{i}), so the search was stopped: it backtracks "
                        "catastrophically. Avoid nested or overlapping quantifiers such as (a*)* or (a|a)*"
                    ) from None
                if found is not None:
                    cut = max(0, len(line) - self.max_chars)
                    yield Match(shown, i, line[: self.max_chars], cut)


class RgEngine:
    def __init__(
        self,
        rg: str,
        pattern: str,
        ignore_case: bool,
        deadline_at: float,
        stop: threading.Event,
        max_chars: int,
    ) -> None:
        self.rg = rg
        self.deadline_at = deadline_at
        self.stop = stop
        self.max_chars = max_chars
        self.pattern_args = [*(["--ignore-case"] if ignore_case else []), "--regexp", pattern]

    @staticmethod
    def accepts(rg: str, pattern: str, ignore_case: bool) -> bool:
        """Whether rg compiles `pattern` (exit 1: no match in empty input; 2: an error)."""
        argv = [rg, "--no-config", *(["--ignore-case"] if ignore_case else []), "--regexp", pattern, "-"]
        try:
            done = subprocess.run(argv, input=b"", capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode in (0, 1)

    def matches(self, cwd: Path, files: Iterable[tuple[str, str]]) -> Generator[Match, None, None]:
        """`files`: (shown path, path relative to `cwd`) pairs, searched in that order."""
        batch: list[tuple[str, str]] = []
        for item in files:
            batch.append(item)
            if len(batch) >= RG_FILES_PER_RUN:
                yield from self._run(cwd, batch)
                batch = []
        if batch:
            yield from self._run(cwd, batch)

    def _run(self, cwd: Path, batch: list[tuple[str, str]]) -> Generator[Match, None, None]:
        shown_of = {os.fsencode(rel): shown for shown, rel in batch}
        argv = [
            self.rg, "--no-config", "--text", "--crlf", "--encoding", "none", "--line-number",
            "--with-filename", "--null",
            "--color", "never", "--threads", "1",  # one thread: files come out in the given order
            *self.pattern_args, "--", *(rel for _, rel in batch),
        ]  # fmt: skip
        # A record is "path\0number:line"; the line's first max_chars*4 bytes are plenty.
        max_bytes = 4096 + 4 * self.max_chars
        with RgStream(argv, cwd, self.stop, self.deadline_at) as stream:
            for raw, dropped in stream.records(b"\n", max_bytes):
                path, sep, rest = raw.partition(b"\0")
                number, sep2, body = rest.partition(b":")
                shown = shown_of.get(path)
                if not sep or not sep2 or not number.isdigit() or shown is None:
                    continue
                line = body.removesuffix(b"\r").decode("utf-8", errors="replace")
                cut = max(0, len(line) - self.max_chars) + dropped
                yield Match(shown, int(number), line[: self.max_chars], cut)
