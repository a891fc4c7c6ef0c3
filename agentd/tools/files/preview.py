"""What a call will do, shown before it is approved (issue 17): the diff of an edit, the
content of a new file, the command and working directory of a shell call.

A tool that can say more than its arguments has an optional `preview(args, ctx)` returning
a `ToolPreview`; the loop adds it to the `toolCall` of a permission request (ACP tool-call
`content`, plus agentd fields under `_meta.agentd`). Reading the current file goes through
`safefs` like the tools' own I/O, bounded in size and time; a preview that cannot be made
is left out — the request is still asked, only with less to look at.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentd.tools.base import ToolContext
from agentd.tools.errors import ToolError
from agentd.tools.files import safefs
from agentd.tools.files.kind import is_binary
from agentd.tools.offload import run_blocking

PREVIEW_MAX_BYTES = 256 * 1024  # a larger file is described, not diffed
PREVIEW_DEADLINE_S = 5.0


@dataclass(frozen=True)
class ToolPreview:
    content: list[dict[str, Any]] = field(default_factory=list)  # ACP ToolCallContent items
    meta: dict[str, Any] = field(default_factory=dict)  # extra facts, under `_meta.agentd`

    def apply(self, tool_call: dict[str, Any]) -> dict[str, Any]:
        """`tool_call` (a permission request's) with the preview added."""
        out = dict(tool_call)
        if self.content:
            out["content"] = list(self.content)
        if self.meta:
            out["_meta"] = {"agentd": dict(self.meta)}
        return out


class TooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


def diff_item(path: Path, old: str | None, new: str) -> dict[str, Any]:
    """ACP diff content; `oldText` is omitted for a newly created file."""
    item: dict[str, Any] = {"type": "diff", "path": str(path)}
    if old is not None:
        item["oldText"] = old
    item["newText"] = new
    return item


def note(text: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": text}}


def _read_current(root: Path, path: Path, disp: str) -> str | None:
    """The file's text now, None if it does not exist; `TooLarge` / `ToolError` otherwise."""
    try:
        with safefs.parent_dir(root, path, disp) as (dir_fd, name):
            try:
                fd = safefs.open_for_read(dir_fd, name, disp)
            except FileNotFoundError:
                return None
    except FileNotFoundError:  # a missing directory on the way: a new file
        return None
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > PREVIEW_MAX_BYTES:
            raise TooLarge(size)
        data = f.read(PREVIEW_MAX_BYTES + 1)
    if len(data) > PREVIEW_MAX_BYTES:
        raise TooLarge(len(data))
    if is_binary(data):
        raise ToolError(f"{disp} is a binary file")
    return data.decode("utf-8", errors="replace")


class Unreadable(Exception):
    """The client could not read the file a write would replace (not "it does not exist")."""


async def current_text(ctx: ToolContext, path: Path, disp: str) -> str | None:
    """The text a write would replace (the editor's buffer when the client offers reads)."""
    if ctx.client is not None and ctx.client.can_read:
        prior = await ctx.client.read_existing(path)
        if prior.unreadable is not None:
            raise Unreadable(prior.unreadable)
        return prior.text
    return await run_blocking(
        lambda _stop: _read_current(ctx.cwd, path, disp), what=f"preview {disp}", deadline=PREVIEW_DEADLINE_S
    )


async def write_preview(ctx: ToolContext, path: Path, disp: str, new: str) -> ToolPreview:
    try:
        old = await current_text(ctx, path, disp)
    except TooLarge as exc:
        return ToolPreview([note(f"{disp} is {exc.size} bytes; too large to preview, replaced whole")])
    except Unreadable as exc:  # shown whole, as a new file: the client knows no old text
        return ToolPreview([note(f"{disp}: new file or unreadable ({exc})"), diff_item(path, None, new)])
    except (ToolError, OSError) as exc:
        return ToolPreview([note(f"no preview: {exc}")])
    return ToolPreview([diff_item(path, old, new)])
