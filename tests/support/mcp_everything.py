"""The MCP reference test server (npm `@modelcontextprotocol/server-everything`, pinned in
tests/support/mcp_everything/package-lock.json): a stdio MCP server nobody here wrote,
returning every kind of content. Installed by `.ci/run`, or here on first use."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import SUPPORT_DIR

EVERYTHING_DIR = SUPPORT_DIR / "mcp_everything"
EVERYTHING = EVERYTHING_DIR / "node_modules" / ".bin" / "mcp-server-everything"


async def installed_everything() -> Path:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        if os.environ.get("CI"):
            pytest.fail("node and npm are required in CI (apt-get install nodejs npm)")
        pytest.skip("node/npm not on PATH: server-everything cannot run here")
    if EVERYTHING.exists():
        return EVERYTHING
    proc = await asyncio.create_subprocess_exec(
        npm, "ci", "--no-audit", "--no-fund", "--silent", cwd=EVERYTHING_DIR,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 300)
    if proc.returncode != 0 or not EVERYTHING.exists():
        said = out.decode(errors="replace")
        if os.environ.get("CI"):
            pytest.fail(f"npm ci of server-everything failed:\n{said}")
        pytest.skip(f"npm ci of server-everything failed (no registry?): {said[-300:]}")
    return EVERYTHING


def everything_stdio(command: Path) -> dict[str, Any]:
    return {"name": "everything", "command": str(command), "args": ["stdio"], "env": []}
