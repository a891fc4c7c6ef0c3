"""Latency of other users while one session runs a hostile tool call (prints figures; no asserts).

    .venv/bin/python bench/tool_isolation.py   (AGENTD_GREP_ENGINE=python: without ripgrep)

For each hostile call (issue 9: a catastrophic grep pattern, a long search, a glob on long
names, reads of named pipes, a command whose child leaves its process group) session A
starts it; once it is announced running, another client measures `GET /healthz`,
`session/new` and a trivial turn of session B. The target is well under 1 s each.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from agentd.app import create_app
from agentd.embedded import serve_in_background
from agentd.infra.config import PermissionMode, ProviderName, Settings
from agentd.providers.scripted import ScriptedProvider
from agentd.tools.search.engine import find_rg
from tests.support.client import WsClient, text_prompt


def setup_grep(ws: Path) -> list[dict[str, Any]]:
    (ws / "line.txt").write_text("a" * 27 + "\n")
    return [{"name": "grep", "arguments": {"pattern": "(a*)*b"}}]


def setup_long_grep(ws: Path) -> list[dict[str, Any]]:
    (ws / "many.txt").write_text(("a" * 20 + "\n") * 5000)
    return [{"name": "grep", "arguments": {"pattern": "(a|aa)+$b"}}]


def setup_glob(ws: Path) -> list[dict[str, Any]]:
    for ch in "abd":
        (ws / ("a" * 200 + ch)).write_text("x")
    return [{"name": "glob", "arguments": {"pattern": "**/*a*a*a*a*a*c"}}]


def setup_fifos(ws: Path) -> list[dict[str, Any]]:
    calls = []
    for i in range(12):
        os.mkfifo(ws / f"pipe{i}")
        calls.append({"name": "read_file", "arguments": {"path": f"pipe{i}"}})
    return calls


def setup_setsid(ws: Path) -> list[dict[str, Any]]:
    command = "setsid sh -c 'exec sleep 1000' & wait"  # ends by its 5 s timeout, child killed
    return [{"name": "bash", "arguments": {"command": command, "timeout": 5}}]


SCENARIOS = {
    "grep (a*)*b on 27 chars": setup_grep,
    "grep (a|aa)+$b, 5000 lines": setup_long_grep,
    "glob *a*a*a*a*a*c, 200-char names": setup_glob,
    "read_file on 12 FIFOs": setup_fifos,
    "bash with a setsid child": setup_setsid,
}


async def timed(coro: Any) -> float:
    start = time.perf_counter()
    await asyncio.wait_for(coro, 120)
    return time.perf_counter() - start


async def scenario(name: str, setup: Any) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="agentd-bench-"))
    ws = tmp / "ws"
    ws.mkdir()
    calls = setup(ws)
    steps = [{"tool_calls": calls}, {"text": "done"}, {"text": "done"}]
    provider = ScriptedProvider.from_dict({"loop": False, "steps": steps})
    settings = Settings(
        home=tmp, database_url=f"sqlite+aiosqlite:///{tmp / 'bench.db'}", provider=ProviderName.SCRIPTED,
        permission_mode=PermissionMode.BYPASS, rate_limit_per_s=0, max_sessions_per_principal=0,
    )  # fmt: skip
    async with serve_in_background(create_app(settings, provider=provider)) as base:
        a, b = await WsClient.connect(base), await WsClient.connect(base)
        sid_a = (await a.call("session/new", {"cwd": str(ws), "mcpServers": []}))["sessionId"]
        started = time.perf_counter()
        prompt = asyncio.create_task(a.request("session/prompt", text_prompt(sid_a, "go")))

        def running(msg: dict[str, Any]) -> bool:
            update = msg.get("params", {}).get("update", {})
            return update.get("sessionUpdate") == "tool_call_update" and update.get("status") == "in_progress"

        await a.wait_notification(running, within=60)
        async with httpx.AsyncClient(base_url=base) as http:
            health = await timed(http.get("/healthz"))
        sid_b: dict[str, str] = {}

        async def new_b() -> None:
            sid_b["id"] = (await b.call("session/new", {"cwd": str(ws), "mcpServers": []}))["sessionId"]

        new = await timed(new_b())
        turn = await timed(b.call("session/prompt", text_prompt(sid_b["id"], "hello")))
        await asyncio.wait_for(prompt, 120)
        total = time.perf_counter() - started
        print(
            f"{name:38s} healthz {health * 1000:7.1f} ms   session/new {new * 1000:7.1f} ms   "
            f"B's turn {turn * 1000:7.1f} ms   A's turn {total:6.2f} s"
        )
        for client in (a, b):
            await client.close()


async def main() -> None:
    rg = find_rg()
    print(f"grep engine: {'ripgrep ' + rg if rg else 'the regex module'}")
    for name, setup in SCENARIOS.items():
        await scenario(name, setup)


if __name__ == "__main__":
    asyncio.run(main())
