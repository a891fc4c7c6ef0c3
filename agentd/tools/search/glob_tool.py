"""The `glob` tool (R-T5): find files by name pattern, newest first.

Glob patterns are matched without regular expressions (`agentd.tools.search.globmatch`): `*` and `?`
stay within one path segment, `[abc]` / `[!abc]` are character classes, `**` as a whole
segment matches any number of directories (zero included), and `{a,b}` alternatives are
expanded. `*` also matches names starting with a dot.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

from agentd.tools.base import Access, ToolContext, ToolKind, ToolResult
from agentd.tools.errors import ToolError
from agentd.tools.files import display_path, resolve_in_workspace
from agentd.tools.search.globmatch import GlobMatcher as _GlobMatcher
from agentd.tools.search.ripgrep import SearchStopped, find_rg, list_files
from agentd.tools.search.walk import (
    MAX_SCANNED_FILES,
    SEARCH_DEADLINE,
    Walk,
    ignore_rules,
    in_thread,
    joined,
    pattern_arg,
    safe_locations,
    search_dir,
)

GLOB_MAX_RESULTS = 500
_WILDCARDS = frozenset("*?[]{}\\")


def literal_prefix(pattern: str) -> str:
    """The leading directories of `pattern` without wildcards: '.venv/lib' for '.venv/lib/**/*.py'."""
    segs = pattern.split("/")[:-1]
    out: list[str] = []
    for seg in segs:
        if seg in ("", "."):
            continue
        if seg == ".." or any(ch in _WILDCARDS for ch in seg):
            break
        out.append(seg)
    return "/".join(out)


class Glob:
    name: ClassVar[str] = "glob"
    kind: ClassVar[ToolKind] = ToolKind.SEARCH
    access: ClassVar[Access] = Access.READ
    description: ClassVar[str] = (
        "Find files by glob pattern (e.g. '**/*.py'); newest first, paths relative to the workspace."
    )
    guidance: ClassVar[str] = (
        "Use glob to find files by name: the pattern is matched against paths relative to path (default "
        "the workspace root), `*` stays within one directory, `**` spans any number of directories and "
        "`{a,b}` gives alternatives, so `*.py` only looks at the top level while `**/*.py` searches "
        "everything below. Results are files only, sorted by modification time with the most recently "
        f"changed first, and capped at {GLOB_MAX_RESULTS} with a note of how many more matched; the paths "
        "are relative to the workspace root and can be passed straight to read_file. Like ripgrep it skips "
        "what git ignores (.gitignore files, .git/info/exclude, the global excludes file), `.git` and "
        "symlinks; to look inside an ignored directory, name it: as path, or as the pattern's literal "
        "start (`.venv/**/*.py`). To search file contents use grep."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "minLength": 1,
                "description": "Glob pattern relative to path, e.g. 'src/**/*.ts' or '**/test_*.py'.",
            },
            "path": {
                "type": "string",
                "description": "Directory to search in, relative to the workspace root (default '.').",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def title(self, args: dict[str, Any]) -> str:
        pattern = args.get("pattern", "?")
        path = args.get("path")
        if isinstance(path, str) and path not in ("", "."):
            return f"Find {pattern} in {path}"
        return f"Find {pattern}"

    def locations(self, args: dict[str, Any], ctx: ToolContext) -> list[dict[str, Any]]:
        return safe_locations(args, ctx)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        pattern = pattern_arg(args, "pattern")
        matcher = _GlobMatcher(pattern)
        start = search_dir(args, ctx)
        root = resolve_in_workspace(ctx.cwd, ".")  # the real root, symlinks resolved
        disp = display_path(root, start)

        def work(stop: threading.Event) -> tuple[list[tuple[float, str]], bool]:
            if not start.exists():
                raise ToolError(f"directory not found: {disp}")
            if not start.is_dir():
                raise ToolError(f"{disp} is a file, not a directory; pass a directory as path")
            # A pattern that starts with literal directories ('.venv/lib/**') is walked from
            # there: fewer files, and naming an ignored directory searches it.
            base = literal_prefix(pattern)
            walk_start = start / base if base else start
            if not base or walk_start.is_symlink() or not walk_start.is_dir():
                base, walk_start = "", start
            ignore = ignore_rules(root, start, base)
            found: list[tuple[float, str]] = []
            capped = False
            deadline_at = time.monotonic() + SEARCH_DEADLINE
            rg = find_rg()
            listed: Iterator[str]
            walk: Walk | None = None
            if rg is not None:
                listed = list_files(rg, walk_start, [], ignore is not None, stop, deadline_at)
            else:

                def prune(d: str) -> bool:
                    return matcher.may_contain(f"{base}/{d}" if base else d)

                walk = Walk(root, walk_start, stop, prune=prune, ignore=ignore)
                listed = (rel for rel, _ in walk.files())
            for n, rel in enumerate(listed, 1):
                if n > MAX_SCANNED_FILES:
                    capped = True
                    break
                rel_start = f"{base}/{rel}" if base else rel
                if matcher.matches(rel_start):
                    try:
                        st = os.lstat(walk_start / rel)
                    except OSError:
                        continue
                    if stat.S_ISREG(st.st_mode):
                        found.append((st.st_mtime, joined(disp, rel_start)))
            return found, capped or (walk is not None and walk.capped)

        try:
            found, capped = await in_thread(work, f"glob {pattern!r}", SEARCH_DEADLINE)
        except SearchStopped:
            raise ToolError(
                f"glob {pattern!r} took over {SEARCH_DEADLINE:g} s; narrow the pattern or path"
            ) from None
        found.sort(key=lambda item: (-item[0], item[1]))
        shown = [p for _, p in found[:GLOB_MAX_RESULTS]]
        if shown:
            output = "\n".join(shown)
        else:
            output = f"No files match {pattern!r} in {disp}"
            if not matcher.has_slash_or_globstar:
                output += f" (only its top level was searched; use '**/{pattern}' to search below it)"
        if len(found) > len(shown):
            output += (
                f"\n[... {len(found) - len(shown)} more matches not shown (showing the "
                f"{GLOB_MAX_RESULTS} most recently modified); narrow the pattern or path]"
            )
        if capped:
            output += (
                f"\n[search stopped after scanning {MAX_SCANNED_FILES} files; results may be "
                "incomplete, narrow the pattern or path]"
            )
        return ToolResult(
            output=output,
            locations=[{"path": str(start)}],
            raw_output={
                "matches": len(found),
                "truncated": len(found) > len(shown) or capped,
            },
        )
