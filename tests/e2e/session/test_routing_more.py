"""Every session-scoped method works from any replica (R-C1): two real `agentd serve`
processes on one Postgres, tokens on. Alice's session is owned by replica A; her client on
replica B renames, reads its changes, exports, rewinds, forks, shares, compacts, closes and
deletes it — each forwarded to A and run there with her rights (the store shows the
effect; a close or delete stops A's actor, whose lease goes) — and answers a permission
question `cancelled` (the tool call is refused on A, as for a local `cancelled`). Mallory,
on B, is refused every one of them exactly as on A, and nothing changes; when a share is
closed on A, B detaches her at once, as A does its own clients. A stop hook cannot be
registered from B: a clear, non-retryable refusal (A could not call back a client
connected to B)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentd.protocol.jsonrpc import ErrorCode
from agentd.store.db import Store
from agentd.store.export_codec import decode
from agentd.store.routed import lease_holder
from tests.support.client import WsClient, text_prompt
from tests.support.polling import until
from tests.support.replicas import two_replicas
from tests.support.session import new_session

pytestmark = pytest.mark.timeout(180)

# A bash call (default mode: a permission question), then a final answer.
SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "bash", "arguments": {"command": "echo routed"}}]},
    {"text": "All done."},
]


async def _cancel(msg: dict[str, Any]) -> dict[str, Any]:
    return {"outcome": {"outcome": "cancelled"}}


async def _released(store: Store, sid: str) -> bool:
    return await lease_holder(store.engine, sid) is None


def _resynced(client: WsClient, sid: str) -> bool:
    return any(
        f.get("method") == "_agentd/resync_required"
        and f["params"].get("sessionId") == sid
        and f["params"].get("reason") == "access_changed"
        for f in client.frames
        if isinstance(f, dict)
    )


def _kinds(events: list[Any], kind: str) -> list[dict[str, Any]]:
    return [e.payload for e in events if e.kind == kind]


async def test_every_session_method_works_from_a_replica_that_does_not_own_the_session(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    (root / "alice").mkdir(parents=True)
    async with two_replicas(
        tmp_path, SCRIPT, permission_mode="default", auth="token", workspace_root=str(root), lease_ttl_s="10"
    ) as replicas:
        a, b = replicas.a, replicas.b
        alice, mallory = await replicas.tokens("alice", "mallory", teams=["eng"])
        store = await Store.open(replicas.url)
        try:
            ca = await WsClient.connect(a.base_url, token=alice)  # A's own client: never answers questions
            sid = await new_session(ca, root / "alice")
            cb = await WsClient.connect(b.base_url, token=alice)
            cm = await WsClient.connect(b.base_url, token=mallory)
            await cb.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})

            # 1. A permission question answered `cancelled` on B: on A, as a local
            #    `cancelled` answer, the tool call is refused and the turn is cancelled
            #    (before, B dropped the answer and the turn waited for another).
            cb.on_request = _cancel
            done = await asyncio.wait_for(cb.request("session/prompt", text_prompt(sid, "go")), 60)
            assert done["result"]["stopReason"] == "cancelled", done
            events = await store.read_events(sid)
            resolved = _kinds(events, "permission_resolved")
            assert [r["outcome"] for r in resolved] == ["cancelled"], resolved
            assert any(r["method"] == "session/request_permission" for r in cb.server_requests)
            # Over `POST /rpc`-style respond too: `outcome: cancelled` needs no optionId,
            # and a question no longer pending is refused (nothing pending now).
            stale = await cb.request(
                "_agentd/permission/respond",
                {"sessionId": sid, "requestId": resolved[0]["requestId"], "outcome": "cancelled"},
            )
            assert stale["error"]["code"] == ErrorCode.INVALID_PARAMS, stale
            turn_id = _kinds(events, "turn_started")[0]["turnId"]
            assert await lease_holder(store.engine, sid) == "replica-a"

            # 2. Mallory, on B, is refused every newly routed method: the session looks
            #    missing, as on A; nothing changes.
            before = await store.last_seq(sid)
            for method, params in [
                ("_agentd/session/rename", {"sessionId": sid, "title": "mine"}),
                ("_agentd/session/rewind", {"sessionId": sid, "toTurnId": turn_id, "files": False}),
                ("_agentd/session/fork", {"sessionId": sid}),
                ("_agentd/session/share", {"sessionId": sid, "team": "eng", "access": "drive"}),
                ("_agentd/session/compact", {"sessionId": sid}),
                ("_agentd/session/changes", {"sessionId": sid}),
                ("_agentd/session/revert_file", {"sessionId": sid, "path": "a.txt"}),
                ("_agentd/session/export", {"sessionId": sid}),
                ("_agentd/hooks/register", {"sessionId": sid, "events": ["stop"]}),
                ("session/close", {"sessionId": sid}),
                ("session/delete", {"sessionId": sid}),
                (
                    "_agentd/permission/respond",
                    {"sessionId": sid, "requestId": "perm_x", "outcome": "cancelled"},
                ),
            ]:
                refused = await cm.request(method, params)
                assert refused["error"]["code"] == ErrorCode.RESOURCE_NOT_FOUND, (method, refused)
            assert await store.last_seq(sid) == before
            record = await store.get_session(sid)
            assert record is not None and record.title != "mine"
            assert (await store.session_shares([sid])).get(sid, {}) == {}
            assert await lease_holder(store.engine, sid) == "replica-a"  # still A's, running

            # 3. Alice, on B: each takes effect on A.
            renamed = await cb.call("_agentd/session/rename", {"sessionId": sid, "title": "routed"})
            assert renamed == {"sessionId": sid, "title": "routed"}, renamed
            record = await store.get_session(sid)
            assert record is not None and record.title == "routed"
            changes = await cb.call("_agentd/session/changes", {"sessionId": sid})
            assert changes["sessionId"] == sid and changes["files"] == [], changes
            exported = await cb.call("_agentd/session/export", {"sessionId": sid})
            assert decode(exported["jsonl"].encode()).session["title"] == "routed"

            rewound = await cb.call(
                "_agentd/session/rewind", {"sessionId": sid, "toTurnId": turn_id, "files": False}
            )
            assert turn_id in rewound["turnsUndone"], rewound
            assert _kinds(await store.read_events(sid), "rewound"), "no rewound event in A's log"

            shared = await cb.call(
                "_agentd/session/share", {"sessionId": sid, "team": "eng", "access": "watch"}
            )
            assert shared["shares"] == [{"team": "eng", "access": "watch"}], shared
            assert (await store.session_shares([sid]))[sid] == {"eng": "watch"}
            # Shared to watch: Mallory still may not drive it from B (checked on A).
            denied = await cm.request("_agentd/session/rename", {"sessionId": sid, "title": "x"})
            assert denied["error"]["code"] == ErrorCode.PERMISSION_DENIED, denied
            # She watches from B; Alice closes the share on A: B detaches her at once (the
            # shares' NOTIFY), as A detaches its own members.
            await cm.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
            await ca.call("_agentd/session/share", {"sessionId": sid, "team": "eng", "access": "none"})
            await until(lambda: _resynced(cm, sid), what="Mallory on B told her access changed")
            assert await cm.call("_agentd/session/detach", {"sessionId": sid}) == {"detached": False}
            again = await cm.request("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
            assert again["error"]["code"] == ErrorCode.RESOURCE_NOT_FOUND, again

            forked = await cb.call("_agentd/session/fork", {"sessionId": sid})
            fork_id = forked["sessionId"]
            assert forked["forkedFrom"] == sid and forked["upToSeq"] == await store.last_seq(sid)
            fork = await store.get_session(fork_id)
            assert fork is not None and fork.owner == "alice"

            compacted = await cb.call("_agentd/session/compact", {"sessionId": sid})
            assert "status" in compacted, compacted
            assert await lease_holder(store.engine, sid) == "replica-a"

            # 4. A stop hook needs the connection where the session runs: a clear refusal.
            hook = await cb.request("_agentd/hooks/register", {"sessionId": sid, "events": ["stop"]})
            error = hook["error"]
            assert error["code"] == ErrorCode.SESSION_ELSEWHERE, hook
            assert error["data"]["reason"] == "connection_bound", hook
            assert error["data"]["retryable"] is False and error["data"]["owner"] == "replica-a"

            # 5. Close from B: A cancels, clears and unloads it (its lease goes); B's
            #    client stops watching. The session stays stored.
            loading = {"sessionId": fork_id, "cwd": str(root / "alice"), "mcpServers": []}
            await ca.call("session/load", loading)
            assert await lease_holder(store.engine, fork_id) == "replica-a"
            await cb.call("_agentd/session/attach", {"sessionId": fork_id, "afterSeq": 0})
            assert await cb.call("session/close", {"sessionId": fork_id}) == {}
            await until(lambda: _released(store, fork_id), what="A's actor of the closed fork stopped")
            assert await store.get_session(fork_id) is not None
            detached = await cb.call("_agentd/session/detach", {"sessionId": fork_id})
            assert detached == {"detached": False}, "B's client still watched the closed session"

            # 6. Delete from B: A's actor stops and the session is gone.
            assert await cb.call("session/delete", {"sessionId": sid}) == {}
            assert await store.get_session(sid) is None
            assert await cb.call("_agentd/session/detach", {"sessionId": sid}) == {"detached": False}
            await until(lambda: _released(store, sid), what="A's lease on the deleted session released")
            gone = await ca.request("_agentd/session/rename", {"sessionId": sid, "title": "z"})
            assert gone["error"]["code"] == ErrorCode.RESOURCE_NOT_FOUND, gone
            for client in (ca, cb, cm):
                await client.close()
        finally:
            await store.close()
