"""What `agentd chat` draws on top of the shared `Screen` (agentd/chat/terminal.py): the agent's
text as markdown, rendered a block at a time while it streams, and what a permission
question is about — the diff a write or edit would make, the exact command and folder of a
shell call."""

from __future__ import annotations

import difflib
import posixpath
from typing import Any

from rich.console import Console, RenderableType
from rich.markdown import Markdown
from rich.syntax import Syntax
from rich.text import Text

from agentd.chat.terminal import Screen, Stream

MAX_DIFF_LINES = 400  # a permission question shows at most this much of a diff
FENCES = ("```", "~~~")


def complete_blocks(text: str) -> int:
    """How much of streamed markdown `text` is whole blocks: the index just after the last
    blank line outside a fenced code block (0: no block is complete yet). A fence that
    closes ends its block too."""
    cut = 0
    fence: str | None = None
    pos = 0
    for line in text.splitlines(keepends=True):
        pos += len(line)
        if not line.endswith("\n"):
            break  # the last line is still being written
        stripped = line.strip()
        if fence is None:
            opened = next((f for f in FENCES if stripped.startswith(f)), None)
            if opened is not None:
                fence = opened
            elif not stripped:
                cut = pos
        elif stripped.startswith(fence) and not stripped.strip(fence[0]):
            fence = None
            cut = pos
    return cut


class MarkdownStream:
    """Agent text as it streams: each block is printed through rich's Markdown once it is
    complete (never the whole answer again per chunk); the rest when the message ends."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.pending = ""

    def feed(self, text: str) -> None:
        self.pending += text
        cut = complete_blocks(self.pending)
        if cut:
            block, self.pending = self.pending[:cut], self.pending[cut:]
            self._print(block)

    def flush(self) -> None:
        block, self.pending = self.pending, ""
        self._print(block)

    def _print(self, block: str) -> None:
        if block.strip():
            self.console.print(Markdown(block))


class ChatScreen(Screen):
    """The shared screen with markdown for the agent's answer and a line for notices."""

    def __init__(self, console: Console) -> None:
        super().__init__(console)
        self.markdown = MarkdownStream(console)

    def _switch(self, to: Stream, label: str | None = None) -> None:
        if self.stream is Stream.MESSAGE and to is not Stream.MESSAGE:
            self.markdown.flush()  # it ends with its own line break
            self.stream = Stream.NONE
        super()._switch(to, label)

    def message_text(self, text: str) -> None:
        self._switch(Stream.MESSAGE)
        self.markdown.feed(text)

    def end_message(self) -> None:
        """The message's final event: print what is left of it."""
        if self.stream is Stream.MESSAGE:
            self._switch(Stream.NONE)

    def update(self, update: dict[str, Any]) -> None:
        if update.get("sessionUpdate") == "notice":
            self.line(Text(f"! {update.get('title', '')}", style="yellow"))
            return
        super().update(update)

    def note(self, text: str | Text, style: str = "") -> None:
        """A line of the chat's own (a command's answer) while the agent's answer may be
        streaming: between its markdown blocks, never inside one — the block still being
        written is not flushed half-way (that split `[link](https://exam` into raw text)."""
        if self.stream is Stream.MESSAGE:  # only whole blocks are printed: at a line start
            self.console.print(text if isinstance(text, Text) else Text(text, style=style))
        else:
            self.line(text, style)

    def show(self, renderable: RenderableType) -> None:
        self._switch(Stream.NONE)
        self.console.print(renderable)


def shown_path(path: str, cwd: str | None) -> str:
    """A path as the diff names it: relative to the session's folder when inside it, else
    as given (an absolute path outside it stays absolute)."""
    if cwd and path.startswith("/"):
        rel = posixpath.relpath(posixpath.normpath(path), posixpath.normpath(cwd))
        if rel != "." and not rel.startswith("../") and rel != "..":
            return rel
    return path


def unified_diff(path: str, old: str | None, new: str, cwd: str | None = None) -> str:
    """`old` → `new` as a unified diff (`old` None: a new file). Relative paths get git's
    `a/` and `b/` prefixes; an absolute one is named as it is (never `b//abs/path`)."""
    before = (old or "").splitlines(keepends=True)
    after = new.splitlines(keepends=True)
    name = shown_path(path, cwd)
    a, b = (name, name) if name.startswith("/") else (f"a/{name}", f"b/{name}")
    lines = difflib.unified_diff(before, after, fromfile="/dev/null" if old is None else a, tofile=b)
    out = [line if line.endswith("\n") else line + "\n" for line in lines]
    if len(out) > MAX_DIFF_LINES:
        out = [*out[:MAX_DIFF_LINES], f"… {len(out) - MAX_DIFF_LINES} more diff lines\n"]
    return "".join(out)


def _diff_view(diff: str) -> RenderableType:
    if not diff:
        return Text("  (no change)", style="dim")
    return Syntax(diff, "diff", theme="ansi_dark", background_color="default", word_wrap=True)


def permission_preview(tool_call: dict[str, Any], cwd: str | None = None) -> list[RenderableType]:
    """What a permission question is about: the diffs the server previewed (`content` items
    of type `diff`), else what `rawInput` says — a write's whole new content, an edit's old
    and new strings, a shell call's exact command and the folder it runs in (its own `cwd`,
    else the session's `cwd`)."""
    out: list[RenderableType] = []
    for item in tool_call.get("content") or []:
        if isinstance(item, dict) and item.get("type") == "diff" and isinstance(item.get("newText"), str):
            old = item.get("oldText")
            path = str(item.get("path", ""))
            before = old if isinstance(old, str) else None
            out.append(_diff_view(unified_diff(path, before, item["newText"], cwd)))
    if out:
        return out
    raw = tool_call.get("rawInput")
    if not isinstance(raw, dict):
        return out
    path = str(raw.get("path", ""))
    if isinstance(raw.get("command"), str):
        out.append(Text.assemble(("  $ ", "bold"), (raw["command"], "bold")))
        folder = raw.get("cwd") if isinstance(raw.get("cwd"), str) else cwd
        if folder:
            if cwd and not folder.startswith("/"):  # relative to the session's folder
                folder = posixpath.normpath(posixpath.join(cwd, folder))
            out.append(Text.assemble(("  in ", "dim"), (folder, "")))
    elif isinstance(raw.get("content"), str):
        out.append(Text(f"  writes {path} (whole new content):", style="dim"))
        out.append(_diff_view(unified_diff(path, None, raw["content"], cwd)))
    elif isinstance(raw.get("old_string"), str) and isinstance(raw.get("new_string"), str):
        out.append(Text(f"  edits {path}:", style="dim"))
        out.append(_diff_view(unified_diff(path, raw["old_string"], raw["new_string"], cwd)))
    return out
