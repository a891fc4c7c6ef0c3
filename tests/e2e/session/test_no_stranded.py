"""No client stranded, each seq once in one form (issue 26 items 2 and 3), with real
`agentd serve` replicas on one Postgres.

- A watcher on a non-owner replica gets, for every seq, exactly the frames a watcher on
  the owner gets — once each, in order, the same assembled text (before: a message's final
  text came twice under one seq, as a `final` chunk and as the `agent_message` event).
- The LISTEN connections are cut (`pg_terminate_backend`): what committed meanwhile still
  reaches the non-owner's watcher with no gap, and a prompt routed through the non-owner
  afterwards is served (before: it stayed `pending` for good).
- The owner is paused (SIGSTOP) past its lease: once it runs again its clients are told
  `_agentd/resync_required` (`lease_lost`) within the lease time + 2 s, and a watcher on
  the other replica keeps following the log whoever writes it next.
- The owner is killed (`kill -9`) mid-turn with watchers on both other replicas: one of
  them takes the session over, and both watchers get every seq once, in order, the same
  frames — whichever of them is the new owner (before: a third replica's client got seqs
  twice after a failover).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from agentd.protocol.agentd import ATTACH, ENQUEUE
from agentd.protocol.methods import Notification
from agentd.session.replicas.leases import LATE_GRACE_S
from agentd.store.notify import LISTEN_APPLICATION_NAME
from tests.support.client import WsClient, text_prompt
from tests.support.frames import transcript
from tests.support.polling import until, value_of
from tests.support.proc import write_script
from tests.support.replicas import Replicas, replicas, two_replicas
from tests.support.session import new_session

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

# Each turn streams text, calls a tool, then streams its answer: chunks, tool calls,
# final texts and usage — every kind of frame a watcher renders.
SCRIPT: list[dict[str, Any]] = [
    {
        "text": "Looking around first.",
        "chunk_size": 4,
        "chunk_delay": 0.005,
        "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}],
    },
    {"text": "All done here, nothing else to see.", "chunk_size": 5, "chunk_delay": 0.005},
]
TTL_S = 5.0  # short, so the pause and kill tests are quick; not shorter: a loaded machine renews late


def _dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


@contextlib.asynccontextmanager
async def database(replicas: Replicas) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(_dsn(replicas.url))
    try:
        yield conn
    finally:
        await conn.close()


def durable_frames(client: WsClient, sid: str) -> list[tuple[int, dict[str, Any]]]:
    """(seq, frame) of every durable notification of the session, in arrival order."""
    out = []
    for f in client.frames:
        if not (isinstance(f, dict) and "method" in f and "id" not in f):
            continue
        params = f.get("params") or {}
        meta = (params.get("_meta") or {}).get("agentd") or {}
        if params.get("sessionId") == sid and "seq" in meta and not meta.get("transient"):
            out.append((int(meta["seq"]), f))
    return out


def seqs_once(client: WsClient, sid: str) -> list[int]:
    """The seqs received, one entry per run of frames with the same seq (an event with
    several content blocks has several frames): a seq sent twice shows up twice."""
    seqs: list[int] = []
    for seq, _ in durable_frames(client, sid):
        if not seqs or seqs[-1] != seq:
            seqs.append(seq)
    return seqs


def one_frame_per_seq(client: WsClient, sid: str) -> bool:
    """Each durable event reached the client in one frame (these prompts have one content
    block each): never a second form of the same seq."""
    seqs = [seq for seq, _ in durable_frames(client, sid)]
    return len(seqs) == len(set(seqs))


def at_end(client: WsClient, sid: str, last: int) -> bool:
    got = seqs_once(client, sid)
    return bool(got) and got[-1] >= last


async def last_seq(db: asyncpg.Connection, sid: str) -> int:
    return int(await db.fetchval("SELECT coalesce(max(seq), 0) FROM events WHERE session_id = $1", sid))


async def attach(client: WsClient, sid: str, after: int = 0) -> dict[str, Any]:
    result: dict[str, Any] = await client.call(ATTACH, {"sessionId": sid, "afterSeq": after})
    return result


async def prompt(client: WsClient, sid: str, text: str) -> None:
    result = await client.call("session/prompt", text_prompt(sid, text))
    assert result["stopReason"] == "end_turn", result


def resyncs(client: WsClient, sid: str) -> list[dict[str, Any]]:
    return [
        f["params"]
        for f in client.frames
        if isinstance(f, dict)
        and f.get("method") == Notification.RESYNC_REQUIRED
        and f["params"].get("sessionId") == sid
    ]


async def test_a_non_owner_watcher_gets_the_owners_frames_each_seq_once(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with two_replicas(tmp_path, SCRIPT, permission_mode="bypass") as replicas, database(replicas) as db:
        driver = await WsClient.connect(replicas.a.base_url)
        sid = await new_session(driver, workspace)
        on_owner = await WsClient.connect(replicas.a.base_url)
        elsewhere = await WsClient.connect(replicas.b.base_url)
        assert "ownedBy" not in (await attach(on_owner, sid))["snapshot"]
        assert (await attach(elsewhere, sid))["snapshot"]["ownedBy"] == "replica-a"

        await prompt(driver, sid, "look around")
        await prompt(driver, sid, "and once more")
        last = await last_seq(db, sid)
        for watcher in (on_owner, elsewhere):
            await until(lambda w=watcher: at_end(w, sid, last), what="the watcher at the log's end")

        # Every seq once, in order, no gap — on both replicas.
        assert seqs_once(on_owner, sid) == seqs_once(elsewhere, sid) == list(range(1, last + 1))
        assert one_frame_per_seq(elsewhere, sid)
        # For each seq the very same frames (the message's end, not a second copy of its text).
        assert durable_frames(elsewhere, sid) == durable_frames(on_owner, sid)
        ends = [f for _, f in durable_frames(elsewhere, sid) if f["params"].get("kind") == "agent_message"]
        assert len(ends) == 4, "one `agent_message` event per answer"
        # The same text assembled on both (the non-owner got it whole, transient, first).
        assert transcript(elsewhere.frames, sid) == transcript(on_owner.frames, sid)
        for client in (driver, on_owner, elsewhere):
            await client.close()


async def test_cut_listen_connections_leave_nothing_behind(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with (
        two_replicas(tmp_path, SCRIPT, permission_mode="bypass") as replicas,
        database(replicas) as db,
    ):
        driver = await WsClient.connect(replicas.a.base_url)
        sid = await new_session(driver, workspace)
        watcher = await WsClient.connect(replicas.b.base_url)
        via_b = await WsClient.connect(replicas.b.base_url)
        await attach(watcher, sid)
        await prompt(driver, sid, "before the cut")
        first = await last_seq(db, sid)
        await until(lambda: at_end(watcher, sid, first), what="B watching")

        find = "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()"
        before = {r["pid"] for r in await db.fetch(find, LISTEN_APPLICATION_NAME)}
        assert len(before) == 2, before  # one per replica
        cut = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = any($1::int[])"
        await db.execute(cut, list(before))
        # Committed while the listeners are away: their NOTIFYs go nowhere.
        await prompt(driver, sid, "during the cut")

        async def reconnected() -> bool:
            now = {r["pid"] for r in await db.fetch(find, LISTEN_APPLICATION_NAME)}
            return len(now) == 2 and not now & before

        await until(reconnected, what="both replicas LISTENing again")
        # A prompt sent through B reaches A (NOTIFY on A's channel), its answer comes back.
        await prompt(via_b, sid, "routed after the cut")
        await prompt(driver, sid, "after the cut")
        last = await last_seq(db, sid)
        await until(lambda: at_end(watcher, sid, last), what="B's watcher at the log's end")
        assert seqs_once(watcher, sid) == list(range(1, last + 1)), "a gap or a duplicate"
        assert not resyncs(watcher, sid)
        pending = await db.fetchval("SELECT count(*) FROM routed_commands WHERE state = 'pending'")
        assert pending == 0
        for client in (driver, watcher, via_b):
            await client.close()


async def test_a_storm_of_cut_connections_strands_no_watcher(tmp_path: Path) -> None:
    """Every backend of the database cut at once (a Postgres failover, a pgbouncer
    restart): the non-owner's watcher catches up from the log (its reads retried), so it
    has every seq once when the session goes on."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with two_replicas(tmp_path, SCRIPT, permission_mode="bypass") as replicas, database(replicas) as db:
        driver = await WsClient.connect(replicas.a.base_url)
        sid = await new_session(driver, workspace)
        watcher = await WsClient.connect(replicas.b.base_url)
        await attach(watcher, sid)
        await prompt(driver, sid, "before the storm")
        for _ in range(3):
            await db.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )

        async def prompted() -> bool:
            # The owner may answer a retryable error while its connections come back.
            resp = await driver.request("session/prompt", text_prompt(sid, "after", requestId="after-storm"))
            return (resp.get("result") or {}).get("stopReason") == "end_turn"

        await until(prompted, what="a prompt going through after the storm")
        last = await last_seq(db, sid)
        await until(
            lambda: at_end(watcher, sid, last) or resyncs(watcher, sid),
            what="the watcher at the end, or told",
        )
        got = seqs_once(watcher, sid)
        assert got == list(range(1, len(got) + 1)), "a gap or a duplicate"
        assert got[-1] == last and not resyncs(watcher, sid), "B's watcher should have caught up by itself"
        for client in (driver, watcher):
            await client.close()


async def test_clients_of_a_paused_owner_hear_it_lost_the_lease(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with (
        two_replicas(tmp_path, SCRIPT, permission_mode="bypass", lease_ttl_s=str(TTL_S)) as replicas,
        database(replicas) as db,
    ):
        a = replicas.a
        driver = await WsClient.connect(a.base_url)
        sid = await new_session(driver, workspace)
        on_owner = await WsClient.connect(a.base_url)
        elsewhere = await WsClient.connect(replicas.b.base_url)
        await attach(on_owner, sid)
        await attach(elsewhere, sid)
        await prompt(driver, sid, "before the pause")
        seen = await last_seq(db, sid)

        os.kill(a.pid, signal.SIGSTOP)
        try:
            # Paused until its lease has run out by the database's clock, and A's grace
            # for a merely busy machine too (nobody takes the idle session over: the
            # database alone would let A renew it).
            ran_out = (
                "SELECT expires_at + make_interval(secs => $2) < now() "
                "FROM session_leases WHERE session_id = $1"
            )
            await until(lambda: db.fetchval(ran_out, sid, LATE_GRACE_S + 0.2), what="A's lease running out")
        finally:
            os.kill(a.pid, signal.SIGCONT)

        def lease_lost(m: dict[str, Any]) -> bool:
            return m["method"] == Notification.RESYNC_REQUIRED and m["params"]["sessionId"] == sid

        # The bound is the acceptance's: within the lease time + 2 s (it is not a benchmark).
        told = await on_owner.wait_notification(lease_lost, within=TTL_S + 2)
        assert told["params"]["reason"] == "lease_lost"
        assert told["params"]["lastSeq"] == seqs_once(on_owner, sid)[-1] == seen  # it resumes from there
        assert not resyncs(elsewhere, sid)  # the log goes on: nothing to resync

        assert resyncs(driver, sid)[-1]["reason"] == "lease_lost"  # every client of it

        # Re-attached from their cursor, the clients go on; the other replica's watcher
        # follows the log whoever writes it now.
        await attach(on_owner, sid, seen)
        await attach(driver, sid, seen)
        await prompt(driver, sid, "after the pause")
        last = await last_seq(db, sid)
        for watcher in (on_owner, elsewhere):
            await until(lambda w=watcher: at_end(w, sid, last), what="the watcher at the log's end")
        assert seqs_once(elsewhere, sid) == list(range(1, last + 1))
        assert [s for s in seqs_once(on_owner, sid) if s > seen] == list(range(seen + 1, last + 1))
        for client in (driver, on_owner, elsewhere):
            await client.close()


SLOW = [{"text": "".join(f"word{i} " for i in range(300)), "chunk_size": 4, "chunk_delay": 0.02}]
QUICK = [{"text": "The queued prompt's answer.", "chunk_size": 8, "chunk_delay": 0.01}]


async def test_watchers_on_the_survivors_get_each_seq_once_across_a_kill(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    slow = write_script(tmp_path / "slow.json", SLOW, loop=True)
    quick = write_script(tmp_path / "quick.json", QUICK, loop=True)
    scripts = {"replica-a": slow, "replica-b": quick, "replica-c": quick}
    async with (
        replicas(tmp_path, scripts, permission_mode="bypass", lease_ttl_s=str(TTL_S)) as started,
        database(started) as db,
    ):
        driver = await WsClient.connect(started.a.base_url)
        sid = await new_session(driver, workspace)
        watchers = [await WsClient.connect(started.servers[r].base_url) for r in ("replica-b", "replica-c")]
        for watcher in watchers:
            assert (await attach(watcher, sid))["snapshot"]["ownedBy"] == "replica-a"
        turn = asyncio.create_task(driver.request("session/prompt", text_prompt(sid, "Tell me slowly.")))
        await until(lambda: len(driver.updates(sid)) > 10, what="A streaming")
        await driver.call(ENQUEUE, text_prompt(sid, "Then this one."))
        await until(lambda: at_end(watchers[0], sid, 3), what="B following A's turn")
        await started.a.kill9()
        turn.cancel()

        async def queue_ran() -> int | None:
            ended = await db.fetchval(
                "SELECT count(*) FROM events WHERE session_id = $1 AND kind = 'turn_ended'", sid
            )
            return await last_seq(db, sid) if ended == 2 else None

        last = await value_of(queue_ran, within=60, what="a survivor taking over and running the queue")
        owner = await db.fetchval("SELECT owner FROM session_leases WHERE session_id = $1", sid)
        assert owner in ("replica-b", "replica-c")
        for watcher in watchers:
            await until(lambda w=watcher: at_end(w, sid, last), what="the watcher at the log's end")
            assert seqs_once(watcher, sid) == list(range(1, last + 1)), "a gap or a duplicate"
            assert one_frame_per_seq(watcher, sid)
            assert not resyncs(watcher, sid)
        assert durable_frames(watchers[0], sid) == durable_frames(watchers[1], sid)
        assert transcript(watchers[0].frames, sid) == transcript(watchers[1].frames, sid)
        for client in watchers:
            await client.close()
