"""The workspace walk shared by `glob` and `grep` (R-T5), and their common arguments.

The walk skips `.git`, what git ignores (`agentd.tools.search.ignore`; it never descends into an
ignored directory) and symlinks (as ripgrep does without `--follow`), so a search never
reports or reads anything outside the root. It runs in a worker of the tools' own pool
(`agentd.tools.offload`) with a deadline; a cancelled call tells the worker to stop.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from agentd.tools.base import ToolContext
from agentd.tools.errors import ToolError
from agentd.tools.files import resolve_in_workspace
from agentd.tools.offload import Pool, run_blocking
from agentd.tools.search.ignore import IgnoreRules

MAX_SCANNED_FILES = 100_000  # a walk stops here (huge trees, vendored dependencies)
# A search's time budget: past it, grep returns what it found so far with a note.
SEARCH_DEADLINE = 30.0
_SKIP_NAMES = frozenset({".git"})

_T = TypeVar("_T")


class Walk:
    """Files below `start`, as paths relative to it ('a/b.py'), confined to `root`."""

    def __init__(
        self,
        root: Path,
        start: Path,
        stop: threading.Event,
        prune: Callable[[str], bool] | None = None,
        ignore: IgnoreRules | None = None,
    ) -> None:
        self.root = root
        self.start = start
        self.stop = stop
        self.prune = prune  # False -> skip that directory
        self.ignore = ignore
        # Where `start` sits below `root`, for the ignore rules ("" at the root).
        rel_start = start.relative_to(root).as_posix()
        self._base = "" if rel_start == "." else rel_start + "/"
        self.scanned = 0
        self.capped = False

    def files(self) -> Iterator[tuple[str, os.DirEntry[str]]]:
        stack: list[tuple[str, str]] = [(str(self.start), "")]
        while stack:
            path, rel = stack.pop()
            try:
                it = os.scandir(path)
            except OSError:
                continue  # unreadable or vanished directory: skip it, keep searching
            with it:
                for entry in it:
                    if self.stop.is_set():
                        return
                    if entry.name in _SKIP_NAMES:
                        continue
                    rel_entry = rel + entry.name
                    try:
                        if entry.is_symlink():
                            continue  # never followed: no escapes, no loops (ripgrep's default)
                        is_dir = entry.is_dir(follow_symlinks=False)
                        if not is_dir and not entry.is_file(follow_symlinks=False):
                            continue  # sockets, fifos, devices
                    except OSError:
                        continue
                    if self.ignore is not None and self.ignore.ignored(self._base + rel_entry, is_dir):
                        continue
                    if is_dir:
                        if self.prune is None or self.prune(rel_entry):
                            stack.append((entry.path, rel_entry + "/"))
                        continue
                    self.scanned += 1
                    if self.scanned > MAX_SCANNED_FILES:
                        self.capped = True
                        return
                    yield rel_entry, entry


async def in_thread(fn: Callable[[threading.Event], _T], what: str, deadline: float) -> _T:
    """Run `fn(stop)` on the tool pool; cancelling the call (or the deadline) sets `stop`.
    The backstop deadline is a little longer than the search's own (`deadline`), which ends
    cleanly."""
    return await run_blocking(fn, what=what, deadline=deadline + 5.0, pool=Pool.SEARCH)


def ignore_rules(root: Path, start: Path, explicit: str = "") -> IgnoreRules | None:
    """The rules a search below `start` honours; None when the caller named an ignored path
    (`start` itself, or `explicit`, a literal path prefix such as a glob's `.venv/lib`):
    asking for it by name means searching it."""
    rules = IgnoreRules(root)
    rel = start.relative_to(root).as_posix()
    named = "/".join(p for p in (rel, explicit) if p and p != ".")
    if named and rules.path_ignored(named, is_dir=(root / named).is_dir()):
        return None
    return rules


def search_dir(args: dict[str, Any], ctx: ToolContext) -> Path:
    value = args.get("path")
    if value is None or (isinstance(value, str) and not value.strip()):
        value = "."
    if not isinstance(value, str):
        raise ToolError(f"argument 'path' must be a string, got {type(value).__name__}")
    return resolve_in_workspace(ctx.cwd, value)


def joined(prefix: str, rel: str) -> str:
    return rel if prefix == "." else f"{prefix}/{rel}"


def safe_locations(args: dict[str, Any], ctx: ToolContext) -> list[dict[str, Any]]:
    try:
        return [{"path": str(search_dir(args, ctx))}]
    except ToolError:
        return []


def pattern_arg(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if value is None:
        raise ToolError(f"missing required argument {key!r}")
    if not isinstance(value, str):
        raise ToolError(f"argument {key!r} must be a string, got {type(value).__name__}")
    if not value:
        raise ToolError(f"argument {key!r} must not be empty")
    return value
