"""A stock ACP client agentd did not write (issue 12, item 7): the official TypeScript SDK
(`@agentclientprotocol/sdk`, pinned in tests/support/ts_client/package-lock.json) spawns
`agentd acp` and runs one complete session over stdio — initialize, new, a prompt whose
permission request it answers, load with replay, list. Needs `node` and `npm` (skipped with
the reason where they are missing, except in CI); the package is installed on first use."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.support.acp_stdio import agentd_env, write_script
from tests.support.paths import SUPPORT_DIR

CLIENT_DIR = SUPPORT_DIR / "ts_client"


async def installed_sdk() -> None:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        if os.environ.get("CI"):
            pytest.fail("node and npm are required in CI (apt-get install nodejs npm)")
        pytest.skip("node/npm not on PATH: the TypeScript SDK client cannot run here")
    if (CLIENT_DIR / "node_modules" / "@agentclientprotocol" / "sdk").is_dir():
        return
    proc = await asyncio.create_subprocess_exec(
        npm, "ci", "--no-audit", "--no-fund", "--silent", cwd=CLIENT_DIR,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 300)
    if proc.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"npm ci failed:\n{out.decode(errors='replace')}")
        pytest.skip(f"npm ci failed (no registry?): {out.decode(errors='replace')[-300:]}")


@pytest.mark.timeout(400)
async def test_the_typescript_sdk_client_runs_a_session_over_stdio(tmp_path: Path, workspace: Path) -> None:
    await installed_sdk()
    agent = [sys.executable, "-m", "agentd.cli", "acp"]
    proc = await asyncio.create_subprocess_exec(
        "node", str(CLIENT_DIR / "client.mjs"), json.dumps(agent), str(workspace),
        env=agentd_env(tmp_path / "home", write_script(tmp_path)),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode(errors="replace")
    seen = json.loads(out.decode().strip().splitlines()[-1])
    assert seen["protocolVersion"] == 1 and seen["agent"] == "agentd"
    assert seen["stopReason"] == "end_turn"
    assert len(seen["permissions"]) == 1  # asked, and the TypeScript client allowed it
    assert (workspace / "out.txt").read_text() == "stdio\n"
    assert seen["text"] == "Writing it.Done over stdio [ok]."
    assert seen["replayedUsers"] == ["write out.txt"]
    assert seen["listed"] == [seen["sessionId"]]
