"""Pure text shaping for the file tools: read_file's numbered lines within its caps, and
edit_file's replace-exactly-once with a hint that names the likely cause of a miss."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple, TextIO, TypeVar

from agentd.tools.errors import ToolError

READ_MAX_LINES = 2000
READ_MAX_BYTES = 256 * 1024
READ_MAX_LINE_CHARS = 2000  # minified files: one "line" can be megabytes
_SKIP_CHUNK = 64 * 1024  # characters read at a time while skipping the rest of a long line

_L = TypeVar("_L")

# read_file's `     1\t` prefix pasted back into edit_file's old_string is a common mistake.
_LINE_NUMBER_PREFIX = re.compile(r"^\s*\d+\t", re.MULTILINE)


def until_stopped(lines: Iterable[_L], stop: threading.Event, disp: str) -> Iterator[_L]:
    """Lines until the call is cancelled or out of time: skipping to a far offset in a
    huge file must not keep a worker busy after the caller has gone."""
    for n, line in enumerate(lines):
        if n % 4096 == 0 and stop.is_set():
            raise ToolError(f"reading {disp} was stopped")
        yield line


class Cut(NamedTuple):
    """A line whose end was not kept: its first characters (no terminator), and how many more."""

    text: str
    more: int


def bounded_lines(f: TextIO, max_chars: int = READ_MAX_LINE_CHARS) -> Iterator[str | Cut]:
    """`f`'s lines, never holding more than about `max_chars` characters of one: a line longer
    than that (a minified bundle, a sparse file's zeros) comes as a `Cut`, its rest skipped."""
    while True:
        line = f.readline(max_chars + 1)
        if not line:
            return
        if len(line) <= max_chars or line.endswith(("\n", "\r")):
            yield line
            continue
        more = 0
        while True:
            rest = f.readline(_SKIP_CHUNK)
            more += len(rest)
            if not rest or rest.endswith(("\n", "\r")):
                break
        if rest.endswith("\r\n"):
            more -= 2
        elif rest.endswith(("\n", "\r")):
            more -= 1
        yield Cut(line, more)


def render_lines(
    lines: Iterable[str | Cut],
    disp: str,
    offset: int,
    limit: int,
    user_limit: int | None,
    total: Callable[[], int | None] | None = None,
) -> tuple[str, dict[str, Any]]:
    """read_file's output: numbered lines from `offset`, within the line and byte caps,
    with a note saying where to go on (and, given `total`, how many lines there are).
    Shared by disk reads and the client's buffers."""
    out: list[str] = []
    size = 0
    lineno = 0
    stopped: str | None = None  # why output stopped before the end of the file
    for lineno, line in enumerate(lines, 1):  # lineno outlives the loop: the line count
        if lineno < offset:
            continue
        if len(out) >= limit:
            stopped = "limit"
            break
        cut = line.more if isinstance(line, Cut) else 0
        text = line.text if isinstance(line, Cut) else line.rstrip("\r\n")
        if cut or len(text) > READ_MAX_LINE_CHARS:
            extra = len(text) - READ_MAX_LINE_CHARS + cut
            text = f"{text[:READ_MAX_LINE_CHARS]} [... line truncated, {extra} more characters]"
        rendered = f"{lineno:6d}\t{text}"
        cost = len(rendered.encode("utf-8")) + 1
        if size + cost > READ_MAX_BYTES and out:
            stopped = "bytes"
            break
        out.append(rendered)
        size += cost

    if not out:
        if lineno == 0 and offset == 1:
            return "(empty file)", {"lines": 0}
        raise ToolError(f"offset {offset} is past the end of {disp}, which has {lineno} lines")

    first = offset
    last = offset + len(out) - 1
    text = "\n".join(out)
    meta: dict[str, Any] = {"lines": len(out), "truncated": stopped is not None}
    if stopped is not None:
        nxt = last + 1
        count = total() if total is not None else None
        of = "" if count is None else f" of {count}"
        if count is not None:
            meta["total_lines"] = count
        if stopped == "limit" and user_limit is not None and user_limit <= READ_MAX_LINES:
            text += f"\n[showing lines {first}-{last}{of}; the file continues at line {nxt}]"
        else:
            cap = f"{READ_MAX_LINES} lines" if stopped == "limit" else f"{READ_MAX_BYTES // 1024} KiB"
            text += (
                f"\n[output truncated at {cap}: showing lines {first}-{last}{of}; "
                f"call read_file with offset={nxt} to read more]"
            )
    return text, meta


def line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def find_all(text: str, needle: str) -> list[int]:
    """Start offsets of every occurrence, overlapping ones included: "aa" in "aaa" is
    ambiguous (two places), which `str.count` would hide."""
    hits: list[int] = []
    i = text.find(needle)
    while i != -1:
        hits.append(i)
        i = text.find(needle, i + 1)
    return hits


def replace_once(text: str, disp: str, old_string: str, new_string: str) -> tuple[str, int]:
    """`text` with its one occurrence of `old_string` replaced, and that line; a miss or
    an ambiguous match is a ToolError that tells the model how to fix its call."""
    hits = find_all(text, old_string)
    if not hits:
        raise ToolError(f"no match for old_string in {disp}. {no_match_hint(text, old_string)}")
    if len(hits) > 1:
        lines = sorted({line_of(text, i) for i in hits})
        shown = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
        raise ToolError(
            f"old_string matches {len(hits)} times in {disp} (lines {shown}); it must match exactly "
            "once. Add more surrounding context to old_string to pick the right occurrence."
        )
    start = hits[0]
    new_text = text[:start] + new_string + text[start + len(old_string) :]
    return new_text, line_of(text, start)


def no_match_hint(text: str, old_string: str) -> str:
    """Name the likely cause of a miss; the model fixes it faster than a bare "no match"."""
    hints: list[str] = []
    if _LINE_NUMBER_PREFIX.search(old_string):
        hints.append("old_string seems to contain read_file line-number prefixes; remove them.")
    if "\r\n" in text and "\n" in old_string and "\r\n" not in old_string:
        hints.append("The file uses CRLF (\\r\\n) line endings; old_string must use them too.")
    stripped = old_string.strip()
    if stripped and stripped != old_string and stripped in text:
        hints.append("The text occurs with different leading/trailing whitespace; check indentation.")
    hints.append(
        "old_string must match the current file content exactly (whitespace and indentation included); "
        "read the file again with read_file and copy the exact text."
    )
    return " ".join(hints)
