"""Parallel takeover (issue 26 item 6): three real replicas on one Postgres. Replica A runs
a turn in each of 100 sessions and is killed (`kill -9`); B and C claim A's sessions in
batches as their leases run out and load them side by side — all resumed (the interrupted
turn recovered, the lease a survivor's), each taken by exactly one survivor (its fencing
token moved once, one recovery in its log), and both survivors shared the work. The time
against the promised lease TTL + sweep interval + 2 s is bench/takeover.py's figure. A
replica restarted with the same id takes its sessions back at once, long before their
leases could run out."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import asyncpg
import pytest

from agentd.protocol.agentd import ENQUEUE
from agentd.session.replicas.takeover import sweep_interval
from tests.support.client import WsClient, text_prompt
from tests.support.polling import until, value_of
from tests.support.proc import agentd_serve, write_script
from tests.support.replicas import replicas
from tests.support.session import new_session

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240)]

TTL_S = 2.0
SESSIONS = 100
# A turn that streams for a minute, lightly: it is running when its replica is killed.
SLOW = [{"text": "".join(f"w{i} " for i in range(60)), "chunk_size": 4, "chunk_delay": 4.0}]
QUICK = [{"text": "ok"}]
SURVIVORS = ("replica-b", "replica-c")


async def _start_turns(base_url: str, workspace: Path, n: int) -> tuple[WsClient, list[str]]:
    """`n` sessions on the replica at `base_url`, each with a queued prompt now running."""
    client = await WsClient.connect(base_url)
    sids: list[str] = []
    for start in range(0, n, 20):  # a few at a time: the replica's pool is not a flood test
        sids += await asyncio.gather(
            *(new_session(client, workspace) for _ in range(start, min(n, start + 20)))
        )
    for start in range(0, n, 20):
        await asyncio.gather(*(client.call(ENQUEUE, text_prompt(s, "go")) for s in sids[start : start + 20]))
    return client, sids


async def _running(db: asyncpg.Connection, sids: list[str]) -> bool:
    n = await db.fetchval(
        "SELECT count(*) FROM sessions WHERE running_turn IS NOT NULL AND id = ANY($1)", sids
    )
    return int(n) == len(sids)


async def _leases(db: asyncpg.Connection, sids: list[str]) -> dict[str, tuple[str, int]]:
    rows = await db.fetch(
        "SELECT session_id, owner, token FROM session_leases WHERE session_id = ANY($1)", sids
    )
    return {r["session_id"]: (r["owner"], r["token"]) for r in rows}


async def _recovered(db: asyncpg.Connection, sids: list[str]) -> dict[str, int]:
    """Session → how many interrupted turns were closed in its log (by a recovery)."""
    rows = await db.fetch(
        "SELECT session_id, payload FROM events WHERE kind = 'turn_ended' AND session_id = ANY($1)", sids
    )
    out: dict[str, int] = {}
    for r in rows:
        if json.loads(r["payload"]).get("outcome") == "interrupted":
            out[r["session_id"]] = out.get(r["session_id"], 0) + 1
    return out


def _taken(log_text: str) -> int:
    return sum(int(n) for n in re.findall(r"took over (\d+) session\(s\)", log_text))


def _sweep_lines(log_text: str) -> list[str]:
    """A replica's log lines about its takeover sweeps (its last 20), ids cut: for a failure message."""
    words = ("took over", "sweep", "claiming", "taking it over", "turn machinery")
    return [line[:160] for line in log_text.splitlines() if any(w in line for w in words)][-20:]


async def test_the_sessions_of_a_killed_replica_are_resumed_in_parallel_each_once(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    slow = write_script(tmp_path / "slow.json", SLOW, loop=True)
    quick = write_script(tmp_path / "quick.json", QUICK, loop=True)
    scripts = {"replica-a": slow, "replica-b": quick, "replica-c": quick}
    settings = {"permission_mode": "bypass", "lease_ttl_s": str(TTL_S), "rate_limit_per_s": "0"}
    async with replicas(tmp_path, scripts, **settings) as cluster:
        db = await asyncpg.connect(cluster.url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            client, sids = await _start_turns(cluster.a.base_url, workspace, SESSIONS)
            await until(lambda: _running(db, sids), 60, what="every turn running on A")
            before = await _leases(db, sids)
            assert {owner for owner, _ in before.values()} == {"replica-a"}

            await cluster.a.kill9()
            # The promise is TTL + sweep + 2 s (bench/takeover.py measures it: ~3–4 s here);
            # the test's deadline leaves room for a loaded CI host (no timed assert), and
            # still fails a takeover gone serial again (issue 26: up to 56 s for ten).
            bound = 3 * (TTL_S + sweep_interval(TTL_S) + 2.0)

            async def all_resumed() -> bool:
                leases, recovered = await _leases(db, sids), await _recovered(db, sids)
                return len(recovered) == SESSIONS and all(leases[s][0] in SURVIVORS for s in sids)

            await until(
                all_resumed, bound, what=f"all {SESSIONS} sessions resumed within {bound:g}s of the kill"
            )

            after = await _leases(db, sids)
            assert all(after[s][1] == before[s][1] + 1 for s in sids), "a session was taken more than once"
            assert set((await _recovered(db, sids)).values()) == {1}  # one recovery each

            # A sweep logs what it took once all its loads are done, a moment after the
            # database shows them: wait for the lines rather than read them at once.
            async def logged() -> dict[str, int] | None:
                counts = {rid: _taken(await cluster.servers[rid].output()) for rid in SURVIVORS}
                return counts if sum(counts.values()) >= SESSIONS else None

            taken = await value_of(logged, 30, what="each survivor's takeover logged")
            assert sum(taken.values()) == SESSIONS, taken
            if not all(n > 0 for n in taken.values()):  # the survivors shared the work
                # What each survivor's sweeps said (once failed in CI: one took all 100).
                said = {rid: _sweep_lines(await cluster.servers[rid].output()) for rid in SURVIVORS}
                raise AssertionError(f"one survivor took every session: {taken}; their sweeps: {said}")
            by_lease = {rid: sum(1 for s in sids if after[s][0] == rid) for rid in SURVIVORS}
            assert by_lease == taken
            await client.close()
        finally:
            await db.close()


async def test_a_replica_restarted_with_the_same_id_takes_its_sessions_back_at_once(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    slow = write_script(tmp_path / "slow.json", SLOW, loop=True)
    ttl = "60"  # nobody else could take them before a minute
    settings = {"permission_mode": "bypass", "lease_ttl_s": ttl, "rate_limit_per_s": "0"}
    async with replicas(tmp_path, {"replica-a": slow, "replica-b": slow}, **settings) as cluster:
        db = await asyncpg.connect(cluster.url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            client, sids = await _start_turns(cluster.a.base_url, workspace, 10)
            await until(lambda: _running(db, sids), 30, what="every turn running on A")
            before = await _leases(db, sids)
            await cluster.a.kill9()
            await client.close()
            home = tmp_path / "replica-a"
            async with agentd_serve(
                home,
                "replica-a-again.log",
                replica_id="replica-a",
                database_url=cluster.url,
                script=str(slow),
                **settings,
            ):
                # At start, not after the minute its previous process's leases still run.
                await until(lambda: _all_back(db, sids, before), 20, what="A taking its sessions back")
        finally:
            await db.close()


async def _all_back(db: asyncpg.Connection, sids: list[str], before: dict[str, tuple[str, int]]) -> bool:
    leases, recovered = await _leases(db, sids), await _recovered(db, sids)
    return len(recovered) == len(sids) and all(leases[s] == ("replica-a", before[s][1] + 1) for s in sids)
