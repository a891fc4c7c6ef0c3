"""agentd's own clients retry a refusal that names `retryAfter` (issue 32, item 4): through
`agentd acp --connect` (the bridge `agentd chat` uses too) an editor's burst against a real
server that refuses most of it for now (a tight rate limit: `-32019` with `retryAfter`) is
answered in full, each request with its result and none with an error; the same burst sent
straight to the server is refused in part (the other half: the refusals are real)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.support.client import WsClient
from tests.support.proc import AgentdProcess, agentd_serve, write_script

BURST = 8
LIMITS = {"rate_limit_per_s": "4", "rate_limit_burst": "2"}  # a burst of 8 is mostly refused at first


@contextlib.asynccontextmanager
async def bridge(server: AgentdProcess, tmp_path: Path) -> AsyncIterator[Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env["AGENTD_HOME"] = str(tmp_path / "editor-home")
    url = server.base_url.replace("http://", "ws://") + "/acp"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentd.cli", "acp", "--connect", url, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def send(proc: Any, req_id: int, method: str, params: dict[str, Any]) -> None:
    proc.stdin.write(
        json.dumps({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params}).encode()
    )
    proc.stdin.write(b"\n")
    await proc.stdin.drain()


async def answers(proc: Any, count: int) -> dict[int, dict[str, Any]]:
    """The next `count` responses by id (notifications skipped); bounded by 60 s each."""
    got: dict[int, dict[str, Any]] = {}
    while len(got) < count:
        msg = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
        if "id" in msg and "method" not in msg:
            got[msg["id"]] = msg
    return got


async def test_the_bridge_retries_refusals_until_each_request_is_answered(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    script = write_script(tmp_path / "script.json", [{"text": "ok"}])
    async with agentd_serve(tmp_path / "home", script=str(script), **LIMITS) as server:
        # The other half: straight to the server, the same burst is refused in part.
        direct = await WsClient.connect(server.base_url)
        try:
            replies = await asyncio.gather(*(direct.request("session/list", {}) for _ in range(BURST)))
        finally:
            await direct.close()
        refused = [r["error"] for r in replies if "error" in r]
        assert refused and all(e["code"] == -32019 and e["data"]["retryAfter"] > 0 for e in refused)

        async with bridge(server, tmp_path) as proc:
            await send(proc, 0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            assert "result" in (await answers(proc, 1))[0]
            new = {"cwd": str(workspace), "mcpServers": []}
            for i in range(1, BURST + 1):
                await send(proc, i, "session/new", new)
            got = await answers(proc, BURST)
        assert sorted(got) == list(range(1, BURST + 1))
        assert [m for m in got.values() if "error" in m] == []
        assert len({m["result"]["sessionId"] for m in got.values()}) == BURST
