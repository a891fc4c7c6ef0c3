"""Failover across replicas (R-C1, R-E6; issue 15 items 3 and 4): three real `agentd
serve` processes share one Postgres. The replica running a turn is killed (`kill -9`);
another one takes the session over by itself once the lease runs out (its takeover sweep:
no client asks for the session), recovers it — the interrupted turn closed with the text
streamed so far kept, the queued prompt run exactly once — and a client reconnecting to
any replica continues from its last seq with no gap and no duplicate. A prompt retried
with the same requestId on another replica, while the failover is still under way, joins
the original's recovered outcome: it never runs twice."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from agentd.protocol.agentd import ATTACH, ENQUEUE
from tests.support.client import WsClient, text_prompt
from tests.support.polling import until, value_of
from tests.support.proc import AgentdProcess, write_script
from tests.support.replicas import replicas
from tests.support.session import new_session

ELSEWHERE = -32020
# Long enough that no live replica loses a lease because a loaded machine starved it; the
# killed owner's lease is expired by the test where waiting for it would only cost time.
TTL_S = "10"
SLOW_TEXT = "".join(f"word{i} " for i in range(400))  # streams for ~10 s: the kill lands mid-message
SLOW = [{"text": SLOW_TEXT, "chunk_size": 4, "chunk_delay": 0.02}]
QUICK_TEXT = "The queued prompt's answer."
QUICK = [{"text": QUICK_TEXT, "chunk_size": 8, "chunk_delay": 0.01}]
REPLICAS = ("replica-a", "replica-b", "replica-c")

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(180)]


@dataclass
class Cluster:
    db: asyncpg.Connection  # the test's own look at the shared database
    servers: dict[str, AgentdProcess]  # replica id → process

    async def rows(self, query: str, *args: Any) -> list[asyncpg.Record]:
        return list(await self.db.fetch(query, *args))

    async def log(self, sid: str) -> list[tuple[int, str, dict[str, Any], int | None]]:
        rows = await self.rows(
            "SELECT seq, kind, payload, fence FROM events WHERE session_id = $1 ORDER BY seq", sid
        )
        return [(r["seq"], r["kind"], json.loads(r["payload"]), r["fence"]) for r in rows]

    async def lease(self, sid: str) -> tuple[str, int]:
        (row,) = await self.rows("SELECT owner, token FROM session_leases WHERE session_id = $1", sid)
        return str(row["owner"]), int(row["token"])

    async def checkpointed(self, sid: str) -> bool:
        """The text streamed so far is in the session row (R-E1): a crash now keeps it."""
        (row,) = await self.rows("SELECT partial FROM sessions WHERE id = $1", sid)
        partial = json.loads(row["partial"]) if row["partial"] else None
        return bool(partial and any(m.get("text") for m in partial.get("messages", [])))


@contextlib.asynccontextmanager
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    """Replica A runs the slow script, B and C the quick one (each plays its own)."""
    slow = write_script(tmp_path / "slow.json", SLOW, loop=True)
    quick = write_script(tmp_path / "quick.json", QUICK, loop=True)
    scripts = {rid: slow if rid == "replica-a" else quick for rid in REPLICAS}
    async with replicas(tmp_path, scripts, permission_mode="bypass", lease_ttl_s=TTL_S) as started:
        db = await asyncpg.connect(started.url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            yield Cluster(db, started.servers)
        finally:
            await db.close()


def durable_seqs(client: WsClient, sid: str) -> list[int]:
    """The seqs of the durable events the client was sent for `sid`, in arrival order."""
    out = []
    for f in client.frames:
        if not (isinstance(f, dict) and "method" in f and "id" not in f):
            continue
        params = f.get("params") or {}
        meta = (params.get("_meta") or {}).get("agentd") or {}
        if params.get("sessionId") == sid and "seq" in meta and not meta.get("transient"):
            out.append(int(meta["seq"]))
    return out


def chunks_seen(client: WsClient, sid: str) -> int:
    return sum(1 for u in client.updates(sid) if u["sessionUpdate"] == "agent_message_chunk")


async def start_slow_turn(
    c: Cluster, workspace: Path, **meta: Any
) -> tuple[WsClient, str, asyncio.Task[Any]]:
    """A session on A with its slow turn streaming, the streamed text checkpointed."""
    ca = await WsClient.connect(c.servers["replica-a"].base_url)
    sid = await new_session(ca, workspace)
    assert await c.lease(sid) == ("replica-a", 1)
    prompt = asyncio.create_task(ca.request("session/prompt", text_prompt(sid, "Tell me slowly.", **meta)))
    await until(lambda: chunks_seen(ca, sid) >= 3, what="A streaming")
    await until(lambda: c.checkpointed(sid), what="A checkpointing the streamed text")
    return ca, sid, prompt


async def follow_owner(c: Cluster, first: str, send: Any, *, what: str) -> tuple[str, dict[str, Any]]:
    """What a client does during a failover: ask a replica; `owned_elsewhere` naming a live
    replica → ask that one; naming the dead one, or a retryable routing failure (the command
    was forwarded to the dead owner) → ask again once its lease may have run out."""
    target = first

    async def attempt() -> tuple[str, dict[str, Any]] | None:
        nonlocal target
        resp = await send(target)
        error = resp.get("error")
        if error is None:
            return target, resp
        if error["code"] != ELSEWHERE:
            # Routed to the dead owner: B gave up on it (`owner_lost`), a retryable answer
            # with its own code (-32021 route_failed).
            assert error["code"] == -32021, resp
            assert (error.get("data") or {}).get("retryable") is True, resp
            return None
        owner = error["data"]["owner"]
        if owner != "replica-a" and owner in c.servers:
            target = owner
        return None

    return await value_of(attempt, within=60, what=what)


async def test_a_killed_owner_is_taken_over_and_recovered_and_clients_continue(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    async with cluster(tmp_path) as c:
        ca, sid, prompt = await start_slow_turn(c, workspace, requestId="r-slow")
        ack = await ca.call(ENQUEUE, text_prompt(sid, "Then this one.", requestId="r-queued"))
        queued_id = ack["promptId"]
        assert await c.rows("SELECT id FROM queued_prompts WHERE session_id = $1", sid)
        await until(lambda: chunks_seen(ca, sid) >= 6, what="more of A's stream after the enqueue")
        last_seen = max(durable_seqs(ca, sid))
        await c.servers["replica-a"].kill9()
        prompt.cancel()
        await c.db.execute("UPDATE session_leases SET expires_at = now() WHERE session_id = $1", sid)

        # Nobody asks B or C for the session: one of them takes it over by itself.
        async def taken() -> tuple[str, int] | None:
            owner, token = await c.lease(sid)
            return (owner, token) if owner != "replica-a" else None

        owner, token = await value_of(taken, within=60, what="another replica taking the session over")
        assert owner in ("replica-b", "replica-c") and token == 2

        async def queue_ran() -> list[tuple[int, str, dict[str, Any], int | None]] | None:
            log = await c.log(sid)
            ended = [p for _, k, p, _ in log if k == "turn_ended" and p.get("promptId") == queued_id]
            return log if ended else None

        log = await value_of(queue_ran, within=60, what="the queued prompt running on the new owner")
        assert [s for s, *_ in log] == list(range(1, len(log) + 1))  # one log, no gap
        kinds = [(k, p) for _, k, p, _ in log]
        started = [p for k, p in kinds if k == "turn_started"]
        assert [p.get("requestId") for p in started] == ["r-slow", "r-queued"]  # each ran once
        user = [p for k, p in kinds if k == "user_message"]
        assert [p["promptId"] for p in user] == [started[0]["promptId"], queued_id]
        # R-E6: the interrupted turn is closed, the text streamed before the kill kept.
        slow_turn = started[0]["turnId"]
        ended = {p["turnId"]: p for k, p in kinds if k == "turn_ended"}
        assert ended[slow_turn]["outcome"] == "interrupted"
        assert ended[started[1]["turnId"]]["outcome"] == "completed"
        cut = [p for k, p in kinds if k == "agent_message" and p.get("interrupted")]
        assert len(cut) == 1 and cut[0]["text"] and SLOW_TEXT.startswith(cut[0]["text"])
        order = [k for k, p in kinds if k in ("turn_started", "turn_ended") or p is cut[0]]
        assert order == ["turn_started", "agent_message", "turn_ended", "turn_started", "turn_ended"]
        answers = [p["text"] for k, p in kinds if k == "agent_message" and not p.get("interrupted")]
        assert answers == [QUICK_TEXT]
        # A's writes, then the new owner's (the recovery onwards) under the next token.
        fences = [f for *_, f in log]
        assert fences == sorted(fences) and set(fences) == {1, 2}
        assert log[fences.index(2)][1] == "agent_message"  # the recovery's first write: the cut text
        (row,) = await c.rows("SELECT running_turn FROM sessions WHERE id = $1", sid)
        assert row["running_turn"] is None

        # The client reconnects — to the replica that is not the owner first, as a client
        # that knows nothing would — and continues from its last seq.
        other = next(r for r in REPLICAS if r not in ("replica-a", owner))
        clients: dict[str, WsClient] = {}

        async def attach(rid: str) -> dict[str, Any]:
            if rid not in clients:
                clients[rid] = await WsClient.connect(c.servers[rid].base_url)
            return await clients[rid].request(ATTACH, {"sessionId": sid, "afterSeq": last_seen})

        reached, _ = await follow_owner(c, other, attach, what="re-attaching after the failover")
        client = clients[reached]
        end = log[-1][0]
        await until(lambda: end in durable_seqs(client, sid), what="the replay reaching the log's end")
        assert durable_seqs(client, sid) == list(range(last_seen + 1, end + 1))  # no gap, no duplicate

        # The enqueue's requestId, retried on the replica that does not own the session
        # (following it to the owner): answered with the run it already had, not run again.
        retriers: dict[str, WsClient] = {}

        async def retry_queued(rid: str) -> dict[str, Any]:
            if rid not in retriers:
                retriers[rid] = await WsClient.connect(c.servers[rid].base_url)
            params = text_prompt(sid, "Then this one.", requestId="r-queued")
            return await retriers[rid].request("session/prompt", params)

        _, again = await follow_owner(c, other, retry_queued, what="the queued prompt's retry")
        assert again["result"]["stopReason"] == "end_turn", again
        after = [p.get("requestId") for _, k, p, _ in await c.log(sid) if k == "turn_started"]
        assert after == ["r-slow", "r-queued"]
        for each in (ca, *clients.values(), *retriers.values()):
            with contextlib.suppress(Exception):
                await each.close()


async def test_a_prompt_retried_on_another_replica_during_the_failover_never_runs_twice(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    async with cluster(tmp_path) as c:
        ca, sid, prompt = await start_slow_turn(c, workspace, requestId="r-1")
        await c.servers["replica-a"].kill9()
        prompt.cancel()
        # At once, while A's lease still runs: B says who owns it; the client retries
        # (following the owner named) until a live replica has the session.
        clients = {rid: await WsClient.connect(c.servers[rid].base_url) for rid in ("replica-b", "replica-c")}

        async def retry(rid: str) -> dict[str, Any]:
            return await clients[rid].request(
                "session/prompt", text_prompt(sid, "Tell me slowly.", requestId="r-1")
            )

        reached, answer = await follow_owner(c, "replica-b", retry, what="the retry being answered")
        assert answer["result"]["stopReason"] == "cancelled", answer  # the original's recovered end
        # The replica that answered runs the session, or forwarded the retry to the one
        # that took it over (routing): a survivor either way.
        assert (await c.lease(sid))[0] in ("replica-b", "replica-c")
        again = await retry(reached)  # and again: the same answer
        assert again["result"] == answer["result"]

        log = await c.log(sid)
        kinds = [(k, p) for _, k, p, _ in log]
        started = [p for k, p in kinds if k == "turn_started"]
        assert [p.get("requestId") for p in started] == ["r-1"]  # it never ran twice
        assert len([p for k, p in kinds if k == "user_message"]) == 1
        ended = [p for k, p in kinds if k == "turn_ended"]
        assert [(p["requestId"], p["outcome"]) for p in ended] == [("r-1", "interrupted")]
        for each in (ca, *clients.values()):
            with contextlib.suppress(Exception):
                await each.close()
