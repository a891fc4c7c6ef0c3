"""Issue 29 item 6, at the unit: MCP servers start in parallel, each within its own
timeout (the default, or its spec's `_meta.agentd.startTimeoutSeconds`); one that fails
or hangs is a failure of its own, never an exception; a start that is given up (the
client went away) leaves no server process behind. Real stdio servers, unconfined."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from agentd.tools.mcp.client import McpConnections, McpFailureKind, parse_specs
from tests.support.mcp import calc_stdio
from tests.support.polling import until


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_failures_are_listed_per_server_and_the_others_start(tmp_path: Path) -> None:
    specs = parse_specs(
        [
            calc_stdio(),
            calc_stdio("--hang", name="slow", start_timeout=0.5),
            calc_stdio("--crash", name="broken"),
        ]
    )
    conns = McpConnections(specs, tmp_path / "logs", start_timeout=60)
    try:
        tools = await conns.start()
        assert {"mcp__calc__add", "mcp__calc__peek"} <= set(tools)
        assert [(f.server, f.kind) for f in conns.failures] == [
            ("slow", McpFailureKind.TIMEOUT),
            ("broken", McpFailureKind.FAILED),
        ]
        assert conns.failures[0].message.startswith("MCP server 'slow' did not start within 0.5s")
        added = await tools["mcp__calc__add"].session.call_tool("add", {"a": 1, "b": 2})
        assert added.content[0].text == "3"
    finally:
        await conns.close()
    assert "calc: refusing to start" in (tmp_path / "logs" / "mcp-broken.log").read_text()


async def test_a_start_given_up_leaves_no_server_running(tmp_path: Path) -> None:
    pidfile = tmp_path / "hang.pid"
    specs = parse_specs([calc_stdio("--hang", str(pidfile))])
    conns = McpConnections(specs, tmp_path / "logs", start_timeout=60)
    start = asyncio.create_task(conns.start())
    await until(lambda: pidfile.exists() and pidfile.read_text(), what="the server to be up")
    pid = int(pidfile.read_text())
    assert alive(pid)
    start.cancel()
    with pytest.raises(asyncio.CancelledError):
        await start
    assert not alive(pid)  # ended and reaped before the cancelled start returned
