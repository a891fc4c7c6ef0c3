"""Parallel takeover (issue 26 item 6; prints figures, no asserts).

    .venv/bin/python bench/takeover.py [--sessions 100] [--lease-ttl 2] [--survivors 2]

Real `agentd serve` replicas on one fresh Postgres database (scripted provider): replica A
runs a slow turn in each of `--sessions` sessions and is killed (`kill -9`); the survivors'
sweeps claim its sessions in batches and recover them. Watched from the database every
50 ms: seconds from the kill to the first and the last session leased by a survivor and to
the last one recovered (its interrupted turn closed), against the bound lease TTL + sweep
interval + 2 s; the split between the survivors; sessions taken more than once (a fencing
token moved by more than one).

Needs Postgres (AGENTD_TEST_PG_DSN, default postgresql://postgres@127.0.0.1:5432/postgres).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import tempfile
import time
from pathlib import Path

import asyncpg
from turnkit import pg_available, postgres_database

from agentd.protocol.agentd import ENQUEUE
from agentd.session.replicas.takeover import sweep_interval
from tests.support.client import WsClient, text_prompt
from tests.support.polling import until
from tests.support.proc import AgentdProcess, agentd_serve, write_script

SLOW = [{"text": "".join(f"w{i} " for i in range(60)), "chunk_size": 4, "chunk_delay": 4.0}]


async def _start_turns(replica: AgentdProcess, workspace: Path, n: int) -> tuple[WsClient, list[str]]:
    client = await WsClient.connect(replica.base_url)
    sids: list[str] = []
    new = {"cwd": str(workspace), "mcpServers": []}
    for start in range(0, n, 20):
        batch = await asyncio.gather(
            *(client.call("session/new", new) for _ in range(start, min(n, start + 20)))
        )
        sids += [r["sessionId"] for r in batch]
    for start in range(0, n, 20):
        await asyncio.gather(*(client.call(ENQUEUE, text_prompt(s, "go")) for s in sids[start : start + 20]))
    return client, sids


async def _state(db: asyncpg.Connection, sids: list[str]) -> tuple[dict[str, tuple[str, int]], int, int]:
    """(leases, sessions running a turn, sessions with an interrupted turn closed)."""
    leases = {
        r["session_id"]: (r["owner"], r["token"])
        for r in await db.fetch(
            "SELECT session_id, owner, token FROM session_leases WHERE session_id = ANY($1)", sids
        )
    }
    running = await db.fetchval(
        "SELECT count(*) FROM sessions WHERE running_turn IS NOT NULL AND id = ANY($1)", sids
    )
    ended = await db.fetch(
        "SELECT session_id, payload FROM events WHERE kind = 'turn_ended' AND session_id = ANY($1)",
        sids,
    )
    recovered = {r["session_id"] for r in ended if json.loads(r["payload"]).get("outcome") == "interrupted"}
    return leases, int(running), len(recovered)


async def _all_running(db: asyncpg.Connection, sids: list[str]) -> bool:
    return (await _state(db, sids))[1] == len(sids)


async def _watch(db: asyncpg.Connection, sids: list[str], before: dict[str, tuple[str, int]]) -> str:
    t0 = time.perf_counter()
    first = last_leased = None
    while True:
        leases, _, recovered = await _state(db, sids)
        moved = [s for s in sids if leases[s][1] > before[s][1]]
        now = time.perf_counter() - t0
        if moved and first is None:
            first = now
        if len(moved) == len(sids) and last_leased is None:
            last_leased = now
        if recovered == len(sids) and last_leased is not None:
            break
        if now > 120:
            return f"not all resumed after 120 s: {len(moved)} leased, {recovered} recovered"
        await asyncio.sleep(0.05)
    split: dict[str, int] = {}
    for s in sids:
        split[leases[s][0]] = split.get(leases[s][0], 0) + 1
    twice = sum(1 for s in sids if leases[s][1] > before[s][1] + 1)
    return (
        f"first leased {first:.2f} s, all leased {last_leased:.2f} s, all resumed {now:.2f} s; "
        f"split {dict(sorted(split.items()))}; taken more than once: {twice}"
    )


async def main(args: argparse.Namespace) -> None:
    if not await pg_available():
        print("postgres skipped (not reachable)")
        return
    home = Path(tempfile.mkdtemp(prefix="agentd-bench-takeover-"))
    workspace = home / "ws"
    workspace.mkdir()
    script = str(write_script(home / "slow.json", SLOW, loop=True))
    ttl = args.lease_ttl
    bound = ttl + sweep_interval(ttl) + 2.0
    try:
        async with postgres_database() as url, contextlib.AsyncExitStack() as stack:
            settings = {"permission_mode": "bypass", "lease_ttl_s": str(ttl), "rate_limit_per_s": "0"}
            names = ["replica-a", *(f"replica-{chr(ord('b') + i)}" for i in range(args.survivors))]
            servers = {}
            for rid in names:
                serve = agentd_serve(
                    home / rid, f"{rid}.log", replica_id=rid, database_url=url, script=script, **settings
                )
                servers[rid] = await stack.enter_async_context(serve)
            db = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
            try:
                client, sids = await _start_turns(servers["replica-a"], workspace, args.sessions)
                await until(lambda: _all_running(db, sids), 60, what="every turn running on A")
                before = (await _state(db, sids))[0]
                await servers["replica-a"].kill9()
                figures = await _watch(db, sids, before)
                print(
                    f"sessions={args.sessions} lease_ttl={ttl:g} s survivors={args.survivors} "
                    f"bound={bound:g} s: {figures}",
                    flush=True,
                )
                await client.close()
            finally:
                await db.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--lease-ttl", type=float, default=2.0)
    parser.add_argument("--survivors", type=int, default=2)
    asyncio.run(main(parser.parse_args()))
