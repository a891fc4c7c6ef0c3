"""A command on a pseudo-terminal, driven like a user at a keyboard: type lines, wait for
text on its screen (escape sequences stripped). The child's stdin, stdout and stderr are the
pty's slave side, so it sees a real terminal (colours, width, line discipline, echo)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import signal
import struct
import termios
from collections.abc import AsyncIterator
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>]")
COLUMNS, ROWS = 200, 50


def plain(raw: str) -> str:
    """What a person reads: no escape sequences, no carriage returns, no padding at line ends."""
    text = ANSI.sub("", raw).replace("\r", "")
    return "\n".join(line.rstrip() for line in text.split("\n"))


class PtyTerminal:
    def __init__(self, proc: asyncio.subprocess.Process, master: int) -> None:
        self.proc = proc
        self.master = master
        self.raw = ""
        self.closed = False
        self._more = asyncio.Event()
        asyncio.get_running_loop().add_reader(master, self._read)

    @property
    def screen(self) -> str:
        return plain(self.raw)

    def _read(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: every slave side is closed (the child exited)
            data = b""
        if not data:
            self.closed = True
            asyncio.get_running_loop().remove_reader(self.master)
        self.raw += data.decode(errors="replace")
        self._more.set()

    def mark(self) -> int:
        """A position on the screen: `wait_for(..., since=mark)` looks only at what follows."""
        return len(self.screen)

    async def wait_for(self, text: str, *, since: int = 0, within: float = 60) -> int:
        """Until `text` shows (after `since`); its position. The bound only stops a hang."""
        try:
            async with asyncio.timeout(within):
                while (at := self.screen.find(text, since)) < 0:
                    if self.closed:
                        raise AssertionError(f"the program exited before showing {text!r}:\n{self.screen}")
                    self._more.clear()
                    await self._more.wait()
        except TimeoutError:
            raise AssertionError(f"{text!r} did not show within {within} s:\n{self.screen}") from None
        return at

    async def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    async def ctrl_c(self) -> None:
        os.write(self.master, b"\x03")  # the line discipline turns it into SIGINT

    async def end_input(self) -> None:
        os.write(self.master, b"\x04")  # Ctrl-D at the start of a line: end of input

    async def exit_code(self, within: float = 60) -> int:
        async with asyncio.timeout(within):
            code = await self.proc.wait()
            while not self.closed:  # what it printed last
                self._more.clear()
                await self._more.wait()
        return code


def _own_terminal() -> None:
    """In the child: a session of its own with the pty as its controlling terminal, so the
    terminal's keys act as at a console (Ctrl-C is SIGINT to the foreground group)."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@contextlib.asynccontextmanager
async def pty_run(*command: str, env: dict[str, str], cwd: Path | None = None) -> AsyncIterator[PtyTerminal]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    env = {**env, "TERM": "xterm-256color", "COLUMNS": str(COLUMNS), "LINES": str(ROWS)}
    env.pop("NO_COLOR", None)
    try:
        proc = await asyncio.create_subprocess_exec(
            *command, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, preexec_fn=_own_terminal
        )
    finally:
        os.close(slave)
    term = PtyTerminal(proc, master)
    try:
        yield term
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        if not term.closed:
            asyncio.get_running_loop().remove_reader(master)
        os.close(master)
