"""A deleted session ends for every client attached to it, on any replica (R-C1, R-P3).

Two real `agentd serve` processes on one Postgres, tokens on; Alice's sessions are owned
by replica A. Whether the delete is sent to A or to B (which forwards it to A), every
other client attached to the session — on A through its actor, on B through B's watch of
the log, an SSE stream on B too — gets `_agentd/resync_required` with `reason:
session_deleted` once the delete has committed, and is detached; attaching again, on
either replica, answers "not found" as for a session that never was. A rename on A
reaches B's watcher from the log (`session_info` is a durable event). The same on one
replica (no Postgres): the other clients of the deleted session are told and detached."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentd.protocol.jsonrpc import ErrorCode
from agentd.store.db import Store
from agentd.store.routed import lease_holder
from tests.support.client import WsClient
from tests.support.polling import until
from tests.support.replicas import two_replicas
from tests.support.server import scripted
from tests.support.session import new_session, resyncs
from tests.support.sse import sse

pytestmark = pytest.mark.timeout(180)

SCRIPT: list[dict[str, Any]] = [{"text": "ok"}]
ATTACH = "_agentd/session/attach"
DETACH = "_agentd/session/detach"
DELETED = "session_deleted"


def _titles(client: WsClient, sid: str) -> list[str]:
    return [u["title"] for u in client.updates(sid) if u.get("sessionUpdate") == "session_info_update"]


async def _told_deleted(client: WsClient, sid: str, what: str) -> None:
    """`client` was told the session was deleted, and it is no longer attached."""
    await until(lambda: resyncs(client, sid), what=what)
    assert [r["reason"] for r in resyncs(client, sid)] == [DELETED], resyncs(client, sid)
    assert await client.call(DETACH, {"sessionId": sid}) == {"detached": False}, what


async def _not_found(client: WsClient, sid: str, cwd: Path) -> None:
    """Attaching (and loading) the session answers as for a missing one."""
    for method, params in [
        (ATTACH, {"sessionId": sid, "afterSeq": 0}),
        ("session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": []}),
    ]:
        answer = await client.request(method, params)
        assert answer.get("error", {}).get("code") == ErrorCode.RESOURCE_NOT_FOUND, (method, answer)


async def test_a_delete_on_either_replica_detaches_every_replicas_watchers(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    cwd = root / "alice"
    cwd.mkdir(parents=True)
    async with two_replicas(
        tmp_path, SCRIPT, auth="token", workspace_root=str(root), lease_ttl_s="10"
    ) as replicas:
        a, b = replicas.a, replicas.b
        store = await Store.open(replicas.url)
        try:
            (alice,) = await replicas.tokens("alice")
            ca = await WsClient.connect(a.base_url, token=alice)  # creates (owns on A) and deletes on A
            wa = await WsClient.connect(a.base_url, token=alice)  # watches on A (the owner's actor)
            wb = await WsClient.connect(b.base_url, token=alice)  # watches on B (from the log)
            cb = await WsClient.connect(b.base_url, token=alice)  # deletes from B (routed to A)

            # 1. Rename on A: B's watcher gets the new title (a durable event, from the
            #    log), and a later attach on B shows it in the snapshot.
            first = await new_session(ca, cwd)
            assert await lease_holder(store.engine, first) == "replica-a"
            await wa.call(ATTACH, {"sessionId": first, "afterSeq": 0})
            await wb.call(ATTACH, {"sessionId": first, "afterSeq": 0})
            await ca.call("_agentd/session/rename", {"sessionId": first, "title": "renamed on A"})
            await until(lambda: "renamed on A" in _titles(wb, first), what="B's watcher sees the title")
            assert "renamed on A" in _titles(wa, first)
            snap = await cb.call(ATTACH, {"sessionId": first, "afterSeq": 0})
            assert snap["snapshot"]["title"] == "renamed on A", snap
            assert snap["snapshot"]["ownedBy"] == "replica-a", snap
            assert await cb.call(DETACH, {"sessionId": first}) == {"detached": True}

            # 2. An SSE viewer on B too; then Alice deletes it on A (its owner).
            async with sse(b.base_url, first, params={"after": 0, "token": alice}) as stream:
                await stream.until(lambda f: f.get("event") == "_agentd/session/snapshot")
                assert await ca.call("session/delete", {"sessionId": first}) == {}
                assert await store.get_session(first) is None
                await _told_deleted(wa, first, "A's other client told of the delete")
                await _told_deleted(wb, first, "B's watcher told of the delete")
                ended = await stream.until(lambda f: f.get("event") == "_agentd/resync_required")
                assert ended["data"]["reason"] == DELETED, ended
            assert resyncs(ca, first) == []  # the deleting client has its answer
            # 3. Attaching again, on either replica, answers "not found".
            for client in (ca, wa, wb, cb):
                await _not_found(client, first, cwd)

            # 4. A second session, deleted from B: forwarded to A, which stops its actor
            #    and deletes it; A's and B's watchers are both told and detached.
            second = await new_session(ca, cwd)
            await wa.call(ATTACH, {"sessionId": second, "afterSeq": 0})
            await wb.call(ATTACH, {"sessionId": second, "afterSeq": 0})
            await cb.call(ATTACH, {"sessionId": second, "afterSeq": 0})
            assert await cb.call("session/delete", {"sessionId": second}) == {}
            assert await store.get_session(second) is None
            await _told_deleted(wa, second, "A's watcher told of the delete sent to B")
            await _told_deleted(wb, second, "B's other watcher told of the delete sent to B")
            await _told_deleted(ca, second, "the session's creator on A told of the delete")
            # The deleting client is detached either way (its answer, or the NOTIFY first).
            assert await cb.call(DETACH, {"sessionId": second}) == {"detached": False}
            assert {r["reason"] for r in resyncs(cb, second)} <= {DELETED}
            for client in (ca, wa, wb, cb):
                await _not_found(client, second, cwd)
            for client in (ca, wa, wb, cb):
                await client.close()
        finally:
            await store.close()


async def test_a_delete_detaches_the_other_clients_of_one_server(server_factory, workspace: Path) -> None:
    async with server_factory(scripted({"text": "hi"})) as server:
        owner = await WsClient.connect(server.base_url)
        watcher = await WsClient.connect(server.base_url)
        sid = await new_session(owner, workspace)
        await watcher.call(ATTACH, {"sessionId": sid, "afterSeq": 0})
        async with sse(server.base_url, sid, params={"after": 0}) as stream:
            await stream.until(lambda f: f.get("event") == "_agentd/session/snapshot")
            assert await owner.call("session/delete", {"sessionId": sid}) == {}
            await _told_deleted(watcher, sid, "the other client told of the delete")
            ended = await stream.until(lambda f: f.get("event") == "_agentd/resync_required")
            assert ended["data"]["reason"] == DELETED, ended
        assert resyncs(owner, sid) == []  # the deleting client has its answer
        for client in (owner, watcher):
            await _not_found(client, sid, workspace)
            await client.close()
