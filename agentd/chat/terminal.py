"""Terminal rendering of a session's updates, shared by `agentd chat` and `agentd demo`.

Model text, tool titles and outputs are data, never rich markup: `arr[i]`, `[/]` or
`[red]` must print as typed (parsed as markup they raise or vanish). Only the fixed
decorations around them are styled.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from rich.console import Console
from rich.text import Text


class Stream(Enum):
    """What the screen is in the middle of printing: a line break separates them."""

    NONE = "none"
    THOUGHT = "thought"
    MESSAGE = "message"


def tool_failed(update: dict[str, Any]) -> int | None:
    """The non-zero exit code of a finished shell call (the call itself "completed": a
    non-zero exit is information for the model, but a failure for the person watching)."""
    raw = update.get("rawOutput")
    code = raw.get("exitCode") if isinstance(raw, dict) else None
    return code if isinstance(code, int) and code != 0 else None


class Screen:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.stream = Stream.NONE

    def _switch(self, to: Stream, label: str | None = None) -> None:
        if self.stream is not to:
            if self.stream is not Stream.NONE:
                self.console.print()
            if label:
                self.console.print(Text(label, style="dim"), end="")
            self.stream = to

    def line(self, text: str | Text, style: str = "") -> None:
        """A line of its own (notices, prompts), after whatever was streaming."""
        self._switch(Stream.NONE)
        self.console.print(text if isinstance(text, Text) else Text(text, style=style))

    def message_text(self, text: str) -> None:
        """A piece of the agent's answer, printed as it comes (the chat renders markdown)."""
        self._switch(Stream.MESSAGE)
        self.console.print(Text(text), end="")

    def update(self, update: dict[str, Any]) -> None:
        kind = update["sessionUpdate"]
        if kind == "agent_message_chunk":
            self.message_text(update["content"].get("text", ""))
        elif kind == "agent_thought_chunk":
            self._switch(Stream.THOUGHT, "thinking: ")
            self.console.print(Text(update["content"].get("text", ""), style="dim italic"), end="")
        elif kind == "user_message_chunk":
            self.line(Text.assemble(("> ", "bold"), (update["content"].get("text", ""), "bold")))
        elif kind == "tool_call":
            self.line(
                Text.assemble(
                    ("▶ ", "cyan"),
                    (str(update.get("title", "")), "cyan"),
                    (f" ({update.get('kind')})", "dim"),
                )
            )
        elif kind == "tool_call_update" and update.get("status") in ("completed", "failed"):
            self._tool_done(update)

    def _tool_done(self, update: dict[str, Any]) -> None:
        code = tool_failed(update)
        ok = update["status"] == "completed" and code is None
        text = next(
            (c["content"]["text"] for c in update.get("content") or [] if c.get("type") == "content"), ""
        )
        first = text.strip().splitlines()[:6]
        mark = Text("  ✓ ", style="green") if ok else Text("  ✗ ", style="red")
        if code is not None:
            mark.append(f"exit {code} ", style="red")
        self.line(Text.assemble(mark, "\n    ".join(first)))
