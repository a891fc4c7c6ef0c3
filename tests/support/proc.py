"""A real `agentd serve` subprocess for the reliability suite: settings through the
environment (as an operator sets them), its own log file, RSS read from /proc, `kill -9`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.store.test_persistence import _free_port, agentd_process, wait_healthy


@dataclass
class AgentdProcess:
    base_url: str
    proc: Any  # asyncio.subprocess.Process
    log: Path

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def rss_bytes(self) -> int:
        """Resident set size of the server process (VmRSS), not of the test runner."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"no VmRSS for pid {self.pid}")

    async def kill9(self) -> None:
        with contextlib.suppress(ProcessLookupError):  # it may be dead already
            os.kill(self.pid, signal.SIGKILL)
        async with asyncio.timeout(30):
            assert await self.proc.wait() == -signal.SIGKILL

    async def output(self) -> str:
        return await asyncio.to_thread(self.log.read_text, errors="replace")


def server_env(home: Path, **settings: str) -> dict[str, str]:
    """The test runner's environment without its AGENTD_* variables, plus `settings`
    (`database_url="…"` becomes AGENTD_DATABASE_URL)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(HOME=str(home), AGENTD_HOME=str(home / "agentd"))
    env.update({f"AGENTD_{k.upper()}": v for k, v in settings.items()})
    return env


def write_script(path: Path, steps: list[dict[str, Any]], *, loop: bool = True) -> Path:
    path.write_text(json.dumps({"loop": loop, "steps": steps}))
    return path


@contextlib.asynccontextmanager
async def agentd_serve(
    home: Path, log_name: str = "serve.log", **settings: str
) -> AsyncIterator[AgentdProcess]:
    """`agentd serve` on a free loopback port, healthy when yielded; killed (the whole
    process group) on exit if still running."""
    await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True)
    port = _free_port()
    env = server_env(home, port=str(port), provider="scripted", **settings)
    log = home / log_name
    async with agentd_process(["serve", "--log-level", "warning"], env=env, log=log) as proc:
        base = f"http://127.0.0.1:{port}"
        await wait_healthy(base, proc, log)
        yield AgentdProcess(base, proc, log)
