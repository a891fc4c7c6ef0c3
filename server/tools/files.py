"""File tools: `read_file`, `write_file`, `edit_file`, `list_dir` (R-T5).

All paths are confined to the workspace (`server.tools.workspace`), and the I/O itself
goes through `server.tools.safefs`: no symlink is followed after the check (a swapped-in
link is refused), only regular files with a single link are read or written (a FIFO would
block a worker forever; a hard link may be an outside file). Blocking file I/O runs on the
tools' own pool with a deadline (`server.tools.offload`), so a large file or a slow disk
never stalls the event loop that serves every session, nor the server's default pool.
"""

from __future__ import annotations

import io
import os
import re
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from server.tools import safefs
from server.tools.base import Access, ToolContext, ToolError, ToolKind, ToolResult
from server.tools.offload import run_blocking
from server.tools.workspace import display_path, resolve_in_workspace

READ_MAX_LINES = 2000
READ_MAX_BYTES = 256 * 1024
READ_MAX_LINE_CHARS = 2000  # minified files: one "line" can be megabytes
LIST_MAX_ENTRIES = 1000
_BINARY_SNIFF_BYTES = 8192

# read_file's `     1\t` prefix pasted back into edit_file's old_string is a common mistake.
_LINE_NUMBER_PREFIX = re.compile(r"^\s*\d+\t", re.MULTILINE)


# --- argument helpers (the loop validates against the schema; these keep the tools safe
# when called directly and give readable errors instead of TypeErrors) ---


def _str_arg(args: dict[str, Any], key: str, *, default: str | None = None, allow_empty: bool = True) -> str:
    value = args.get(key, default)
    if value is None:
        raise ToolError(f"missing required argument {key!r}")
    if not isinstance(value, str):
        raise ToolError(f"argument {key!r} must be a string, got {type(value).__name__}")
    if not allow_empty and not value:
        raise ToolError(f"argument {key!r} must not be empty")
    return value


def _opt_int_arg(args: dict[str, Any], key: str, *, minimum: int = 1) -> int | None:
    value = args.get(key)
    if value is None:
        return None
    # bool is an int subclass; `true` as a line number is a model mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"argument {key!r} must be an integer, got {value!r}")
    if value < minimum:
        raise ToolError(f"argument {key!r} must be >= {minimum}, got {value}")
    return value


def _safe_locations(args: dict[str, Any], ctx: ToolContext, line: int | None = None) -> list[dict[str, Any]]:
    """Locations for the pending tool_call event; a bad path yields none (run() reports it)."""
    try:
        path = resolve_in_workspace(ctx.cwd, _str_arg(args, "path", default="."))
    except ToolError:
        return []
    loc: dict[str, Any] = {"path": str(path)}
    if line is not None:
        loc["line"] = line
    return [loc]


def _is_binary(data: bytes) -> bool:
    return b"\0" in data[:_BINARY_SNIFF_BYTES]


def _diff(path: Path, old: str | None, new: str) -> dict[str, Any]:
    """ACP diff content; `oldText` is omitted for a newly created file."""
    item: dict[str, Any] = {"type": "diff", "path": str(path)}
    if old is not None:
        item["oldText"] = old
    item["newText"] = new
    return item


def _os_error(action: str, disp: str, exc: OSError) -> ToolError:
    return ToolError(f"cannot {action} {disp}: {exc.strerror or exc}")


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _find_all(text: str, needle: str) -> list[int]:
    """Start offsets of every occurrence, overlapping ones included: "aa" in "aaa" is
    ambiguous (two places), which `str.count` would hide."""
    hits: list[int] = []
    i = text.find(needle)
    while i != -1:
        hits.append(i)
        i = text.find(needle, i + 1)
    return hits


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
        f"output is capped at {READ_MAX_LINES} lines / {READ_MAX_BYTES // 1024} KiB and says where to "
        "continue. Prefer it over cat/head/sed in bash."
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
        return _safe_locations(args, ctx, offset if isinstance(offset, int) and offset >= 1 else 1)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = resolve_in_workspace(ctx.cwd, _str_arg(args, "path", allow_empty=False))
        offset = _opt_int_arg(args, "offset") or 1
        user_limit = _opt_int_arg(args, "limit")
        limit = min(user_limit or READ_MAX_LINES, READ_MAX_LINES)
        disp = display_path(ctx.cwd, path)
        if ctx.client is not None and ctx.client.can_read:  # the editor's buffer, saved or not
            text = await ctx.client.read_text_file(path)
            output, raw = _render_lines(io.StringIO(text, newline=""), disp, offset, limit, user_limit)
        else:
            output, raw = await run_blocking(
                lambda stop: self._read(ctx.cwd, path, disp, offset, limit, user_limit, stop),
                what=f"read {disp}",
            )
        return ToolResult(output=output, locations=[{"path": str(path), "line": offset}], raw_output=raw)

    @staticmethod
    def _read(
        root: Path,
        path: Path,
        disp: str,
        offset: int,
        limit: int,
        user_limit: int | None,
        stop: threading.Event,
    ) -> tuple[str, dict[str, Any]]:
        try:
            if path.is_dir():
                raise ToolError(f"{disp} is a directory; use list_dir to see its contents")
            with safefs.parent_dir(root, path, disp) as (dir_fd, name):
                fd = safefs.open_for_read(dir_fd, name, disp)
            with os.fdopen(fd, "rb") as fb:
                if _is_binary(fb.read(_BINARY_SNIFF_BYTES)):
                    raise ToolError(f"{disp} looks like a binary file; read_file only reads text")
                fb.seek(0)
                # newline="" keeps "\r\n" intact so we can strip exactly the terminator.
                f = io.TextIOWrapper(fb, encoding="utf-8", newline="")
                try:
                    return _render_lines(_until_stopped(f, stop, disp), disp, offset, limit, user_limit)
                finally:
                    f.detach()  # fb's own `with` closes the descriptor
        except FileNotFoundError:
            raise ToolError(f"file not found: {disp}") from None
        except UnicodeDecodeError:
            raise ToolError(f"{disp} is not valid UTF-8 text (binary?); read_file only reads text") from None
        except OSError as exc:
            raise _os_error("read", disp, exc) from None


def _until_stopped(lines: Iterable[str], stop: threading.Event, disp: str) -> Iterator[str]:
    """Lines until the call is cancelled or out of time: skipping to a far offset in a
    huge file must not keep a worker busy after the caller has gone."""
    for n, line in enumerate(lines):
        if n % 4096 == 0 and stop.is_set():
            raise ToolError(f"reading {disp} was stopped")
        yield line


def _render_lines(
    lines: Iterable[str], disp: str, offset: int, limit: int, user_limit: int | None
) -> tuple[str, dict[str, Any]]:
    """read_file's output: numbered lines from `offset`, within the line and byte caps,
    with a note saying where to go on. Shared by disk reads and the client's buffers."""
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
        text = line.rstrip("\r\n")
        if len(text) > READ_MAX_LINE_CHARS:
            extra = len(text) - READ_MAX_LINE_CHARS
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
    if stopped is not None:
        nxt = last + 1
        if stopped == "limit" and user_limit is not None and user_limit <= READ_MAX_LINES:
            text += f"\n[showing lines {first}-{last}; the file continues at line {nxt}]"
        else:
            cap = f"{READ_MAX_LINES} lines" if stopped == "limit" else f"{READ_MAX_BYTES // 1024} KiB"
            text += (
                f"\n[output truncated at {cap}: showing lines {first}-{last}; "
                f"call read_file with offset={nxt} to read more]"
            )
    return text, {"lines": len(out), "truncated": stopped is not None}


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
        return _safe_locations(args, ctx)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = resolve_in_workspace(ctx.cwd, _str_arg(args, "path", allow_empty=False))
        content = _str_arg(args, "content")
        disp = display_path(ctx.cwd, path)
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as exc:  # lone surrogates from a bad JSON escape
            raise ToolError(f"content is not encodable as UTF-8: {exc}") from None
        if ctx.client is not None and ctx.client.can_write:
            old = await ctx.client.read_existing(path) if ctx.client.can_read else None
            await ctx.client.write_text_file(path, content)
        else:
            old = await run_blocking(
                lambda _stop: self._write(ctx.cwd, path, disp, data), what=f"write {disp}"
            )
        verb = "Created" if old is None else "Wrote"
        return ToolResult(
            output=f"{verb} {disp} ({len(data)} bytes)",
            content=[_diff(path, old, content)],
            locations=[{"path": str(path)}],
            raw_output={"bytes": len(data), "created": old is None},
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
            raise _os_error("write", disp, exc) from None
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
        return _safe_locations(args, ctx)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = resolve_in_workspace(ctx.cwd, _str_arg(args, "path", allow_empty=False))
        old_string = _str_arg(args, "old_string")
        new_string = _str_arg(args, "new_string")
        if not old_string:
            raise ToolError(
                "old_string must not be empty; to create or overwrite a whole file use write_file"
            )
        if old_string == new_string:
            raise ToolError("old_string and new_string are identical; nothing to change")
        disp = display_path(ctx.cwd, path)
        if ctx.client is not None and ctx.client.can_read and ctx.client.can_write:
            old_text = await ctx.client.read_text_file(path)
            new_text, line = _replace_once(old_text, disp, old_string, new_string)
            await ctx.client.write_text_file(path, new_text)
        else:
            old_text, new_text, line = await run_blocking(
                lambda _stop: self._edit(ctx.cwd, path, disp, old_string, new_string), what=f"edit {disp}"
            )
        return ToolResult(
            output=f"Edited {disp}: replaced 1 occurrence at line {line}",
            content=[_diff(path, old_text, new_text)],
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
            raise _os_error("edit", disp, exc) from None

    @staticmethod
    def _edit_in(dir_fd: int, name: str, disp: str, old_string: str, new_string: str) -> tuple[str, str, int]:
        raw = safefs.read_existing(dir_fd, name, disp)
        if raw is None:
            raise ToolError(f"file not found: {disp}; to create a file use write_file")
        if _is_binary(raw):
            raise ToolError(f"{disp} looks like a binary file; edit_file only edits text")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{disp} is not valid UTF-8 text; edit_file only edits text") from None

        new_text, line = _replace_once(text, disp, old_string, new_string)
        try:
            encoded = new_text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ToolError(f"new_string is not encodable as UTF-8: {exc}") from None
        safefs.replace_atomically(dir_fd, name, disp, encoded)
        return text, new_text, line


def _replace_once(text: str, disp: str, old_string: str, new_string: str) -> tuple[str, int]:
    """`text` with its one occurrence of `old_string` replaced, and that line; a miss or
    an ambiguous match is a ToolError that tells the model how to fix its call."""
    hits = _find_all(text, old_string)
    if not hits:
        raise ToolError(f"no match for old_string in {disp}. {_no_match_hint(text, old_string)}")
    if len(hits) > 1:
        lines = sorted({_line_of(text, i) for i in hits})
        shown = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
        raise ToolError(
            f"old_string matches {len(hits)} times in {disp} (lines {shown}); it must match exactly "
            "once. Add more surrounding context to old_string to pick the right occurrence."
        )
    start = hits[0]
    new_text = text[:start] + new_string + text[start + len(old_string) :]
    return new_text, _line_of(text, start)


def _no_match_hint(text: str, old_string: str) -> str:
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
        return _safe_locations(args, ctx)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = resolve_in_workspace(ctx.cwd, _str_arg(args, "path", default=".") or ".")
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
            raise _os_error("list", disp, exc) from None
        return sorted(names)
