"""Bursts queue, never fail (issue 32, item 4): a real `agentd serve` whose request pool has
one connection and a pool timeout far shorter than the burst takes gets many simultaneous
`session/new` + `session/prompt`, each on its own WebSocket, and every one completes —
each request waits for the connection until its own deadline, not the pool's fixed
timeout (which would refuse most of them as "overloaded"). On SQLite and Postgres.

And a larger burst (issue 32 item 4, "1,000 simultaneous"; 300 here, what CI affords)
against a two-connection pool and three-second leases, so that most `session/new` wait for a
connection for longer than a lease lasts: each session's lease runs from when its
connection was had, and the renewals keep up with the burst (on Postgres, where a session
dropped for a lease it thinks ran out fails its prompt)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.client import WsClient, text_prompt
from tests.support.proc import agentd_serve, write_script

BURST = 60
BIG_BURST = 300


async def new_and_prompt(client: WsClient, workspace: Path) -> str:
    sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
    return str((await client.call("session/prompt", text_prompt(sid, "hi")))["stopReason"])


async def test_a_burst_on_a_one_connection_pool_completes(db_url: str, tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    script = write_script(tmp_path / "script.json", [{"text": "ok"}])
    async with agentd_serve(
        tmp_path / "home",
        database_url=db_url,
        script=str(script),
        db_pool_size="1",
        db_pool_overflow="0",
        db_pool_timeout_s="0.05",  # the fixed wait that used to refuse a burst
        rate_limit_per_s="0",  # one principal sends the whole burst: not what is tested here
    ) as server:
        clients = await asyncio.gather(*(WsClient.connect(server.base_url) for _ in range(BURST)))
        try:
            stops = await asyncio.gather(*(new_and_prompt(c, workspace) for c in clients))
        finally:
            await asyncio.gather(*(c.close() for c in clients))
        assert stops == ["end_turn"] * BURST
        assert "overloaded" not in await server.output()


async def test_a_burst_waiting_longer_than_a_lease_for_its_connection_completes(
    db_url: str, tmp_path: Path
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    script = write_script(tmp_path / "script.json", [{"text": "ok"}])
    async with agentd_serve(
        tmp_path / "home",
        database_url=db_url,
        script=str(script),
        db_pool_size="2",
        db_pool_overflow="0",
        db_pool_timeout_s="0.05",
        # Far shorter than the burst's waits for a connection (session/new took 0.5-15 s,
        # median 11 s, 595 of 600 over 3 s at load 20; seconds on an idle host), so a lease
        # counted from the request, not from the connection, runs out; but not 1 s: a
        # server starved of CPU for 2.5 s (the lease + LATE_GRACE_S) on a loaded host
        # really loses its leases, which is not what this test is about.
        lease_ttl_s="3",
        rate_limit_per_s="0",
    ) as server:
        connecting = (WsClient.connect(server.base_url, open_timeout=60) for _ in range(BIG_BURST))
        clients = await asyncio.gather(*connecting)
        try:
            stops = await asyncio.gather(*(new_and_prompt(c, workspace) for c in clients))
        finally:
            await asyncio.gather(*(c.close() for c in clients))
        assert stops == ["end_turn"] * BIG_BURST
        output = await server.output()
        for failure in ("overloaded", "ran out unrenewed", "lease was lost"):
            assert failure not in output, output[-3000:]
