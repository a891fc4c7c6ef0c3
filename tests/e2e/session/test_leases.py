"""Several replicas on one Postgres (R-C1, issue 15 item 1): a session is owned by one
replica at a time, under a lease with a fencing token. Two real `agentd serve` processes
share a database: the owner is paused (SIGSTOP) past its lease while a turn runs, the other
replica takes the session over (R-E6 recovery), the first is resumed — it drops its actor,
its client is told to resync, and nothing it wrote after losing the lease is in the log
(the database refuses a stale token: tests/unit/store/test_fencing.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from agentd.protocol.agentd import ATTACH
from agentd.protocol.methods import Notification
from tests.support.client import WsClient, text_prompt
from tests.support.polling import until, value_of
from tests.support.replicas import two_replicas
from tests.support.session import new_session

# A turn that goes on writing: every step streams a little and calls a tool (durable events).
SCRIPT = [{"text": "Looking once more.", "chunk_size": 4, "chunk_delay": 0.02, "tool_calls": [
    {"name": "list_dir", "arguments": {"path": "."}}]}]  # fmt: skip

pytestmark = pytest.mark.timeout(240)


def _asyncpg_dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


async def _fences(dsn: str, sid: str) -> list[tuple[int, int | None]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT seq, fence FROM events WHERE session_id = $1 ORDER BY seq", sid)
    finally:
        await conn.close()
    return [(r["seq"], r["fence"]) for r in rows]


async def _lease(dsn: str, sid: str) -> tuple[str, int]:
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow("SELECT owner, token FROM session_leases WHERE session_id = $1", sid)
    finally:
        await conn.close()
    assert row is not None
    return str(row["owner"]), int(row["token"])


def _tool_calls(client: WsClient, sid: str) -> int:
    return sum(1 for u in client.updates(sid) if u["sessionUpdate"] == "tool_call")


async def test_a_paused_owner_loses_the_session_and_none_of_its_late_writes_land(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    # A long lease: A's runs out only when the test says so (while A is stopped), never
    # because a loaded machine starved a renewal.
    async with two_replicas(tmp_path, SCRIPT, permission_mode="bypass", lease_ttl_s="8") as replicas:
        a, b = replicas.a, replicas.b
        dsn = _asyncpg_dsn(replicas.url)
        ca = await WsClient.connect(a.base_url)
        cb = await WsClient.connect(b.base_url)
        sid = await new_session(ca, workspace)
        assert await _lease(dsn, sid) == ("replica-a", 1)
        # B serves an attach to a session A owns from the log (item 2: test_routing.py).
        watched = await cb.call(ATTACH, {"sessionId": sid, "afterSeq": 0})
        assert watched["snapshot"]["ownedBy"] == "replica-a", watched

        prompt = asyncio.create_task(ca.request("session/prompt", text_prompt(sid, "go on")))
        await until(lambda: _tool_calls(ca, sid) >= 2, what="A's turn writing")
        os.kill(a.pid, signal.SIGSTOP)
        try:
            await replicas.expire_lease(sid)  # A stayed stopped past its lease

            async def take_over() -> dict[str, Any] | None:
                resp = await cb.request(ATTACH, {"sessionId": sid, "afterSeq": 0})
                if "ownedBy" in resp["result"]["snapshot"]:
                    return None  # watched from the log until A's lease ran out
                return dict(resp["result"])

            await value_of(take_over, what="B taking the session over")
            assert await _lease(dsn, sid) == ("replica-b", 2)
            at_takeover = await _fences(dsn, sid)
        finally:
            os.kill(a.pid, signal.SIGCONT)

        # A finds out (its renewal, or the database refusing its next write): the actor
        # is dropped and its client told to resync.
        resync = await ca.wait_notification(
            lambda m: m["method"] == Notification.RESYNC_REQUIRED and m["params"]["sessionId"] == sid,
            within=60,
        )
        assert resync["params"]["reason"] in ("lease_lost", "session_failed")
        await until(lambda: prompt.done(), what="A answering its prompt")
        a_log = await a.output()
        # (By its renewal, its next write refused, or — stopped past its own deadline on a
        # loaded machine — its own clock. A refused write is refused by the fence, or, when B
        # already wrote the same message index, by the unique index first: Postgres does not
        # order a statement's CTEs; either way the actor stops and nothing of A's lands.)
        found_out = (
            "lease was lost",
            "agentd_stale_fence",
            "lease ran out unrenewed",
            "its actor stops after a refused write",
        )
        assert any(why in a_log for why in found_out), a_log[-3000:]
        # Re-attaching to A now watches it from the log: B owns the session.
        again = await ca.call(ATTACH, {"sessionId": sid, "afterSeq": 0})
        assert again["snapshot"]["ownedBy"] == "replica-b", again

        final = await _fences(dsn, sid)
        assert [s for s, _ in final] == list(range(1, len(final) + 1))  # one log, no gap
        ours = [row for row in final if row[1] == 1]
        assert ours == [row for row in at_takeover if row[1] == 1]  # nothing of A's after
        assert {f for _, f in final[len(ours) :]} <= {2}  # the rest is B's
        assert any(f == 2 for _, f in final)  # B recovered the interrupted turn (R-E6)
        for client in (ca, cb):
            with contextlib.suppress(Exception):
                await client.close()
