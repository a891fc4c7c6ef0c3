"""File tools: `read_file`, `write_file`, `edit_file` (R-T5); `list_dir` is in `listdir.py`, the
text shaping they share in `filetext.py`, their argument helpers in `fileargs.py`.

All paths are confined to the workspace (`agentd.tools.files.workspace`), and the I/O itself
goes through `agentd.tools.files.safefs`: no symlink is followed after the check (a swapped-in
link is refused), only regular files with a single link are read or written (a FIFO would
block a worker forever; a hard link may be an outside file). Blocking file I/O runs on the
tools' own pool with a deadline (`agentd.tools.offload`), so a large file or a slow disk
never stalls the event loop that serves every session, nor the server's default pool.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

from agentd.tools.base import Access, ToolContext, ToolKind, ToolResult
from agentd.tools.client_bridge import PriorText
from agentd.tools.errors import ToolError
from agentd.tools.files import safefs
from agentd.tools.files.args import opt_int_arg, os_error, safe_locations, str_arg
from agentd.tools.files.kind import BINARY_SNIFF_BYTES, count_lines, describe_binary, is_binary, mime_type
from agentd.tools.files.preview import ToolPreview, diff_item, note, write_preview
from agentd.tools.files.text import (
    READ_MAX_BYTES,
    READ_MAX_LINE_CHARS,
    READ_MAX_LINES,
    bounded_lines,
    render_lines,
    replace_once,
    until_stopped,
)
from agentd.tools.files.workspace import resolve_and_display
from agentd.tools.offload import run_blocking

# A regular file of at most this many bytes is read on the event loop, in one read: its
# ~30 us cost less than the hop to the tool pool and back (~200 us of CPU a call: the
# worker's wake-up and its GIL take-back, issue 32). It is the same kind of file system
# work the loop already does for every file tool call (the workspace resolve's lstats);
# only regular files get this far (safefs refuses FIFOs and devices before any read), so
# it cannot block on a writer. Larger files, and the rest of the tools' I/O, go to the
# pool with its deadline. 0: every read on the pool.
INLINE_READ_MAX = 16 * 1024
_NEVER = threading.Event()  # the inline read's `stop`: never set (it is not cancellable)

__all__ = [
    "READ_MAX_BYTES",
    "READ_MAX_LINES",
    "READ_MAX_LINE_CHARS",
    "EditFile",
    "ReadFile",
    "WriteFile",
]


class ReadFile:
    name: ClassVar[str] = "read_file"
    kind: ClassVar[ToolKind] = ToolKind.READ
    access: ClassVar[Access] = Access.READ
    description: ClassVar[str] = (
        "Read a text file from the workspace, with line numbers; optionally a line range."
    )
    guidance: ClassVar[str] = (
        "Use read_file to look at a file before editing it or whenever you need its exact text; "
        "each output line starts with its line number and a tab, which are not part of the file. "
        f"For large files read a range with offset (1-based first line) and limit (number of lines); "
        f"output is capped at {READ_MAX_LINES} lines / {READ_MAX_BYTES // 1024} KiB (lines over "
        f"{READ_MAX_LINE_CHARS} characters are shortened) and then says how many lines the file has and "
        "where to continue; a binary file is described by its type and size instead. Prefer it over "
        "cat/head/sed in bash."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace root."},
            "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)."},
            "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to read."},
        },
        "required": ["path"],
        "additionalProperties": False,
    }

    def title(self, args: dict[str, Any]) -> str:
        path = args.get("path", "?")
        offset, limit = args.get("offset"), args.get("limit")
        if isinstance(offset, int) and isinstance(limit, int):
            return f"Read {path} (lines {offset}-{offset + limit - 1})"
        if isinstance(offset, int):
            return f"Read {path} (from line {offset})"
        return f"Read {path}"

    def locations(self, args: dict[str, Any], ctx: ToolContext) -> list[dict[str, Any]]:
        offset = args.get("offset")
        return safe_locations(args, ctx, offset if isinstance(offset, int) and offset >= 1 else 1)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path, disp = resolve_and_display(ctx.cwd, str_arg(args, "path", allow_empty=False))
        offset = opt_int_arg(args, "offset") or 1
        user_limit = opt_int_arg(args, "limit")
        limit = min(user_limit or READ_MAX_LINES, READ_MAX_LINES)
        if ctx.client is not None and ctx.client.can_read:  # the editor's buffer, saved or not
            text = await ctx.client.read_text_file(path)
            total = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
            lines = bounded_lines(io.StringIO(text, newline=""))
            output, raw = render_lines(lines, disp, offset, limit, user_limit, total=lambda: total)
        else:
            done = None
            if INLINE_READ_MAX:
                done = self._read_small(ctx.cwd, path, disp, offset, limit, user_limit)
            if done is None:  # larger: on the tool pool, with its deadline and stop
                done = await run_blocking(
                    lambda stop: self._read(ctx.cwd, path, disp, offset, limit, user_limit, stop),
                    what=f"read {disp}",
                )
            output, raw = done
        return ToolResult(output=output, locations=[{"path": str(path), "line": offset}], raw_output=raw)

    @staticmethod
    def _read(
        root: Path, path: Path, disp: str, offset: int, limit: int, user_limit: int | None,
        stop: threading.Event,
    ) -> tuple[str, dict[str, Any]]:  # fmt: skip
        """The read on the tool pool: the descriptor read as the lines go, `stop` honoured."""
        with _read_errors(disp), _opened(root, path, disp) as (fd, fb):
            return _render(fb, lambda at, n: os.pread(fd, n, at), os.fstat(fd).st_size,
                           path, disp, offset, limit, user_limit, stop)  # fmt: skip

    @staticmethod
    def _read_small(
        root: Path, path: Path, disp: str, offset: int, limit: int, user_limit: int | None,
    ) -> tuple[str, dict[str, Any]] | None:  # fmt: skip
        """The read on the loop, bounded: None (nothing read past its first INLINE_READ_MAX
        + 1 bytes) for a file larger than that, which is the pool's to read."""
        with _read_errors(disp):
            with _opened(root, path, disp) as (fd, fb):
                if os.fstat(fd).st_size > INLINE_READ_MAX:
                    return None
                data = fb.read(INLINE_READ_MAX + 1)  # all of it, at once (it may have grown since)
            if len(data) > INLINE_READ_MAX:
                return None
            return _render(io.BytesIO(data), lambda at, n: data[at : at + n], len(data),
                           path, disp, offset, limit, user_limit, _NEVER)  # fmt: skip


@contextmanager
def _read_errors(disp: str) -> Iterator[None]:
    """read_file's errors as the model reads them."""
    try:
        yield
    except FileNotFoundError:
        raise ToolError(f"file not found: {disp}") from None
    except UnicodeDecodeError:
        raise ToolError(f"{disp} is not valid UTF-8 text (binary?); read_file only reads text") from None
    except OSError as exc:
        raise os_error("read", disp, exc) from None


@contextmanager
def _opened(root: Path, path: Path, disp: str) -> Iterator[tuple[int, BinaryIO]]:
    """`path` opened for reading below `root` (no symlink out of it): its descriptor and file."""
    if path.is_dir():
        raise ToolError(f"{disp} is a directory; use list_dir to see its contents")
    with safefs.parent_dir(root, path, disp) as (dir_fd, name):
        fd = safefs.open_for_read(dir_fd, name, disp)
    with os.fdopen(fd, "rb") as fb:
        yield fd, fb


def _render(
    fb: BinaryIO,
    read_chunk: Callable[[int, int], bytes],
    size: int,
    path: Path,
    disp: str,
    offset: int,
    limit: int,
    user_limit: int | None,
    stop: threading.Event,
) -> tuple[str, dict[str, Any]]:
    """read_file's output and raw record for the open file `fb` of `size` bytes (the
    descriptor on the pool, the bytes read at once on the loop)."""
    head = fb.read(BINARY_SNIFF_BYTES)
    if is_binary(head):
        mime = mime_type(path.name, head)
        raw = {"lines": 0, "binary": True, "bytes": size, "mime": mime}
        return describe_binary(disp, path.name, head, size), raw
    fb.seek(0)
    # newline="" keeps "\r\n" intact so we can strip exactly the terminator.
    f = io.TextIOWrapper(fb, encoding="utf-8", newline="")
    try:
        lines = until_stopped(bounded_lines(f), stop, disp)
        return render_lines(
            lines, disp, offset, limit, user_limit, total=lambda: count_lines(read_chunk, size, stop)
        )
    finally:
        f.detach()  # the caller's `with` closes the descriptor


class WriteFile:
    name: ClassVar[str] = "write_file"
    kind: ClassVar[ToolKind] = ToolKind.EDIT
    access: ClassVar[Access] = Access.WRITE
    description: ClassVar[str] = (
        "Create a file or replace its whole content (parent directories are created)."
    )
    guidance: ClassVar[str] = (
        "Use write_file to create a new file or to replace a file's entire content; missing parent "
        "directories are created and the write is atomic. For changing part of an existing file "
        "prefer edit_file, which is safer and produces a smaller, reviewable change. "
        "Write the complete content: nothing of the old file is kept."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace root."},
            "content": {"type": "string", "description": "The complete new content of the file."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }

    def title(self, args: dict[str, Any]) -> str:
        return f"Write {args.get('path', '?')}"

    def locations(self, args: dict[str, Any], ctx: ToolContext) -> list[dict[str, Any]]:
        return safe_locations(args, ctx)

    async def preview(self, args: dict[str, Any], ctx: ToolContext) -> ToolPreview:
        """The diff against the current file; a new file shows its whole content (no oldText)."""
        path, disp = resolve_and_display(ctx.cwd, str_arg(args, "path", allow_empty=False))
        return await write_preview(ctx, path, disp, str_arg(args, "content"))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path, disp = resolve_and_display(ctx.cwd, str_arg(args, "path", allow_empty=False))
        content = str_arg(args, "content")
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as exc:  # lone surrogates from a bad JSON escape
            raise ToolError(f"content is not encodable as UTF-8: {exc}") from None
        unreadable: str | None = None
        if ctx.client is not None and ctx.client.can_write:
            prior = await ctx.client.read_existing(path) if ctx.client.can_read else PriorText(None)
            old, unreadable = prior.text, prior.unreadable
            await ctx.client.write_text_file(path, content)
        else:
            old = await run_blocking(
                lambda _stop: self._write(ctx.cwd, path, disp, data), what=f"write {disp}"
            )
        if unreadable is not None:  # the client's pre-read failed: new, or unreadable to it
            output = f"Wrote {disp} ({len(data)} bytes; new file or unreadable: {unreadable})"
        else:
            output = f"{'Created' if old is None else 'Wrote'} {disp} ({len(data)} bytes)"
        return ToolResult(
            output=output,
            content=[diff_item(path, old, content)],
            locations=[{"path": str(path)}],
            raw_output={"bytes": len(data), "created": old is None and unreadable is None},
        )

    @staticmethod
    def _write(root: Path, path: Path, disp: str, data: bytes) -> str | None:
        """Write `data`; return the previous text (None if the file is new)."""
        try:
            if path.is_dir():
                raise ToolError(f"{disp} is a directory; give a file path")
            with safefs.parent_dir(root, path, disp, create=True) as (dir_fd, name):
                previous = safefs.read_existing(dir_fd, name, disp)
                safefs.replace_atomically(dir_fd, name, disp, data)
        except OSError as exc:
            raise os_error("write", disp, exc) from None
        # Old text only feeds the diff shown to the user, so undecodable bytes are
        # replaced rather than refusing the write.
        return None if previous is None else previous.decode("utf-8", errors="replace")


class EditFile:
    name: ClassVar[str] = "edit_file"
    kind: ClassVar[ToolKind] = ToolKind.EDIT
    access: ClassVar[Access] = Access.WRITE
    description: ClassVar[str] = (
        "Replace one exact, unique occurrence of old_string with new_string in a file."
    )
    guidance: ClassVar[str] = (
        "Use edit_file for targeted changes to an existing file: old_string must match the file's "
        "current text exactly once, including whitespace, indentation and line endings, and without "
        "read_file's line-number prefixes. If it matches zero times or more than once the edit is "
        "refused, never guessed: re-read the file and include enough surrounding lines to make it "
        "unique. Make one call per change; to create a file use write_file."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace root."},
            "old_string": {
                "type": "string",
                "minLength": 1,
                "description": "Exact text to replace; must occur exactly once in the file.",
            },
            "new_string": {"type": "string", "description": "Replacement text."},
        },
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": False,
    }

    def title(self, args: dict[str, Any]) -> str:
        return f"Edit {args.get('path', '?')}"

    def locations(self, args: dict[str, Any], ctx: ToolContext) -> list[dict[str, Any]]:
        return safe_locations(args, ctx)

    async def preview(self, args: dict[str, Any], ctx: ToolContext) -> ToolPreview:
        """The file before and after the replacement, as the edit would make it now."""
        path, disp = resolve_and_display(ctx.cwd, str_arg(args, "path", allow_empty=False))
        shown = await write_preview(ctx, path, disp, "")
        diff = shown.content[0] if shown.content else {}
        if diff.get("type") != "diff":
            return shown  # too large, binary, unreadable: the note says why
        if diff.get("oldText") is None:
            return ToolPreview([note(f"file not found: {disp}; this edit will fail")])
        try:
            old, new = str_arg(args, "old_string"), str_arg(args, "new_string")
            new_text, _ = replace_once(diff["oldText"], disp, old, new)
        except ToolError as exc:
            return ToolPreview([note(f"this edit will fail: {exc}")])
        return ToolPreview([diff_item(path, diff["oldText"], new_text)])

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path, disp = resolve_and_display(ctx.cwd, str_arg(args, "path", allow_empty=False))
        old_string = str_arg(args, "old_string")
        new_string = str_arg(args, "new_string")
        if not old_string:
            raise ToolError(
                "old_string must not be empty; to create or overwrite a whole file use write_file"
            )
        if old_string == new_string:
            raise ToolError("old_string and new_string are identical; nothing to change")
        if ctx.client is not None and ctx.client.can_read and ctx.client.can_write:
            old_text = await ctx.client.read_text_file(path)
            new_text, line = replace_once(old_text, disp, old_string, new_string)
            await ctx.client.write_text_file(path, new_text)
        else:
            old_text, new_text, line = await run_blocking(
                lambda _stop: self._edit(ctx.cwd, path, disp, old_string, new_string), what=f"edit {disp}"
            )
        return ToolResult(
            output=f"Edited {disp}: replaced 1 occurrence at line {line}",
            content=[diff_item(path, old_text, new_text)],
            locations=[{"path": str(path), "line": line}],
            raw_output={"replacements": 1, "line": line},
        )

    @staticmethod
    def _edit(root: Path, path: Path, disp: str, old_string: str, new_string: str) -> tuple[str, str, int]:
        not_found = f"file not found: {disp}; to create a file use write_file"
        if path.is_dir():
            raise ToolError(f"{disp} is a directory, not a file")
        try:
            with safefs.parent_dir(root, path, disp) as (dir_fd, name):
                return EditFile._edit_in(dir_fd, name, disp, old_string, new_string)
        except FileNotFoundError:
            raise ToolError(not_found) from None
        except OSError as exc:
            raise os_error("edit", disp, exc) from None

    @staticmethod
    def _edit_in(dir_fd: int, name: str, disp: str, old_string: str, new_string: str) -> tuple[str, str, int]:
        raw = safefs.read_existing(dir_fd, name, disp)
        if raw is None:
            raise ToolError(f"file not found: {disp}; to create a file use write_file")
        if is_binary(raw):
            raise ToolError(f"{disp} looks like a binary file; edit_file only edits text")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{disp} is not valid UTF-8 text; edit_file only edits text") from None

        new_text, line = replace_once(text, disp, old_string, new_string)
        try:
            encoded = new_text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ToolError(f"new_string is not encodable as UTF-8: {exc}") from None
        safefs.replace_atomically(dir_fd, name, disp, encoded)
        return text, new_text, line
