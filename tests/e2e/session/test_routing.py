"""Any client, any replica (R-C1, issue 15 item 2): two real `agentd serve` processes on one
Postgres, tokens on. Alice's session is owned by replica A; her clients on replica B
prompt it, answer its permission questions, interject, edit its queue, cancel its turn and
attach to it mid-turn — B forwards the commands to A (`routed_commands` + NOTIFY) and its
clients get the events from the log, woken by NOTIFY: every durable event once, in seq
order, the same seqs A's own client sees. Mallory, on B, is refused exactly as on A. When A
dies while B waits for a prompt's answer, B's caller gets a clear error, not a hang."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentd.protocol.jsonrpc import ErrorCode
from agentd.store.db import Store
from tests.support.client import WsClient, allow, text_prompt
from tests.support.polling import until, value_of
from tests.support.replicas import two_replicas
from tests.support.session import is_event, new_session
from tests.support.sse import sse

pytestmark = pytest.mark.timeout(240)

# Every prompt: a bash call (default mode: a permission question — the turn waits on
# it), then a final answer. The turn is provably mid-way while its question is open.
SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "bash", "arguments": {"command": "echo routed"}}]},
    {"text": "All done."},
]
REQUEST_PERMISSION = "session/request_permission"


def durable_seqs(client: WsClient, sid: str) -> list[int]:
    """The seqs of the durable events the client was sent, one per event (an event's
    frames share its seq), in the order received."""
    seqs: list[int] = []
    for f in client.frames:
        params = f.get("params") if isinstance(f, dict) else None
        if not isinstance(params, dict) or params.get("sessionId") != sid or "id" in f:
            continue
        agentd = (params.get("_meta") or {}).get("agentd") or {}
        update = params.get("update") or {}
        if (
            "seq" not in agentd
            or agentd.get("transient")
            or update.get("sessionUpdate") == "available_commands_update"
        ):
            continue
        if not seqs or seqs[-1] != agentd["seq"]:
            seqs.append(int(agentd["seq"]))
    return seqs


def own_prompts(client: WsClient, sid: str, texts: set[str]) -> list[int]:
    """The seqs of the user messages with these texts that `client` was sent."""
    return [
        f["params"]["_meta"]["agentd"]["seq"]
        for f in client.frames
        if isinstance(f, dict)
        and f.get("method") == "session/update"
        and f["params"]["sessionId"] == sid
        and f["params"]["update"]["sessionUpdate"] == "user_message_chunk"
        and f["params"]["update"]["content"].get("text") in texts
    ]


def questions(client: WsClient, sid: str) -> list[dict[str, Any]]:
    return [
        r
        for r in client.server_requests
        if r["method"] == REQUEST_PERMISSION and r["params"]["sessionId"] == sid
    ]


def turn_ends(client: WsClient, sid: str) -> list[dict[str, Any]]:
    return [f["params"] for f in client.frames if isinstance(f, dict) and is_event(sid, "turn_ended")(f)]


def queue_entry(client: WsClient, sid: str, prompt_id: str) -> dict[str, Any] | None:
    """The latest view of a queued prompt from the client's `queue_update` events (deltas):
    None until added; {"removed": True} once it left the queue."""
    seen: dict[str, Any] | None = None
    for f in client.frames:
        if not (isinstance(f, dict) and is_event(sid, "queue_update")(f)):
            continue
        for change in f["params"]["event"]["changes"]:
            if change.get("id") == prompt_id and change["change"] == "removed":
                seen = {"removed": True}
            entry = change.get("entry") or {}
            if entry.get("id") == prompt_id:
                seen = {**(seen or {}), **entry}
    return seen


async def _last_seq(url: str, sid: str) -> int:
    store = await Store.open(url)
    try:
        return await store.last_seq(sid)
    finally:
        await store.close()


async def test_a_client_on_b_drives_a_session_owned_by_a(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "alice").mkdir(parents=True)
    async with two_replicas(
        tmp_path, SCRIPT, permission_mode="default", auth="token", workspace_root=str(root), lease_ttl_s="10"
    ) as replicas:
        url, a, b = replicas.url, replicas.a, replicas.b
        alice, mallory = await replicas.tokens("alice", "mallory")
        ca = await WsClient.connect(a.base_url, token=alice)  # A's own client: never answers questions
        sid = await new_session(ca, root / "alice")
        cb = await WsClient.connect(b.base_url, token=alice)
        cb.on_request = allow()

        # 1. Attach on B (owned by A: served from the log), prompt on B; B's client is
        #    asked the permission question and its answer reaches A's turn.
        attached = await cb.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
        assert attached["snapshot"]["ownedBy"] == "replica-a", attached
        first = await cb.request("session/prompt", text_prompt(sid, "go"))
        assert first["result"]["stopReason"] == "end_turn", first
        # As for a local client, the answer does not overtake its turn's events.
        assert len(turn_ends(cb, sid)) == 1, "the answer came before its turn_ended"
        assert len(questions(cb, sid)) == 1 and questions(ca, sid), "both clients were asked"
        last = await _last_seq(url, sid)
        await until(lambda: durable_seqs(cb, sid)[-1:] == [last], what="B's client at the log's end")
        await until(lambda: durable_seqs(ca, sid)[-1:] == [last], what="A's client at the log's end")
        # Every event once, in order, no gap — the very seqs A's own client saw.
        assert durable_seqs(ca, sid) == list(range(1, last + 1))
        # B's client is not sent its own prompt back (as a local client); all the rest.
        mine = own_prompts(ca, sid, {"go"})
        assert len(mine) == 1 and not own_prompts(cb, sid, {"go"})
        assert durable_seqs(cb, sid) == [s for s in range(1, last + 1) if s not in mine]
        # SSE on B: the same log, every seq once.
        async with sse(b.base_url, sid, params={"after": 0, "token": alice}) as stream:
            await stream.until(lambda f: f.get("id") == str(last))
        ids = [int(f["id"]) for f in stream.frames if "id" in f]
        assert [x for i, x in enumerate(ids) if i == 0 or ids[i - 1] != x] == list(range(1, last + 1))
        # `session/load` on B: the history replayed from the log, then live (below).
        cl = await WsClient.connect(b.base_url, token=alice)
        loaded = await cl.call(
            "session/load", {"sessionId": sid, "cwd": str(root / "alice"), "mcpServers": []}
        )
        assert loaded["modes"]["currentModeId"] == "default", loaded
        chunks = ("user_message_chunk", "agent_message_chunk")
        shown = [u["content"].get("text") for u in cl.updates(sid) if u["sessionUpdate"] in chunks]
        assert "go" in shown and "All done." in shown, shown

        # 2. A turn waiting on its question: attach mid-turn on B, interject, queue
        #    edits and the permission answer, all from B.
        cb.on_request = None
        second = asyncio.create_task(cb.request("session/prompt", text_prompt(sid, "again")))
        asked = await value_of(lambda: (questions(cb, sid)[1:] or [None])[0], what="the second question on B")
        request_id = asked["params"]["_meta"]["agentd"]["requestId"] if "_meta" in asked["params"] else None
        cursor = durable_seqs(cb, sid)[-1]
        cb2 = await WsClient.connect(b.base_url, token=alice)
        mid = await cb2.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": cursor})
        snap = mid["snapshot"]
        assert snap["status"] == "running" and len(snap["pendingPermissions"]) == 1, snap
        request_id = request_id or snap["pendingPermissions"][0]["requestId"]
        steer = await cb.call(
            "_agentd/interject", {"sessionId": sid, "prompt": [{"type": "text", "text": "also"}]}
        )
        assert steer["status"] == "interjected" and steer["turnId"] == snap["turnId"], steer
        queued = await cb.call(
            "_agentd/prompt/enqueue", {"sessionId": sid, "prompt": [{"type": "text", "text": "later"}]}
        )
        assert queued["position"] == 1, queued
        entry = await value_of(
            lambda: queue_entry(cb, sid, queued["promptId"]), what="the queued prompt on B"
        )
        edited = await cb.call(
            "_agentd/queue/edit",
            {
                "sessionId": sid,
                "id": queued["promptId"],
                "expectedVersion": entry["version"],
                "text": "edited",
            },
        )
        assert edited, edited
        for client in (ca, cb, cb2):  # A's change, seen by every client from its own replica
            await until(
                lambda c=client: (queue_entry(c, sid, queued["promptId"]) or {}).get("text") == "edited",
                what="the edit everywhere",
            )
        version = queue_entry(cb, sid, queued["promptId"])["version"]  # type: ignore[index]
        await cb.call(
            "_agentd/queue/remove",
            {"sessionId": sid, "id": queued["promptId"], "expectedVersion": version},
        )
        for client in (ca, cb2):
            await until(
                lambda c=client: (queue_entry(c, sid, queued["promptId"]) or {}).get("removed"),
                what="the removal everywhere",
            )
        answered = await cb2.call(
            "_agentd/permission/respond",
            {"sessionId": sid, "requestId": request_id, "optionId": "allow_once"},
        )
        assert answered["outcome"] == "selected", answered
        done = await asyncio.wait_for(second, 60)
        assert done["result"]["stopReason"] == "end_turn", done
        assert len(turn_ends(cb, sid)) == 2, "the answer came before its turn_ended"
        last = await _last_seq(url, sid)
        for client in (ca, cb, cb2, cl):
            await until(lambda c=client: durable_seqs(c, sid)[-1:] == [last], what="every client at the end")
        assert durable_seqs(cb2, sid) == list(range(cursor + 1, last + 1))  # from its cursor on
        assert durable_seqs(ca, sid) == list(range(1, last + 1))
        mine = own_prompts(ca, sid, {"go", "again"})
        assert len(mine) == 2 and not own_prompts(cb, sid, {"go", "again"})
        assert own_prompts(cb2, sid, {"also"}) == own_prompts(ca, sid, {"also"})  # others' prompts reach it
        assert durable_seqs(cb, sid) == [s for s in range(1, last + 1) if s not in mine]

        # 3. Cancel from B (a notification, as ACP clients send it).
        third = asyncio.create_task(cb.request("session/prompt", text_prompt(sid, "stop me")))
        await until(lambda: len(questions(cb, sid)) >= 3, what="the third question on B")
        await cb.notify("session/cancel", {"sessionId": sid})
        stopped = await asyncio.wait_for(third, 60)
        assert stopped["result"]["stopReason"] == "cancelled", stopped
        assert len(turn_ends(cb, sid)) == 3, "the answer came before its turn_ended"

        # 4. Mallory on B is refused as on A: the session looks missing; nothing changes.
        before = await _last_seq(url, sid)
        cm = await WsClient.connect(b.base_url, token=mallory)
        for method, params in [
            ("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0}),
            ("session/prompt", text_prompt(sid, "mine now")),
            ("session/cancel", {"sessionId": sid}),
            ("_agentd/queue/list", {"sessionId": sid}),
            (
                "_agentd/permission/respond",
                {"sessionId": sid, "requestId": "perm_x", "optionId": "allow_once"},
            ),
        ]:
            refused = await cm.request(method, params)
            assert refused["error"]["code"] == ErrorCode.RESOURCE_NOT_FOUND, (method, refused)
        assert await _last_seq(url, sid) == before

        async with httpx.AsyncClient() as http:
            metrics = (
                await http.get(f"{b.base_url}/metrics", headers={"Authorization": f"Bearer {alice}"})
            ).text
        assert 'agentd_routed_commands_total{method="session/prompt",outcome="ok"} 3.0' in metrics, metrics
        assert "agentd_notify_lag_seconds_count" in metrics

        # 5. A dies while B waits for a prompt's answer: a clear error, not a hang.
        # (The cancelled turn left the script mid-way: prompt until one waits on its question.)
        while True:
            asked_before = len(questions(cb, sid))
            fourth = asyncio.create_task(cb.request("session/prompt", text_prompt(sid, "one more")))
            await until(
                lambda n=asked_before, t=fourth: t.done() or len(questions(cb, sid)) > n,  # type: ignore[misc]
                what="a prompt ending or asking",
            )
            if not fourth.done():
                break
        os.kill(a.pid, signal.SIGKILL)
        await replicas.expire_lease(sid)  # (its lease runs out: not waited for on a loaded machine)
        lost = await asyncio.wait_for(fourth, 60)
        assert lost["error"]["code"] == -32021, lost  # route_failed: retry, not a bug
        assert lost["error"]["data"] == {"reason": "owner_lost", "retryable": True}, lost
        for client in (ca, cb, cb2, cl, cm):
            await client.close()
