"""The `list_dir` tool (R-T5): a directory's entries, sorted, directories ending in '/'."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from server.tools.base import Access, ToolContext, ToolError, ToolKind, ToolResult
from server.tools.fileargs import os_error, safe_locations, str_arg
from server.tools.offload import run_blocking
from server.tools.workspace import display_path, resolve_in_workspace

LIST_MAX_ENTRIES = 1000


class ListDir:
    name: ClassVar[str] = "list_dir"
    kind: ClassVar[ToolKind] = ToolKind.READ
    access: ClassVar[Access] = Access.READ
    description: ClassVar[str] = "List a directory's entries (directories end with '/'); not recursive."
    guidance: ClassVar[str] = (
        "Use list_dir to see what a directory contains (default: the workspace root); entries are sorted "
        "by name and directories end with '/'. It is not recursive: list subdirectories as you need them. "
        f"At most {LIST_MAX_ENTRIES} entries are shown."
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
        entries = await run_blocking(lambda _stop: self._list(path, disp), what=f"list {disp}")
        shown = entries[:LIST_MAX_ENTRIES]
        output = "\n".join(shown) if shown else "(empty directory)"
        if len(entries) > len(shown):
            output += f"\n[... {len(entries) - len(shown)} more entries not shown]"
        return ToolResult(
            output=output,
            locations=[{"path": str(path)}],
            raw_output={"entries": len(entries), "truncated": len(entries) > len(shown)},
        )

    @staticmethod
    def _list(path: Path, disp: str) -> list[str]:
        try:
            with os.scandir(path) as it:
                names = []
                for entry in it:
                    try:
                        is_dir = entry.is_dir()  # follows symlinks: a link to a dir lists as a dir
                    except OSError:
                        is_dir = False
                    names.append(entry.name + "/" if is_dir else entry.name)
        except FileNotFoundError:
            raise ToolError(f"directory not found: {disp}") from None
        except NotADirectoryError:
            raise ToolError(f"{disp} is a file, not a directory; use read_file to read it") from None
        except OSError as exc:
            raise os_error("list", disp, exc) from None
        return sorted(names)
