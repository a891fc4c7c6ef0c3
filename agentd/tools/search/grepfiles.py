"""Which files grep searches, in which order, and reading one safely.

Below a directory the candidates come from rg's own walk when rg is the engine (its
ignore handling, and `--files-with-matches` so only files that match are listed), else from
the pathspec walk (`agentd.tools.search.walk`); both honour the same ignore rules and skip `.git`
and symlinks. Then grep's glob filter applies, hard-linked files are dropped (one may be a
file from outside the workspace), and the rest are sorted newest first (path order on a
tie), like glob's results: recently changed code is usually what the model is after.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path

from agentd.tools.files import safefs
from agentd.tools.search.globmatch import GlobMatcher
from agentd.tools.search.ripgrep import list_files, time_left
from agentd.tools.search.walk import MAX_SCANNED_FILES, Walk, ignore_rules, joined

BINARY_SNIFF_BYTES = 8192


@dataclass
class Targets:
    cwd: Path  # the files' paths are relative to it
    files: list[tuple[str, str]] = field(default_factory=list)  # (shown path, path under cwd)
    scan_capped: bool = False
    linked: int = 0  # hard-linked files skipped


@dataclass
class Skipped:
    binary: int = 0
    large: int = 0
    linked: int = 0


def select_files(
    root: Path,
    start: Path,
    disp: str,
    file_filter: GlobMatcher | None,
    stop: threading.Event,
    deadline_at: float,
    rg_listing: tuple[str, list[str]] | None,
) -> Targets:
    """The files to search below directory `start`. `rg_listing`: (rg, its extra arguments)
    to list them with rg, None for the pathspec walk."""
    targets = Targets(cwd=start)
    ignore = ignore_rules(root, start)
    found: list[tuple[float, str]] = []
    if rg_listing is not None:
        rg, extra = rg_listing
        listed = list_files(rg, start, extra, ignore is not None, stop, deadline_at)
        candidates = ((rel, rel.rpartition("/")[2]) for rel in listed)
    else:
        walk = Walk(root, start, stop, ignore=ignore)
        candidates = ((rel, entry.name) for rel, entry in walk.files())
    scanned = 0
    for rel, name in candidates:
        scanned += 1
        if scanned > MAX_SCANNED_FILES:
            targets.scan_capped = True
            break
        if file_filter is not None:
            if not file_filter.matches(rel if file_filter.has_slash_or_globstar else name):
                continue
        try:
            st = os.lstat(start / rel)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue  # a symlink or special file swapped in: never read through it
        if st.st_nlink > 1:
            targets.linked += 1
            continue
        found.append((st.st_mtime, rel))
    if rg_listing is None and walk.capped:
        targets.scan_capped = True
    time_left(deadline_at, stop)
    found.sort(key=lambda item: (-item[0], item[1]))
    targets.files = [(joined(disp, rel), rel) for _, rel in found]
    return targets


def read_checked(fs_path: str, skipped: Skipped, max_bytes: int) -> bytes | None:
    """The file's bytes if grep should search it; skipped kinds are counted in `skipped`."""
    try:
        # O_NONBLOCK: a FIFO swapped in after the walk must not block this worker.
        fd = os.open(fs_path, safefs.READ_FLAGS)
    except OSError:
        return None  # vanished, unreadable or now a symlink: not worth failing the search
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_nlink > 1:
            skipped.linked += 1
            return None
        if st.st_size > max_bytes:
            skipped.large += 1
            return None
        try:
            data = f.read(max_bytes + 1)
        except OSError:
            return None
    if len(data) > max_bytes:
        skipped.large += 1
        return None
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        skipped.binary += 1
        return None
    return data
