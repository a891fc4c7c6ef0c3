"""`agentd chat`'s input on a terminal: the line being typed stays on its own line under
the output. The terminal's own echo would print keystrokes wherever the cursor is — in the
middle of a streamed answer, splitting it — so echo and line editing are ours: the input
line is erased before any output and drawn again once the output stands at a line start
(while a line is half-printed the typed text waits, unseen, in the buffer).

Only when stdin and stdout are terminals; otherwise (pipes, tests) lines are read as they
come (agentd/chat/repl.py `read_lines`)."""

from __future__ import annotations

import asyncio
import os
import sys
import termios
from typing import Any, TextIO

ERASE = "\r\x1b[K"  # to the line's start, clear it
BACKSPACE = ("\x7f", "\b")
KILL_LINE = "\x15"  # Ctrl-U
END_OF_INPUT = "\x04"  # Ctrl-D (on an empty line)


class EditorOutput:
    """stdout with the input line kept below what is written: `write` erases it first,
    `flush` draws it again when the output ended a line."""

    def __init__(self, real: TextIO) -> None:
        self.real = real
        self.buffer = ""  # what is typed so far
        self.shown = False
        self.at_line_start = True

    def write(self, text: str) -> int:
        if text:
            self._hide()
            self.real.write(text)
            self.at_line_start = text.endswith("\n")
        return len(text)

    def flush(self) -> None:
        self.draw()

    def draw(self) -> None:
        if self.at_line_start and self.buffer:
            self.real.write(ERASE + self.buffer)
            self.shown = True
        self.real.flush()

    def _hide(self) -> None:
        if self.shown:
            self.real.write(ERASE)
            self.shown = False

    def commit(self, line: str) -> None:
        """An entered line stays on the screen as typed, on its own line."""
        self._hide()
        self.real.write(("" if self.at_line_start else "\n") + line + "\n")
        self.at_line_start = True
        self.real.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding… as the terminal's
        return getattr(self.real, name)


class LineEditor:
    """Keys from the terminal in non-canonical mode, edited into lines for `lines` (None
    at end of input). Ctrl-C stays a signal (ISIG is kept)."""

    def __init__(self, lines: asyncio.Queue[str | None], out: EditorOutput, fd: int) -> None:
        self.lines = lines
        self.out = out
        self.fd = fd
        self._saved: list[Any] | None = None
        self._escape = False  # inside an escape sequence (arrow keys…): ignored

    def start(self) -> None:
        self._saved = termios.tcgetattr(self.fd)
        mode = termios.tcgetattr(self.fd)
        mode[3] &= ~(termios.ICANON | termios.ECHO)
        mode[6][termios.VMIN], mode[6][termios.VTIME] = 1, 0
        termios.tcsetattr(self.fd, termios.TCSANOW, mode)
        asyncio.get_running_loop().add_reader(self.fd, self._readable)

    def stop(self) -> None:
        asyncio.get_running_loop().remove_reader(self.fd)
        if self._saved is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, 4096)
        except OSError:
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.fd)
            self.lines.put_nowait(None)
            return
        self.keys(data.decode(errors="replace"))
        self.out.draw()

    def keys(self, text: str) -> None:
        for ch in text:
            if self._escape:
                self._escape = not (ch.isalpha() or ch == "~")
            elif ch == "\x1b":
                self._escape = True
            elif ch in ("\r", "\n"):
                line, self.out.buffer = self.out.buffer, ""
                self.out.commit(line)
                self.lines.put_nowait(line)
            elif ch in BACKSPACE:
                self.out.buffer = self.out.buffer[:-1]
                if not self.out.buffer:
                    self.out._hide()
            elif ch == KILL_LINE:
                self.out.buffer = ""
                self.out._hide()
            elif ch == END_OF_INPUT and not self.out.buffer:
                self.lines.put_nowait(None)
            elif ch.isprintable():
                self.out.buffer += ch


def terminal_editor(lines: asyncio.Queue[str | None]) -> LineEditor | None:
    """A started editor with sys.stdout wrapped, when both ends are a terminal."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return None
    out = EditorOutput(sys.stdout)
    editor = LineEditor(lines, out, sys.stdin.fileno())
    try:
        editor.start()
    except termios.error:
        return None
    sys.stdout = out  # rich and print write through it
    return editor


def stop_editor(editor: LineEditor | None) -> None:
    if editor is None:
        return
    if isinstance(sys.stdout, EditorOutput):
        sys.stdout.flush()
        sys.stdout = sys.stdout.real
    editor.stop()
