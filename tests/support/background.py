"""A background bash job held on a FIFO until the test releases it, and the system reminders
a model request carried."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from agentd.core.provider import ProviderRequest

FIFO = "release.fifo"
REMINDER = "<system-reminder>"


def make_fifo(workspace: Path) -> Path:
    path = workspace / FIFO
    os.mkfifo(path)
    return path


async def release(fifo: Path) -> None:
    """Let the background command finish: opening for writing blocks until it reads."""

    def write() -> None:
        with fifo.open("w") as f:
            f.write("go\n")

    await asyncio.to_thread(write)


def reminders(request: ProviderRequest) -> list[str]:
    return [m.content for m in request.messages if m.role == "user" and REMINDER in str(m.content)]
