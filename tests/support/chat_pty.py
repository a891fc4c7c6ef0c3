"""`agentd chat` on a pseudo-terminal against a test server's /acp."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

from tests.support.proc import agentd_command
from tests.support.pty_term import PtyTerminal, pty_run
from tests.support.tmux_term import TmuxTerminal, tmux_run


@contextlib.asynccontextmanager
async def chat_in_pty(base_url: str, home: Path, *args: str) -> AsyncIterator[PtyTerminal]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(HOME=str(home), PYTHONUNBUFFERED="1")
    url = base_url.replace("http://", "ws://") + "/acp"
    async with pty_run(*agentd_command(), "chat", "--url", url, *args, env=env) as term:
        yield term


@contextlib.asynccontextmanager
async def chat_in_tmux(base_url: str, home: Path, *args: str) -> AsyncIterator[TmuxTerminal]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(HOME=str(home), PYTHONUNBUFFERED="1")
    env.pop("TMUX", None)
    url = base_url.replace("http://", "ws://") + "/acp"
    async with tmux_run(*agentd_command(), "chat", "--url", url, *args, env=env, tmp=home) as term:
        yield term
