"""Routing carries on and survives a flood (issue 26 item 5), with two real replicas on one
Postgres:
- a prompt sent through replica B right after the owner A was killed (`kill -9`) is
  carried by the server — withdrawn from dead A once its lease has run out, made again on
  B with the same requestId — and answered: the client sees latency, not `owner_lost`, and
  the prompt ran once;
- with a one-connection pool, a flood of routed prompts gets only typed, retryable errors
  (`-32019`, `data.retryable`), never an internal one; every prompt retried with its
  requestId is answered, none ran twice, and B's router keeps serving (no task of it died)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.support.client import RpcFailed, WsClient, text_prompt
from tests.support.polling import value_of
from tests.support.replicas import two_replicas
from tests.support.session import new_session

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(180)]

SCRIPT: list[dict[str, Any]] = [{"text": "Done."}]


async def _turns(url: str, sid: str) -> list[str | None]:
    """The requestIds of the session's started turns, in order."""
    db = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        rows = await db.fetch(
            "SELECT payload FROM events WHERE session_id = $1 AND kind = 'turn_started' ORDER BY seq", sid
        )
        owner = await db.fetchval("SELECT owner FROM session_leases WHERE session_id = $1", sid)
    finally:
        await db.close()
    return [json.loads(r["payload"]).get("requestId") for r in rows] + [f"owner={owner}"]


async def _created(client: WsClient, workspace: Path) -> str | None:
    """A new session's id; None when the tiny pool said "retry" (-32019)."""
    try:
        return await new_session(client, workspace)
    except RpcFailed as exc:
        if exc.error["code"] != -32019:
            raise
        return None


async def test_a_prompt_sent_right_after_the_owner_was_killed_is_carried_to_a_live_replica(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    settings = {"permission_mode": "bypass", "lease_ttl_s": "2", "rate_limit_per_s": "0"}
    async with two_replicas(tmp_path, SCRIPT, **settings) as cluster:
        ca = await WsClient.connect(cluster.a.base_url)
        cb = await WsClient.connect(cluster.b.base_url)
        sid = await new_session(ca, workspace)
        await ca.call("session/prompt", text_prompt(sid, "first", requestId="r-1"))  # A runs it
        await cluster.a.kill9()
        answer = await cb.request("session/prompt", text_prompt(sid, "second", requestId="r-2"))
        assert "error" not in answer, answer  # latency, not owner_lost
        assert answer["result"]["stopReason"] == "end_turn", answer
        assert await _turns(cluster.url, sid) == ["r-1", "r-2", "owner=replica-b"]  # ran once, on B
        again = await cb.request("session/prompt", text_prompt(sid, "third"))  # B runs it now
        assert again["result"]["stopReason"] == "end_turn", again
        await cb.close()


async def test_a_flood_on_a_one_connection_pool_gets_typed_retryable_errors_and_routing_goes_on(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    settings = {
        "permission_mode": "bypass", "rate_limit_per_s": "0",
        "db_pool_size": "1", "db_pool_overflow": "0", "db_pool_timeout_s": "0.05",
        # A request waits for a connection only until its own deadline (issue 32): a short
        # one makes the flood run the pool out, which is what this test is about.
        "request_deadline_s": "0.05",
    }  # fmt: skip
    async with two_replicas(tmp_path, SCRIPT, **settings) as cluster:
        ca = await WsClient.connect(cluster.a.base_url)
        sids = [await value_of(lambda: _created(ca, workspace), what="a session created") for _ in range(30)]
        flood = [await WsClient.connect(cluster.b.base_url) for _ in sids]

        async def prompt(client: WsClient, sid: str) -> dict[str, Any]:
            return await client.request("session/prompt", text_prompt(sid, "go", requestId=f"flood-{sid}"))

        answers = await asyncio.gather(*(prompt(c, s) for c, s in zip(flood, sids, strict=True)))
        errors = [a["error"] for a in answers if "error" in a]
        assert errors, "the one-connection pool never ran out: not a flood"
        for error in errors:
            assert error["code"] in (-32019, -32021), error  # never -32603
            assert error["data"]["retryable"] is True, error
        assert any(e["code"] == -32019 and e["data"].get("limit") == "db_pool" for e in errors), errors
        # Retried one at a time with their requestIds: every prompt answered, none ran twice.
        for client, sid, first in zip(flood, sids, answers, strict=True):
            if "error" in first:

                async def retry(c: WsClient = client, s: str = sid) -> dict[str, Any] | None:
                    resp = await prompt(c, s)
                    return None if resp.get("error", {}).get("code") == -32019 else resp

                retried = await value_of(retry, what="a retried prompt answered")
                assert retried["result"]["stopReason"] == "end_turn", retried
            assert (await _turns(cluster.url, sid))[:-1] == [f"flood-{sid}"]
        log = await cluster.b.output()
        assert "Task exception was never retrieved" not in log
        assert "a routing task failed" not in log
        for client in [ca, *flood]:
            await client.close()
