"""A command in a real terminal emulator — a private tmux server — read back as the screen a
person sees (`capture-pane`): what was erased and redrawn is gone, unlike a raw pty log."""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from tests.support.polling import until

TMUX = shutil.which("tmux")


class TmuxTerminal:
    def __init__(self, socket: Path, env: dict[str, str]) -> None:
        self.socket = socket
        self.env = env

    async def tmux(self, *args: str) -> str:
        assert TMUX is not None
        proc = await asyncio.create_subprocess_exec(
            TMUX, "-S", str(self.socket), *args, env=self.env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        return out.decode()

    async def lines(self) -> list[str]:
        """The screen now, one entry per row, without trailing blanks or empty rows at the end."""
        rows = [row.rstrip() for row in (await self.tmux("capture-pane", "-p", "-t", "chat")).split("\n")]
        while rows and not rows[-1]:
            rows.pop()
        return rows

    async def wait_for(self, text: str, within: float = 60) -> list[str]:
        seen: list[str] = []

        async def shows() -> bool:
            seen[:] = await self.lines()
            return any(text in row for row in seen)

        await until(shows, within, what=f"{text!r} on the screen")
        return seen

    async def wait_until(self, check: Callable[[list[str]], bool], within: float = 60) -> list[str]:
        """Until the screen's rows satisfy `check`; those rows."""
        seen: list[str] = []

        async def ok() -> bool:
            seen[:] = await self.lines()
            return bool(seen) and check(seen)

        try:
            await until(ok, within)
        except AssertionError:
            raise AssertionError("the screen never matched:\n" + "\n".join(seen)) from None
        return seen

    async def keys(self, text: str, *, enter: bool = False) -> None:
        await self.tmux("send-keys", "-t", "chat", "-l", text)
        if enter:
            await self.tmux("send-keys", "-t", "chat", "Enter")


@contextlib.asynccontextmanager
async def tmux_run(*command: str, env: dict[str, str], tmp: Path) -> AsyncIterator[TmuxTerminal]:
    if TMUX is None:
        pytest.skip("no tmux on this machine")
    socket = tmp / "tmux.sock"  # a server of our own: killed alone at the end
    term = TmuxTerminal(socket, {**env, "TERM": "xterm-256color"})
    await term.tmux(
        "-f", "/dev/null", "new-session", "-d", "-s", "chat", "-x", "120", "-y", "40", shlex.join(command)
    )
    try:
        yield term
    finally:
        with contextlib.suppress(AssertionError):
            await term.tmux("kill-server")
