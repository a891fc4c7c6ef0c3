"""The `grep` tool (R-T5): regex over file contents; `glob` lives in `glob_tool.py` and the
confined walk both use in `walk.py`.

grep never matches with `re`, which holds the GIL while it backtracks: patterns are
checked and compiled with the `regex` module (re-compatible syntax, VERSION0; see
`agentd.tools.search.regexguard`), and lines are matched by ripgrep when installed, else by
`regex` with a per-line timeout (`agentd.tools.search.engine`). The files searched skip what git
ignores and come newest first (`agentd.tools.search.grepfiles`); matches are pulled one at a time and
the search stops at the cap, so a million matches cost no more than `max_results`.
"""

from __future__ import annotations

import stat
import threading
import time
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # `regex` loads with the first grep, not at start-up (idle memory)
    import regex

from agentd.tools.base import Access, ToolContext, ToolKind, ToolResult
from agentd.tools.errors import ToolError
from agentd.tools.files import display_path, resolve_in_workspace, safefs
from agentd.tools.search import regexguard
from agentd.tools.search.engine import Match, PythonEngine, RgEngine, SearchStopped, find_rg
from agentd.tools.search.glob_tool import GLOB_MAX_RESULTS, Glob
from agentd.tools.search.globmatch import GlobMatcher as _GlobMatcher
from agentd.tools.search.grepfiles import Skipped, Targets, read_checked, select_files
from agentd.tools.search.walk import (
    MAX_SCANNED_FILES,
    SEARCH_DEADLINE,  # read from this module at call time (tests shorten it here)
    in_thread,
    pattern_arg,
    safe_locations,
    search_dir,
)

__all__ = ["GLOB_MAX_RESULTS", "MAX_SCANNED_FILES", "SEARCH_DEADLINE", "Glob", "Grep"]

GREP_DEFAULT_RESULTS = 200
GREP_MAX_RESULTS = 1000
GREP_MAX_FILE_BYTES = 2 * 1024 * 1024
GREP_MAX_LINE_CHARS = 300
GREP_OUTPUT_CAP = 30_000  # characters of result lines the model sees
# One line may not take longer than this to match: a pattern that does is backtracking
# catastrophically (e.g. `(a*)*b`) and is refused with an explanation.
GREP_LINE_BUDGET = 1.0


class Grep:
    name: ClassVar[str] = "grep"
    kind: ClassVar[ToolKind] = ToolKind.SEARCH
    access: ClassVar[Access] = Access.READ
    description: ClassVar[str] = (
        "Search file contents with a Python regular expression; prints matching lines as path:line: text."
    )
    guidance: ClassVar[str] = (
        "Use grep to find where something is defined or used: pattern is a Python `re` regular expression "
        "matched against each line separately (escape metacharacters such as `(` or `.` to match them "
        "literally), path limits the search to a directory or a single file, glob filters file names "
        "(e.g. `*.py`, or `src/**/*.ts` for paths), and case_insensitive ignores case. Results are lines "
        "`path:line: text` with paths relative to the workspace root, files most recently modified first, "
        f"at most max_results (default {GREP_DEFAULT_RESULTS}) matches and long lines shortened; like "
        "ripgrep it skips what git ignores (.gitignore files, .git/info/exclude, the global excludes file), "
        f"`.git`, symlinks, binary files, files over {GREP_MAX_FILE_BYTES // (1024 * 1024)} MiB and "
        "hard-linked files; to search an ignored directory such as `.venv` or `node_modules`, name it (or a "
        f"path inside it) as path. A search stops after {SEARCH_DEADLINE:g} s with what it found, and a "
        f"pattern that needs over {GREP_LINE_BUDGET:g} s for one line (nested quantifiers such as `(a*)*`) "
        "is refused. Prefer grep over running grep or rg in bash."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "minLength": 1,
                "description": "Python regular expression, matched against each line.",
            },
            "path": {
                "type": "string",
                "description": "File or directory to search, relative to the workspace root (default '.').",
            },
            "glob": {
                "type": "string",
                "description": "Only search files matching this glob: '*.py' (name) or 'src/**/*.ts' (path).",
            },
            "case_insensitive": {"type": "boolean", "description": "Ignore case (default false)."},
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": GREP_MAX_RESULTS,
                "description": f"Maximum number of matching lines (default {GREP_DEFAULT_RESULTS}).",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def title(self, args: dict[str, Any]) -> str:
        pattern = args.get("pattern", "?")
        where = args.get("path")
        suffix = f" in {where}" if isinstance(where, str) and where not in ("", ".") else ""
        glob = args.get("glob")
        if isinstance(glob, str) and glob:
            suffix += f" ({glob})"
        return f"Search for /{pattern}/{suffix}"

    def locations(self, args: dict[str, Any], ctx: ToolContext) -> list[dict[str, Any]]:
        return safe_locations(args, ctx)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        pattern = pattern_arg(args, "pattern")
        ci = args.get("case_insensitive", False)
        if ci is None:
            ci = False
        if not isinstance(ci, bool):
            raise ToolError(f"argument 'case_insensitive' must be true or false, got {ci!r}")
        limit = args.get("max_results")
        if limit is None:
            limit = GREP_DEFAULT_RESULTS
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ToolError(f"argument 'max_results' must be a positive integer, got {limit!r}")
        limit = min(limit, GREP_MAX_RESULTS)
        why = regexguard.refusal(pattern)
        if why is not None:
            raise ToolError(f"invalid regular expression {pattern!r}: {why}")
        import regex  # no stubs published; pyproject tells mypy to ignore it

        try:
            compiled = regex.compile(pattern, regex.VERSION0 | (regex.IGNORECASE if ci else 0))
        except regex.error as exc:
            raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from None
        except (OverflowError, RecursionError) as exc:
            raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from None
        file_filter: _GlobMatcher | None = None
        glob = args.get("glob")
        if glob is not None and not (isinstance(glob, str) and not glob.strip()):
            file_filter = _GlobMatcher(pattern_arg(args, "glob"), "glob")
        start = search_dir(args, ctx)
        root = resolve_in_workspace(ctx.cwd, ".")  # the real root, symlinks resolved
        disp = display_path(root, start)

        result = await in_thread(
            lambda stop: _grep(root, start, disp, compiled, ci, file_filter, limit, stop),
            f"grep /{pattern}/",
            SEARCH_DEADLINE,
        )
        lines, stats = result
        if lines:
            output = "\n".join(lines)
        else:
            output = f"No matches for /{pattern}/ in {disp}"
            if file_filter is not None:
                output += f" (files matching {file_filter.pattern!r})"
        notes: list[str] = []
        if stats["limited"]:
            more = "" if limit >= GREP_MAX_RESULTS else f", or raise max_results (up to {GREP_MAX_RESULTS})"
            notes.append(
                f"[stopped at {limit} matches ({stats['files_with_matches']} file(s), newest first); more "
                f"exist: narrow the pattern, path or glob{more}]"
            )
        if stats["output_capped"]:
            notes.append(
                f"[output stopped at {GREP_OUTPUT_CAP} characters after {stats['matches']} matches; "
                "there are more: narrow the pattern, path or glob]"
            )
        if stats["scan_capped"]:
            notes.append(
                f"[search stopped after scanning {MAX_SCANNED_FILES} files; results may be incomplete]"
            )
        if stats["deadline"]:
            notes.append(
                f"[search stopped after {SEARCH_DEADLINE:g} s; results are incomplete, "
                "narrow the path or glob]"
            )
        skipped = []
        if stats["binary"]:
            skipped.append(f"{stats['binary']} binary")
        if stats["large"]:
            skipped.append(f"{stats['large']} over {GREP_MAX_FILE_BYTES // (1024 * 1024)} MiB")
        if stats["linked"]:
            skipped.append(f"{stats['linked']} hard-linked")
        if skipped and not lines:
            notes.append(f"[skipped {' and '.join(skipped)} file(s)]")
        if notes:
            output += "\n" + "\n".join(notes)
        return ToolResult(
            output=output,
            locations=[{"path": str(start)}],
            raw_output={
                "matches": stats["matches"],
                "filesWithMatches": stats["files_with_matches"],
                "filesSearched": stats["files"],
                "skippedBinary": stats["binary"],
                "skippedLarge": stats["large"],
                "skippedHardLinked": stats["linked"],
                "engine": stats["engine"],
                "truncated": bool(
                    stats["limited"] or stats["output_capped"] or stats["scan_capped"] or stats["deadline"]
                ),
            },
        )


def _grep(
    root: Path,
    start: Path,
    disp: str,
    compiled: regex.Pattern[str],
    ignore_case: bool,
    file_filter: _GlobMatcher | None,
    limit: int,
    stop: threading.Event,
) -> tuple[list[str], dict[str, Any]]:
    stats: dict[str, Any] = {
        "matches": 0,
        "files_with_matches": 0,
        "files": 0,
        "limited": False,
        "output_capped": False,
        "scan_capped": False,
        "deadline": False,
        "engine": "python",
    }
    skipped = Skipped()
    deadline_at = time.monotonic() + SEARCH_DEADLINE
    try:
        start_st = start.stat()
    except FileNotFoundError:
        raise ToolError(f"path not found: {disp}") from None
    except OSError as exc:
        raise ToolError(f"cannot search {disp}: {exc.strerror or exc}") from None
    rg = find_rg()
    use_rg = rg is not None and RgEngine.accepts(rg, compiled.pattern, ignore_case)
    stats["engine"] = "rg" if use_rg else "python"
    out: list[str] = []
    matches: Generator[Match, None, None] | None = None
    try:
        if not stat.S_ISDIR(start_st.st_mode):
            why = safefs.refusal(start_st, disp)  # FIFOs, devices, hard-linked files
            if why is not None:
                raise ToolError(why)
            targets = Targets(cwd=start.parent, files=[(disp, start.name)])
            # A named file is checked here for both engines (rg would search a binary one).
            if use_rg and read_checked(str(start), skipped, GREP_MAX_FILE_BYTES) is None:
                targets.files = []
        else:
            listing: tuple[str, list[str]] | None = None
            if use_rg:
                assert rg is not None
                listing = (rg, [
                    "--files-with-matches", "--max-filesize", str(GREP_MAX_FILE_BYTES), "--crlf",
                    "--encoding", "none",  # no UTF-16 transcoding: such files are binary here too
                    *(["--ignore-case"] if ignore_case else []), "--regexp", compiled.pattern,
                ])  # fmt: skip
            targets = select_files(root, start, disp, file_filter, stop, deadline_at, listing)
            stats["scan_capped"] = targets.scan_capped
            skipped.linked += targets.linked

        if use_rg:
            assert rg is not None
            # rg's walk does not report what it searched or skipped: those counts are unknown.
            stats["files"] = None if stat.S_ISDIR(start_st.st_mode) else len(targets.files)
            engine = RgEngine(rg, compiled.pattern, ignore_case, deadline_at, stop, GREP_MAX_LINE_CHARS)
            matches = engine.matches(targets.cwd, targets.files)
        else:

            def texts() -> Iterator[tuple[str, str]]:
                for shown, rel in targets.files:
                    if stop.is_set():
                        return
                    data = read_checked(str(targets.cwd / rel), skipped, GREP_MAX_FILE_BYTES)
                    if data is not None:
                        stats["files"] += 1
                        yield shown, data.decode("utf-8", errors="replace")

            py = PythonEngine(compiled, deadline_at, stop, GREP_LINE_BUDGET, GREP_MAX_LINE_CHARS)
            matches = py.matches(texts())
        _collect(matches, limit, out, stats)
    except SearchStopped as stopped:
        stats["deadline"] = stopped.deadline
    finally:
        if matches is not None:
            matches.close()  # stops rg now, not when the generator is collected
    unknown = stats["files"] is None
    stats.update(
        binary=None if unknown else skipped.binary,
        large=None if unknown else skipped.large,
        linked=skipped.linked,
    )
    return out, stats


def _collect(matches: Iterable[Match], limit: int, out: list[str], stats: dict[str, Any]) -> None:
    """Render matches into `out` until the match or output cap; stops pulling there."""
    size = 0
    last: str | None = None
    for m in matches:
        if stats["matches"] >= limit:
            stats["limited"] = True
            return
        more = f" [... {m.more} more characters]" if m.more else ""
        rendered = f"{m.shown}:{m.line}: {m.text}{more}"
        if size + len(rendered) + 1 > GREP_OUTPUT_CAP and out:
            stats["output_capped"] = True
            return
        out.append(rendered)
        size += len(rendered) + 1
        stats["matches"] += 1
        if m.shown != last:
            last = m.shown
            stats["files_with_matches"] += 1
