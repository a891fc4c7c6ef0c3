"""The `list_dir` tool (R-T5): a directory's entries, sorted, directories ending in '/'.

Entries git ignores (`agentd.tools.search.ignore`) are left out of the listing and named in a
note instead, so `.venv/` or `node_modules/` cost one line; listing an ignored directory
by name shows everything in it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from agentd.tools.base import Access, ToolContext, ToolKind, ToolResult
from agentd.tools.errors import ToolError
from agentd.tools.files import display_path, os_error, resolve_in_workspace, safe_locations, str_arg
from agentd.tools.offload import run_blocking
from agentd.tools.search.ignore import IgnoreRules

LIST_MAX_ENTRIES = 1000
LIST_MAX_IGNORED_NAMES = 20  # ignored entries named in the note


class ListDir:
    name: ClassVar[str] = "list_dir"
    kind: ClassVar[ToolKind] = ToolKind.READ
    access: ClassVar[Access] = Access.READ
    description: ClassVar[str] = "List a directory's entries (directories end with '/'); not recursive."
    guidance: ClassVar[str] = (
        "Use list_dir to see what a directory contains (default: the workspace root); entries are sorted "
        "by name and directories end with '/'. It is not recursive: list subdirectories as you need them. "
        f"At most {LIST_MAX_ENTRIES} entries are shown. Entries git ignores (.gitignore, .git/info/exclude, "
        "global excludes) are only named in a note at the end; pass one as path to list it."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "Directory path, relative to the workspace root (default '.').",
            }
        },
        "required": [],
        "additionalProperties": False,
    }

    def title(self, args: dict[str, Any]) -> str:
        return f"List {args.get('path') or '.'}"

    def locations(self, args: dict[str, Any], ctx: ToolContext) -> list[dict[str, Any]]:
        return safe_locations(args, ctx)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = resolve_in_workspace(ctx.cwd, str_arg(args, "path", default=".") or ".")
        disp = display_path(ctx.cwd, path)
        root = resolve_in_workspace(ctx.cwd, ".")
        entries, ignored = await run_blocking(lambda _stop: self._list(root, path, disp), what=f"list {disp}")
        shown = entries[:LIST_MAX_ENTRIES]
        empty = "(all entries are ignored by git)" if ignored else "(empty directory)"
        output = "\n".join(shown) if shown else empty
        if len(entries) > len(shown):
            output += f"\n[... {len(entries) - len(shown)} more entries not shown]"
        if ignored:
            names = ", ".join(ignored[:LIST_MAX_IGNORED_NAMES])
            if len(ignored) > LIST_MAX_IGNORED_NAMES:
                names += f", ... ({len(ignored) - LIST_MAX_IGNORED_NAMES} more)"
            output += f"\n[{len(ignored)} ignored by git, not listed: {names}; pass one as path to list it]"
        return ToolResult(
            output=output,
            locations=[{"path": str(path)}],
            raw_output={
                "entries": len(entries),
                "ignored": len(ignored),
                "truncated": len(entries) > len(shown),
            },
        )

    @staticmethod
    def _list(root: Path, path: Path, disp: str) -> tuple[list[str], list[str]]:
        """(entries shown, entries git ignores), each sorted; directories end with '/'."""
        try:
            with os.scandir(path) as it:
                names: list[tuple[str, bool]] = []
                for entry in it:
                    try:
                        is_dir = entry.is_dir()  # follows symlinks: a link to a dir lists as a dir
                    except OSError:
                        is_dir = False
                    names.append((entry.name, is_dir))
        except FileNotFoundError:
            raise ToolError(f"directory not found: {disp}") from None
        except NotADirectoryError:
            raise ToolError(f"{disp} is a file, not a directory; use read_file to read it") from None
        except OSError as exc:
            raise os_error("list", disp, exc) from None
        rules: IgnoreRules | None = IgnoreRules(root)
        rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else "."
        base = "" if rel == "." else rel + "/"
        if rules is not None and base and rules.path_ignored(rel, is_dir=True):
            rules = None  # named explicitly: show all of it
        shown: list[str] = []
        ignored: list[str] = []
        for name, is_dir in names:
            label = name + "/" if is_dir else name
            if rules is not None and name != ".git" and rules.ignored(base + name, is_dir):
                ignored.append(label)
            else:
                shown.append(label)
        return sorted(shown), sorted(ignored)
