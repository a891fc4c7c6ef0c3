"""Retry buckets survive successes, turns and restarts; a sliding window forgives old
failures (issue 16 item 10, R-R2), through a real server and the scripted provider.

Seed 003: "PersistentRetryStateGuard…在构造时加载、drop 时写回，让桶计数跨 turn 存活，同一
session 里昨天烧掉的三次 network 重试今天仍然计入桶". Today a successful call resets every
provider bucket, so a storm spread over turns never exhausts. Our decay rule: a failure
counts for 48 h (`limits.retry.window_s`); a session that hit its limits last week works.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.protocol.jsonrpc import ErrorCode
from agentd.store.db import Batch, Store
from tests.support.client import text_prompt
from tests.support.clock import DAY
from tests.support.server import scripted
from tests.support.session import events, served_session

FAST = {"retry": {"backoff_base_s": 0.001, "jitter": 0.0}}  # backoff in ms: nothing to wait for
BLIP = {"error": {"kind": "network", "message": "connection reset by peer"}}


def decisions(client: Any, sid: str) -> list[tuple[str, str, int]]:
    return [(r["decision"], r["bucket"], r["attempt"]) for r in events(client, sid, "retry")]


async def test_a_network_storm_spread_over_turns_still_exhausts_its_bucket(server_factory, workspace: Path):
    """Seed 003: "让桶计数跨 turn 存活" — four turns each heal after one network error; the
    fifth turn's error is the fifth in the bucket (limit 4) and ends the turn exhausted."""
    steps = [step for n in range(4) for step in (BLIP, {"text": f"ok {n}"})]
    provider = scripted(*steps, BLIP, {"text": "a reset bucket would get here"})
    async with served_session(server_factory, workspace, provider, limits=FAST) as (_, client, sid):
        for n in range(4):
            result = await client.call("session/prompt", text_prompt(sid, f"turn {n}"))
            assert result["stopReason"] == "end_turn"
        resp = await client.request("session/prompt", text_prompt(sid, "turn 4"))
        assert resp["error"]["code"] == ErrorCode.TURN_FAILED
        assert resp["error"]["data"]["kind"] == "network"
        assert decisions(client, sid) == [
            *[("continue", "network", n) for n in range(1, 5)],
            ("exhausted", "network", 5),
        ]
        usage = await client.call("_agentd/usage/get", {"sessionId": sid})
        network = usage["retry"]["buckets"]["network"]
        assert (network["count"], network["limit"], network["exhausted"]) == (5, 4, True)
        assert usage["retry"]["windowSeconds"] == 48 * 3600
    assert len(provider.requests) == 9  # the last step was never served


async def _age_stored_failures(db_url: str, sid: str, seconds: float) -> None:
    """Time passes while the server is down: every stored failure is `seconds` older."""
    store = await Store.open(db_url)
    try:
        record = await store.get_session(sid)
        assert record is not None and record.retry_state
        state = dict(record.retry_state)
        state["failures"] = {b: [t - seconds for t in ts] for b, ts in state.get("failures", {}).items()}
        await store.commit([Batch(sid, session_fields={"retry_state": state})])
    finally:
        await store.close()


async def test_a_session_that_hit_its_limits_last_week_works_today(
    server_factory, workspace: Path, db_url: str
):
    """Seed 003 keeps counts across turns and restarts; the window keeps that from poisoning
    a long-lived session: a week later a network blip is retried again."""
    exhausting = scripted(*[BLIP] * 5, {"text": "never"})
    async with served_session(server_factory, workspace, exhausting, limits=FAST, database_url=db_url) as (
        _,
        client,
        sid,
    ):
        resp = await client.request("session/prompt", text_prompt(sid, "last week"))
        assert resp["error"]["data"]["kind"] == "network"
        assert decisions(client, sid)[-1] == ("exhausted", "network", 5)

    # One day later (after a restart) the bucket is still exhausted: the first blip ends the turn.
    await _age_stored_failures(db_url, sid, DAY)
    provider = scripted(BLIP, {"text": "never"})
    async with server_factory(provider, limits=FAST, database_url=db_url) as server:
        client = await server.client()
        await client.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        resp = await client.request("session/prompt", text_prompt(sid, "the next day"))
        assert resp["error"]["data"]["kind"] == "network"
        assert [(d, b) for d, b, _ in decisions(client, sid)] == [("exhausted", "network")]
        await client.close()

    await _age_stored_failures(db_url, sid, 7 * DAY)
    provider = scripted(BLIP, {"text": "Working again."})
    async with server_factory(provider, limits=FAST, database_url=db_url) as server:
        client = await server.client()
        await client.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        before = await client.call("_agentd/usage/get", {"sessionId": sid})
        assert before["retry"]["buckets"] == {}
        result = await client.call("session/prompt", text_prompt(sid, "a week later"))
        assert result["stopReason"] == "end_turn"
        assert decisions(client, sid) == [("continue", "network", 1)]
        after = await client.call("_agentd/usage/get", {"sessionId": sid})
        assert after["retry"]["buckets"]["network"]["count"] == 1
        await client.close()
