"""Live text on a non-owner replica (issue 26 item 4; prints figures, no asserts).

    .venv/bin/python bench/live_chunks.py [--sessions 1,8] [--turns 4] [--chunks 100]
                                          [--gap-ms 20] [--brokers notify,redis] [--smoke]

Two real `agentd serve` replicas on one fresh Postgres database, their OpenAI provider pointed
at a fake model in this process that streams `--chunks` numbered chunks `--gap-ms` apart and
notes when each one left. Per session: a client on the owner (replica 1) prompts; a client on
the other replica (2) attached to the same session watches — the owner's clients get each chunk
from its actor, the other's through the broker. In one run, side by side, for each broker
(Postgres NOTIFY; Redis pub/sub when AGENTD_REDIS_URL / --redis-url points at one):

- chunk delay p50/p99 (ms) on each client: its arrival − the model sending it (one clock);
- the difference of the two p99s (the acceptance: ≤ 50 ms) and the per-chunk lag (non-owner
  arrival − owner arrival) p50/p99;
- chunks the non-owner did not get as chunks (lost in the broker: the text came whole with the
  message's end instead).

`--sessions 1,8`: with 1 session streaming, then 8 at once (each its own pair of clients).
Needs Postgres (AGENTD_TEST_PG_DSN); without it prints "postgres skipped (not reachable)".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replicas import _Stamped, _stamped_client, cluster
from turnkit import CHUNK_WIDTH, numbered_answer, pct, pg_available

from tests.support.client import WsClient, text_prompt
from tests.support.fakes.openai_server import Completion, FakeOpenAI
from tests.support.polling import until

ATTACH = "_agentd/session/attach"


@dataclass
class Figures:
    owner: list[float] = field(default_factory=list)  # seconds, per chunk (pct gives ms)
    other: list[float] = field(default_factory=list)
    lag: list[float] = field(default_factory=list)  # other − owner, per chunk
    chunks: int = 0
    missed: int = 0  # chunks the non-owner never got as a chunk


def chunk_arrivals(client: WsClient, ws: _Stamped, sid: str) -> dict[int, float]:
    """Chunk number → when it arrived (perf_counter), from the client's stamped frames."""
    out: dict[int, float] = {}
    for frame, at in zip(client.frames, ws.stamps, strict=False):
        params = frame.get("params") if isinstance(frame, dict) else None
        if not isinstance(params, dict) or params.get("sessionId") != sid:
            continue
        update = params.get("update") or {}
        meta = (params.get("_meta") or {}).get("agentd") or {}
        if update.get("sessionUpdate") != "agent_message_chunk" or meta.get("final"):
            continue
        text = update["content"]["text"]
        for i in range(0, len(text) - CHUNK_WIDTH + 1, CHUNK_WIDTH):  # a late tail may join chunks
            out.setdefault(int(text[i : i + CHUNK_WIDTH]), at)
    return out


def ended(client: WsClient, sid: str, turns: int) -> bool:
    n = 0
    for f in client.frames:
        params = f.get("params") if isinstance(f, dict) else None
        if isinstance(params, dict) and params.get("sessionId") == sid and params.get("kind") == "turn_ended":
            n += 1
    return n >= turns


class Model(FakeOpenAI):
    """Each request gets a fresh numbered answer whose blocks' send times are kept."""

    def __init__(self, chunks: int, gap_s: float) -> None:
        super().__init__(validate=False)
        self.chunks, self.gap_s = chunks, gap_s
        self.sent: dict[str, list[float]] = {}  # the request's first user text → block send times

    async def _handle(self, request: Any) -> Any:
        body = await request.json()
        key = next(str(m["content"]) for m in reversed(body["messages"]) if m["role"] == "user")
        stamps = self.sent.setdefault(key, [])
        self.enqueue(Completion(content=numbered_answer(self.chunks), chunk_delay=self.gap_s, sent_at=stamps))
        self.requests.clear()
        return await super()._handle(request)


async def one_session(
    base_a: str, base_b: str, workspace: Path, model: Model, turns: int, tag: str
) -> Figures:
    owner, owner_ws = await _stamped_client(base_a)
    other, other_ws = await _stamped_client(base_b)
    figures = Figures()
    try:
        sid = (await owner.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        await other.call(ATTACH, {"sessionId": sid, "afterSeq": 0})
        for turn in range(turns):
            prompt = f"{tag} turn {turn}"
            for ws, client in ((owner_ws, owner), (other_ws, other)):
                ws.stamps.clear()
                client.frames.clear()
            await owner.call("session/prompt", text_prompt(sid, prompt))
            await until(lambda: ended(other, sid, 1), 30, what="the turn's end on the other replica")
            sent = model.sent.pop(prompt, [])[1:]  # block 0: the role chunk
            here = chunk_arrivals(owner, owner_ws, sid)
            there = chunk_arrivals(other, other_ws, sid)
            for i, at in enumerate(sent[: model.chunks]):
                figures.chunks += 1
                if i in here:
                    figures.owner.append(here[i] - at)
                if i not in there:
                    figures.missed += 1
                    continue
                figures.other.append(there[i] - at)
                if i in here:
                    figures.lag.append(there[i] - here[i])
    finally:
        await owner.close()
        await other.close()
    return figures


def report(broker: str, sessions: int, parts: list[Figures]) -> str:
    f = Figures()
    for p in parts:
        f.owner += p.owner
        f.other += p.other
        f.lag += p.lag
        f.chunks += p.chunks
        f.missed += p.missed
    if not f.owner or not f.other:
        return (
            f"{broker:6} sessions={sessions}: no chunks measured (owner {len(f.owner)}, other {len(f.other)})"
        )
    o50, o99, n50, n99 = pct(f.owner, 50), pct(f.owner, 99), pct(f.other, 50), pct(f.other, 99)
    verdict = "ok" if n99 - o99 <= 50 else "OVER 50 ms"
    return (
        f"{broker:6} sessions={sessions:<3} chunks={f.chunks:<6} owner p50={o50:6.1f} p99={o99:6.1f} ms | "
        f"non-owner p50={n50:6.1f} p99={n99:6.1f} ms | p99 diff={n99 - o99:+6.1f} ms ({verdict}) | "
        f"lag p50={pct(f.lag, 50):5.1f} p99={pct(f.lag, 99):5.1f} ms | missed={f.missed}"
    )


async def run_broker(broker: str, redis_url: str, args: argparse.Namespace, model: Model) -> list[str]:
    env = {"AGENTD_REDIS_URL": redis_url} if broker == "redis" else {}
    lines = []
    async with cluster(model.base_url, 10.0, **env) as c:
        a, b = await asyncio.gather(c.start_replica(), c.start_replica())  # replica-1 owns the sessions
        if not args.smoke:
            await one_session(a.base, b.base, c.workspace, model, 1, f"{broker} warm")  # not counted
        for sessions in args.sessions:
            tags = [f"{broker} s{sessions} n{i}" for i in range(sessions)]
            parts = await asyncio.gather(
                *(one_session(a.base, b.base, c.workspace, model, args.turns, t) for t in tags)
            )
            lines.append(report(broker, sessions, list(parts)))
            print(lines[-1], flush=True)
    return lines


async def main(args: argparse.Namespace) -> None:
    if not await pg_available():
        print("postgres skipped (not reachable)")
        return
    brokers = args.brokers
    if "redis" in brokers and not await redis_reachable(args.redis_url):
        print(f"redis skipped (not reachable at {args.redis_url})")
        brokers = [b for b in brokers if b != "redis"]
    print(
        f"live chunks: {args.chunks} chunks {args.gap_ms} ms apart per turn, {args.turns} turns per session; "
        "owner client vs a client on the other replica, same stream"
    )
    with Model(args.chunks, args.gap_ms / 1000) as model:
        for broker in brokers:
            await run_broker(broker, args.redis_url, args, model)


async def redis_reachable(url: str) -> bool:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(url, socket_connect_timeout=3)
    try:
        return bool(await client.ping())
    except (aioredis.RedisError, OSError):
        return False
    finally:
        with contextlib.suppress(Exception):
            await client.aclose()


if __name__ == "__main__":
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--sessions", default="1,8", help="sessions streaming at once, per step")
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--gap-ms", type=float, default=20.0)
    parser.add_argument("--brokers", default="notify,redis")
    parser.add_argument("--redis-url", default=os.environ.get("AGENTD_REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--smoke", action="store_true", help="a quick run: 1 session, 1 turn, 20 chunks")
    ns = parser.parse_args()
    ns.sessions = [int(x) for x in str(ns.sessions).split(",") if x]
    ns.brokers = [x for x in str(ns.brokers).split(",") if x]
    if ns.smoke:
        ns.sessions, ns.turns, ns.chunks = [1], 1, 20
    asyncio.run(main(ns))
