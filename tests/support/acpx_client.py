"""acpx (npm `acpx`, pinned in tests/support/acpx/package-lock.json): a stock ACP client from
the terminal, driven as a subprocess against `agentd acp` through its raw-agent escape hatch
(`--agent <command>`). Installed by `.ci/run`, or here on first use."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import SUPPORT_DIR

ACPX_DIR = SUPPORT_DIR / "acpx"
ACPX = ACPX_DIR / "node_modules" / ".bin" / "acpx"
# What acpx itself prints on stderr in every run, whatever the agent: its status lines
# ("[acpx] session … · agent starting", "[acpx] agent: …"). Every other line is a fault.
OWN_STDERR_PREFIX = "[acpx] "


async def installed_acpx() -> Path:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        if os.environ.get("CI"):
            pytest.fail("node and npm are required in CI (apt-get install nodejs npm)")
        pytest.skip("node/npm not on PATH: acpx cannot run here")
    if ACPX.exists():
        return ACPX
    # `npm install` honours the lock; `npm ci` refuses acpx's lock over its optional
    # platform-specific packages (npm 11), although nothing would be resolved again.
    proc = await asyncio.create_subprocess_exec(
        npm, "install", "--no-audit", "--no-fund", "--silent", cwd=ACPX_DIR,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 300)
    if proc.returncode != 0 or not ACPX.exists():
        if os.environ.get("CI"):
            pytest.fail(f"npm install of acpx failed:\n{out.decode(errors='replace')}")
        pytest.skip(f"npm install of acpx failed (no registry?): {out.decode(errors='replace')[-300:]}")
    return ACPX


@dataclass
class AcpxRun:
    returncode: int
    frames: list[dict[str, Any]]  # `--format json`: every JSON-RPC frame both ways, in order
    stderr: list[str]

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [f for f in self.frames if f.get("method") == method and "id" in f]

    def frames_with(self, method: str) -> list[dict[str, Any]]:
        return [f for f in self.frames if f.get("method") == method]

    def reply_to(self, request: dict[str, Any]) -> dict[str, Any]:
        return next(f for f in self.frames if f.get("id") == request["id"] and "method" not in f)

    def foreign_stderr(self) -> list[str]:
        """stderr lines acpx would not print on its own: caused by agentd."""
        return [line for line in self.stderr if line.strip() and not line.startswith(OWN_STDERR_PREFIX)]

    def updates(self, kind: str) -> list[dict[str, Any]]:
        return [
            f["params"]["update"]
            for f in self.frames
            if f.get("method") == "session/update" and f["params"]["update"].get("sessionUpdate") == kind
        ]


async def start_acpx(env: dict[str, str], workspace: Path, *args: str) -> asyncio.subprocess.Process:
    """An acpx process (`acpx --agent 'agentd acp' --cwd … --format json <args>`), running."""
    acpx = await installed_acpx()
    agent = shlex.join([sys.executable, "-m", "agentd.cli", "acp"])
    # acpx keeps its sessions and queue owner under $HOME/.acpx: the test's own home.
    return await asyncio.create_subprocess_exec(
        str(acpx), "--agent", agent, "--cwd", str(workspace), "--format", "json", *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def finish_acpx(proc: asyncio.subprocess.Process, read: bytes = b"", bound: float = 90) -> AcpxRun:
    """Wait for an acpx process to end (killed past `bound` s); `read`: its stdout already read."""
    try:
        out, err = await asyncio.wait_for(proc.communicate(), bound)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    lines = (read + out).decode().splitlines()
    frames = [json.loads(line) for line in lines if line.startswith("{")]
    return AcpxRun(proc.returncode or 0, frames, err.decode(errors="replace").splitlines())


async def run_acpx(env: dict[str, str], workspace: Path, *args: str, bound: float = 90) -> AcpxRun:
    """One acpx process to its end."""
    return await finish_acpx(await start_acpx(env, workspace, *args), bound=bound)
