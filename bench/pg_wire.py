"""Postgres messages per turn, by connection: agentd and the floor's relay (prints figures; no asserts).

    .venv/bin/python bench/pg_wire.py [--turns 50] [--kinds trivial,one-tool] [--tree DIR]

Both processes of bench/floor.py (a real `agentd serve` and the bare relay replaying its
recorded turn) reach Postgres through a proxy in this process (tests/support/pg_wire.py)
that forwards every byte unchanged and reads the protocol on the way: per connection, the
frontend messages (Query, Parse, Bind, Execute, Sync …) with each executed statement's
text, the backend messages (CommandComplete, NotificationResponse with its channel,
ReadyForQuery …) and the chunks each way (≈ the client's socket writes and reads). After
warm-up turns, the measured turns alternate agentd and relay; printed per process and
connection (named by what it sends: the listener, the group commit, …), per turn. Time-driven
work (lease renewals, the listener's ping, the takeover sweep) shows as fractions. No agentd
code is touched: it only sees another port in its database URL.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import floor
import turnkit
from turnkit import TOOL_MARK, agentd_server, model_process

from tests.support.client import WsClient
from tests.support.pg_wire import PgWire, per_turn


async def main(args: argparse.Namespace) -> None:
    original = turnkit.postgres_database
    labels = [k for k in ("trivial", "one-tool") if k in args.kinds.split(",")]
    async with PgWire() as proxy:

        @asynccontextmanager
        async def proxied() -> AsyncIterator[str]:
            async with original() as url:
                yield proxy.url_of(url)

        turnkit.postgres_database = proxied  # type: ignore[assignment]
        floor.postgres_database = proxied  # type: ignore[assignment]
        with model_process() as model_url:
            script = await floor.record("postgres", model_url)
            async with agentd_server("postgres", model_url) as agentd:
                client = await WsClient.connect(agentd.base)
                await client.call("session/new", {"cwd": str(agentd.workspace), "mcpServers": []})
                await client.close()
                async with floor.relay_process("postgres", agentd, script, model_url) as relay:
                    adb, rdb = agentd.db_url.rsplit("/", 1)[1], relay.db_url.rsplit("/", 1)[1]
                    for label in labels:
                        await measure(label, agentd, relay, proxy, adb, rdb, args.turns)


async def measure(
    label: str, agentd: turnkit.Server, relay: turnkit.Server, proxy: PgWire, adb: str, rdb: str, turns: int
) -> None:
    text = f"{TOOL_MARK} please" if label == "one-tool" else "hi"
    new = {"cwd": str(agentd.workspace), "mcpServers": []}
    ca, cr = await WsClient.connect(agentd.base), await WsClient.connect(relay.base)
    sids = [(await ca.call("session/new", new))["sessionId"] for _ in range(-(-turns // 10))]
    rsid = (await cr.call("session/new", new))["sessionId"]
    for sid in sids:  # each session warmed (its first turn loads it)
        await floor.turn(agentd, ca, sid, text)
        await floor.turn(relay, cr, rsid, text)
    before = proxy.snapshot()
    for i in range(turns):
        await floor.turn(agentd, ca, sids[i // 10], text)
        await floor.turn(relay, cr, rsid, text)
    await ca.close()
    await cr.close()
    print(f"{label}: {turns} turns, Postgres messages per turn", flush=True)
    for line in per_turn(proxy.since(before, adb), turns, "agentd"):
        print(line, flush=True)
    for line in per_turn(proxy.since(before, rdb), turns, "relay"):
        print(line, flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--kinds", default="trivial,one-tool", help="which turns: trivial,one-tool")
    parser.add_argument("--tree", help="whose `agentd serve` (a source tree, e.g. a `git archive` of a base)")
    ns = parser.parse_args()
    if ns.tree:
        turnkit.ROOT = Path(ns.tree).resolve()
    asyncio.run(main(ns))
