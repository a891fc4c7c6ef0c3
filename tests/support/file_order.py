"""The order in which test files reach the xdist workers: longest first.

Under `--dist loadfile` a file runs whole on one worker, and the scheduler hands out files
in collection order (`--no-loadscope-reorder`; its own reorder puts the files with the most
tests first, which leaves the one-test files of a minute each — replicas, Chromium, npm
clients — for the end, where a single one holds a worker while the other idles). Ordering
the files by their measured time (longest processing time first) lets both workers end
together. Within a file the order is untouched (a module's tests share state and order).

The times are `file_durations.txt` beside this module: one `<seconds>\t<file>` line per
file, from a full run's `--durations=0` report (regenerate with
`python -m tests.support.file_order REPORT > tests/support/file_durations.txt`). A stale
or missing entry only makes the order worse, never a test wrong: a file it does not list
counts `UNLISTED_S` per test."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, TypeVar

DURATIONS = Path(__file__).with_name("file_durations.txt")
UNLISTED_S = 0.5  # per test of a file the table does not know (a new file): about the suite's mean

_LINE = re.compile(r"^\s*([0-9.]+)s\s+(?:call|setup|teardown)\s+(\S+?)::")


class _Item(Protocol):
    @property
    def nodeid(self) -> str: ...


T = TypeVar("T", bound=_Item)


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def load(path: Path = DURATIONS) -> dict[str, float]:
    """File → seconds, from the table (empty if there is none)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    table = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            seconds, name = line.split("\t")
            table[name] = float(seconds)
    return table


def longest_first(items: Sequence[T], seconds: dict[str, float]) -> list[T]:
    """`items` grouped by file, the files by their time descending (ties: collection
    order), each file's items in their own order."""
    files: dict[str, list[T]] = {}
    for item in items:
        files.setdefault(file_of(item.nodeid), []).append(item)
    rank = {name: i for i, name in enumerate(files)}
    order = sorted(files, key=lambda f: (-seconds.get(f, UNLISTED_S * len(files[f])), rank[f]))
    return [item for name in order for item in files[name]]


def from_report(text: str) -> dict[str, float]:
    """File → the sum of its setup, call and teardown times in a `--durations=0` report."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            totals[m.group(2)] = totals.get(m.group(2), 0.0) + float(m.group(1))
    return totals


def main(argv: list[str]) -> None:
    totals = from_report(Path(argv[1]).read_text())
    print("# seconds<TAB>file: a full run's per-file time (tests/support/file_order.py)")
    for name, secs in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{secs:.1f}\t{name}")


if __name__ == "__main__":
    main(sys.argv)
