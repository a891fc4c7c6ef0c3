"""Database faults under a real `agentd serve` on Postgres (issue 26 items 1 and 7).

While a client enqueues prompts with requestIds, every backend of the server's database is
terminated again and again (`pg_terminate_backend`: the group commit's connection, the
pool's, the lease renewal's, LISTEN): every enqueue is either acknowledged — and then its
prompt is in the store and runs exactly once — or answered a typed error that says to
retry, and its retry with the same requestId is acknowledged; the session keeps its lease
(same token, no `resync_required`), and `/readyz` is ready again once the database is."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy.engine import make_url

from agentd.protocol.agentd import ENQUEUE
from tests.support.client import WsClient, text_prompt, ws_client
from tests.support.databases import PG_ADMIN_DSN, postgres_database
from tests.support.polling import until, value_of
from tests.support.proc import write_script
from tests.support.replicas import replicas
from tests.support.server import scripted
from tests.support.session import new_session

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

MAX_PER_DRIVER = 100
SESSIONS = 3
TERMINATIONS = 8
RESYNC = "_agentd/resync_required"


async def _terminate_all(db: str) -> int:
    """pg_terminate_backend of every backend of this test's database (and no other)."""
    admin = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        sql = (
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = $1 AND pid <> pg_backend_pid()"
        )
        return int(await admin.fetchval(sql, db))
    finally:
        await admin.close()


async def _ended_by_request(url: str, sid: str) -> dict[str, int]:
    """requestId → how many `turn_ended` events the log holds for it."""
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        rows = await conn.fetch(
            "SELECT payload->>'requestId' AS rid, count(*) AS n FROM events "
            "WHERE session_id = $1 AND kind = 'turn_ended' GROUP BY 1",
            sid,
        )
        return {str(r["rid"]): int(r["n"]) for r in rows if r["rid"] is not None}
    finally:
        await conn.close()


async def _lease_token(url: str, sid: str) -> int:
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        return int(await conn.fetchval("SELECT token FROM session_leases WHERE session_id = $1", sid))
    finally:
        await conn.close()


async def _enqueue_until_acked(client: WsClient, sid: str, rid: str, errors: list[dict[str, Any]]) -> None:
    """Enqueue; on an error it must say to retry — then the same requestId again."""
    async with asyncio.timeout(60):
        while True:
            resp = await client.request(ENQUEUE, text_prompt(sid, f"prompt {rid}", requestId=rid))
            if "result" in resp:
                return
            error = resp["error"]
            if error["data"].get("limit") == "rate":  # this loop outran the rate limit: it
                await asyncio.sleep(float(error["data"]["retryAfter"]))  # says when to retry
                continue
            errors.append(error)
            assert error["data"]["retryable"] is True, error  # typed: never a bare -32603
            await asyncio.sleep(min(float(error["data"].get("retryAfter", 0.1)), 0.2))  # the backoff asked


async def _ready(base_url: str) -> bool:
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        return (await http.get("/readyz")).status_code == 200


async def test_every_acked_enqueue_is_stored_and_run_once_through_backend_terminations(
    tmp_path: Path, workspace: Path
) -> None:
    script = write_script(tmp_path / "script.json", [{"text": "done"}], loop=True)
    async with replicas(tmp_path, {"replica-a": script}, lease_ttl_s="3") as cluster:
        server, url = cluster.a, cluster.url
        db = str(make_url(url).database)
        client = await ws_client(server.base_url)
        sids = [await new_session(client, workspace) for _ in range(SESSIONS)]
        tokens = [await _lease_token(url, sid) for sid in sids]
        errors: list[dict[str, Any]] = []
        rids: dict[str, list[str]] = {sid: [] for sid in sids}
        resetting = True

        async def driver(sid: str) -> None:
            # Enqueues go on all through the resets (bounded), one session per driver.
            n = 0
            while resetting and n < MAX_PER_DRIVER:
                rid = f"{sid[-6:]}-{n}"
                rids[sid].append(rid)
                await _enqueue_until_acked(client, sid, rid, errors)
                n += 1

        async def terminations() -> int:
            nonlocal resetting
            killed = 0
            await until(lambda: all(rids.values()), 30, what="the drivers under way")
            for _ in range(TERMINATIONS):
                killed += await _terminate_all(db)
                await asyncio.sleep(0.15)  # pacing between resets, not synchronisation
            resetting = False
            return killed

        async with asyncio.TaskGroup() as tg:
            resets = tg.create_task(terminations())
            for sid in sids:
                tg.create_task(driver(sid))
        assert resets.result() >= TERMINATIONS  # the faults really happened

        # Acknowledged ⇒ in the store: every prompt runs, each exactly once.
        for sid in sids:

            async def all_ran(sid: str = sid) -> dict[str, int] | None:
                ended = await _ended_by_request(url, sid)
                return ended if set(rids[sid]) <= set(ended) else None

            ended = await value_of(all_ran, 60, what="every acknowledged prompt's turn")
            assert {rid: ended[rid] for rid in rids[sid]} == dict.fromkeys(rids[sid], 1)
        # The errors a client saw were typed and retryable (checked as they came).
        assert all(e["code"] in (-32019, -32022) for e in errors), errors
        # Resets far shorter than the lease cost it nothing: same tokens, no resync.
        assert [await _lease_token(url, sid) for sid in sids] == tokens
        assert not [f for f in client.frames if isinstance(f, dict) and f.get("method") == RESYNC]
        await until(lambda: _ready(server.base_url), 30, what="ready once the database is back")
        log = await server.output()
        assert "another operation is in progress" not in log
        with contextlib.suppress(Exception):
            await client.close()


async def test_readyz_is_unavailable_while_group_commits_fail_and_the_ack_waits_for_the_commit(
    server_factory: Any, workspace: Path
) -> None:
    async with postgres_database() as url:
        async with server_factory(
            scripted({"text": "ok"}, loop=True), database_url=url, db_statement_timeout_s=0.5
        ) as server:
            client = await server.client()
            sid = await new_session(client, workspace)
            await until(lambda: _ready(server.base_url), 30, what="ready")
            # The event log locked away: every group commit times out, and is retried.
            locker = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
            try:
                tx = locker.transaction()
                await tx.start()
                await locker.execute("LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
                ack = asyncio.create_task(client.request(ENQUEUE, text_prompt(sid, "wait", requestId="r-1")))

                async def failing() -> dict[str, Any] | None:
                    async with httpx.AsyncClient(base_url=server.base_url, timeout=10) as http:
                        resp = await http.get("/readyz")
                    return resp.json() if resp.status_code == 503 else None

                body = await value_of(failing, 30, what="/readyz to report the failing commits")
                assert body["database"] == "failing" and "event log commits failing" in body["detail"]
                assert not ack.done()  # nothing is acknowledged before it is committed
                await tx.rollback()
            finally:
                await locker.close()
            resp = await asyncio.wait_for(ack, 30)
            assert "result" in resp, resp
            await until(lambda: _ready(server.base_url), 30, what="ready again once commits go through")

            async def ran() -> dict[str, int] | None:
                ended = await _ended_by_request(url, sid)
                return ended or None

            assert await value_of(ran, 30, what="the acknowledged prompt's turn") == {"r-1": 1}
            await client.close()


async def test_an_enqueue_whose_writes_are_refused_is_not_acked_and_its_retry_runs_once(
    server_factory: Any, workspace: Path
) -> None:
    async with postgres_database() as url:
        async with server_factory(
            scripted({"text": "ok"}, loop=True), database_url=url, lease_ttl_s=30
        ) as server:
            client = await server.client()
            sid = await new_session(client, workspace)
            # The lease row moves on under the live actor (as a takeover would): its next
            # writes carry a stale token, and the database refuses them.
            dsn = url.replace("postgresql+asyncpg://", "postgresql://")
            conn = await asyncpg.connect(dsn)
            try:
                await conn.execute("UPDATE session_leases SET token = token + 1 WHERE session_id = $1", sid)
            finally:
                await conn.close()
            resp = await client.request(ENQUEUE, text_prompt(sid, "refused", requestId="r-refused"))
            assert "error" in resp, resp  # never acknowledged: nothing of it is in the store
            error = resp["error"]
            assert error["code"] == -32022 and error["data"]["reason"] == "fence_refused", error
            assert error["data"]["retryable"] is True
            assert await _ended_by_request(url, sid) == {}
            # The retry (same requestId) reaches the reloaded session and is acknowledged.
            retried = await value_of(
                lambda: _acked(client, sid, "r-refused"), 30, what="the retry acknowledged"
            )
            assert retried["promptId"]

            async def ran() -> dict[str, int] | None:
                return await _ended_by_request(url, sid) or None

            assert await value_of(ran, 30, what="the retried prompt's turn") == {"r-refused": 1}
            await client.close()


async def _acked(client: WsClient, sid: str, rid: str) -> dict[str, Any] | None:
    resp = await client.request(ENQUEUE, text_prompt(sid, "refused", requestId=rid))
    if "error" in resp:
        assert resp["error"]["data"]["retryable"] is True, resp
        return None
    return dict(resp["result"])


async def test_a_queued_prompt_of_a_session_whose_writes_are_refused_is_told_to_retry_and_runs_once(
    server_factory: Any, workspace: Path
) -> None:
    slow = {"text": "".join(f"w{i} " for i in range(300)), "chunk_size": 4, "chunk_delay": 0.02}
    async with postgres_database() as url:
        async with server_factory(scripted(slow, loop=True), database_url=url, lease_ttl_s=30) as server:
            client = await server.client()
            sid = await new_session(client, workspace)
            running = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "first")))
            queued = asyncio.create_task(
                client.request("session/prompt", text_prompt(sid, "second", requestId="r-queued"))
            )
            dsn = url.replace("postgresql+asyncpg://", "postgresql://")

            async def stored() -> bool:
                conn = await asyncpg.connect(dsn)
                try:
                    n = await conn.fetchval(
                        "SELECT count(*) FROM queued_prompts WHERE request_id = 'r-queued'"
                    )
                    return int(n) == 1
                finally:
                    await conn.close()

            await until(stored, 30, what="the second prompt queued in the store")
            conn = await asyncpg.connect(dsn)
            try:  # the lease moves on under the live actor: its next writes are refused
                await conn.execute("UPDATE session_leases SET token = token + 1 WHERE session_id = $1", sid)
            finally:
                await conn.close()
            first, second = await asyncio.wait_for(asyncio.gather(running, queued), 30)
            for resp in (first, second):  # neither is told it ended, or that it was deferred
                assert "error" in resp and resp["error"]["data"]["retryable"] is True, resp
            assert second["error"]["code"] == -32022, second
            # The retry with the same requestId joins the stored prompt: it runs once.
            retried = await asyncio.wait_for(
                client.request("session/prompt", text_prompt(sid, "second", requestId="r-queued")), 60
            )
            assert retried.get("result", {}).get("stopReason") == "end_turn", retried

            async def ran() -> dict[str, int] | None:
                ended = await _ended_by_request(url, sid)
                return ended if "r-queued" in ended else None

            assert (await value_of(ran, 30, what="the queued prompt's turn"))["r-queued"] == 1
            await client.close()
