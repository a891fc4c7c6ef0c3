"""The prompt queue's answers and storage (R-S3, R-E6, R-X3): an enqueue is acknowledged
only once it is committed (a `kill -9` right after the acks loses none), a repeated
requestId is answered with the original prompt (live, after it ran, after a restart, over
WebSocket and `POST /rpc`), queued bytes are limited per session and per principal, and
`queue_update` events carry only what changed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
from alembic import command
from sqlalchemy import text

from agentd.store.db import Store, alembic_config
from tests.support.client import RpcFailed, WsClient, text_prompt
from tests.support.proc import agentd_process, free_port, scripted_serve_args, wait_healthy
from tests.support.server import scripted
from tests.support.session import served_session

GATE_STEP = {"text": "working", "delay": 30}  # runs until cancelled
BOUND_S = 30


def _blocks(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


def _enqueue_params(sid: str, text: str, request_id: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"sessionId": sid, "prompt": _blocks(text)}
    if request_id is not None:
        params["_meta"] = {"agentd": {"requestId": request_id}}
    return params


async def _rpc(base_url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=base_url, timeout=BOUND_S) as http:
        resp = await http.post("/rpc", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    return resp.json()


async def _start_long_turn(client: WsClient, sid: str) -> asyncio.Task[Any]:
    running = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "long job")))
    await client.wait_notification(
        lambda m: m["method"] == "_agentd/event" and m["params"]["kind"] == "turn_started", within=BOUND_S
    )
    return running


def _queue_events(client: WsClient, sid: str) -> list[dict[str, Any]]:
    return [
        f["params"]["event"]
        for f in client.frames
        if f.get("method") == "_agentd/event"
        and f["params"]["kind"] == "queue_update"
        and f["params"]["sessionId"] == sid
    ]


def apply_queue_update(queue: list[dict[str, Any]], event: dict[str, Any]) -> list[dict[str, Any]]:
    """What a client does with a `queue_update` (docs/protocol.md), as a reference."""
    out = [dict(e) for e in queue]
    for change in event["changes"]:
        match change["change"]:
            case "removed":
                out = [e for e in out if e["id"] != change["id"]]
            case "added":
                out.insert(change["index"], dict(change["entry"]))
            case "updated":
                for i, e in enumerate(out):
                    if e["id"] == change["entry"]["id"]:
                        out[i] = {"text": e["text"], **change["entry"]}
            case "moved":
                by_id = {e["id"]: e for e in out}
                out = [by_id[i] for i in change["order"]]
    assert len(out) == event["length"]
    return out


# --------------------------------------------------------------------------------------------
# acknowledged only after commit: kill -9 right after the acks


async def test_every_acknowledged_enqueue_survives_kill_9(
    server_factory, db_url: str, workspace: Path, tmp_path: Path
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [GATE_STEP, {"text": "never reached"}]}))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(AGENTD_HOME=str(tmp_path / "home"), HOME=str(tmp_path))
    args = scripted_serve_args(port, db_url, script)
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    n = 25
    async with agentd_process(args, env=env, log=log) as proc:
        await wait_healthy(base, proc, log)
        client = await WsClient.connect(base)
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        running = await _start_long_turn(client, sid)
        # All sent at once; the server is killed the moment the last ack arrives.
        acks = await asyncio.wait_for(
            asyncio.gather(
                *(
                    client.call("_agentd/prompt/enqueue", _enqueue_params(sid, f"p{i}", f"r{i}"))
                    for i in range(n)
                )
            ),
            BOUND_S,
        )
        os.kill(proc.pid, signal.SIGKILL)
        assert await proc.wait() == -signal.SIGKILL
        running.cancel()
        await client.close()
    acked = [a["promptId"] for a in acks]
    assert sorted(a["position"] for a in acks) == list(range(1, n + 1))

    after = scripted({"text": "resumed"}, loop=True)
    async with server_factory(after, database_url=db_url, auto_resume=False) as server:
        client = await server.client()
        snap = (await client.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0}))["snapshot"]
        queued = {q["promptId"]: q["text"] for q in snap["queue"]}
        assert set(acked) <= set(queued), "an acknowledged prompt was lost"
        by_position = sorted(zip((a["position"] for a in acks), acked, strict=True))
        assert [queued[pid] for _, pid in by_position] == [
            dict(zip(acked, (f"p{i}" for i in range(n)), strict=True))[pid] for _, pid in by_position
        ]
        # Its retry after the restart is answered with the same prompt, and queues nothing.
        again = await client.call("_agentd/prompt/enqueue", _enqueue_params(sid, "p0", "r0"))
        assert again["promptId"] == acked[0]
        # The same requestId for other content is no retry (issue 28 item 5), after a restart too.
        reused = await client.request("_agentd/prompt/enqueue", _enqueue_params(sid, "p0 again", "r0"))
        assert reused["error"]["code"] == -32030 and reused["error"]["data"]["promptId"] == acked[0]
        listed = await client.call("_agentd/queue/list", {"sessionId": sid})
        assert len(listed["queue"]) == len(queued)
        await client.close()


# --------------------------------------------------------------------------------------------
# a repeated requestId is answered with the original


async def test_repeated_enqueue_is_answered_with_the_original_live_and_after_it_ran(
    server_factory, db_url: str, workspace: Path
) -> None:
    provider = scripted(GATE_STEP, {"text": "one done"})
    async with served_session(server_factory, workspace, provider, database_url=db_url) as (
        server,
        client,
        sid,
    ):
        running = await _start_long_turn(client, sid)
        first = await client.call("_agentd/prompt/enqueue", _enqueue_params(sid, "one", "req-1"))
        assert first["position"] == 1

        # While it waits: the same {promptId, position}, over WebSocket and POST /rpc.
        again = await client.call("_agentd/prompt/enqueue", _enqueue_params(sid, "one", "req-1"))
        assert again == first
        over_http = await asyncio.wait_for(
            _rpc(server.base_url, "_agentd/prompt/enqueue", _enqueue_params(sid, "one", "req-1")), BOUND_S
        )
        assert over_http["result"] == first
        listed = await client.call("_agentd/queue/list", {"sessionId": sid})
        assert [(e["id"], e["text"]) for e in listed["queue"]] == [(first["promptId"], "one")]

        # After it ran: its outcome.
        await client.notify("session/cancel", {"sessionId": sid})
        assert (await running)["result"]["stopReason"] == "cancelled"
        await client.wait_notification(
            lambda m: (
                m["method"] == "_agentd/event"
                and m["params"]["kind"] == "turn_ended"
                and m["params"]["event"]["promptId"] == first["promptId"]
            ),
            within=BOUND_S,
        )
        ended = await client.call("_agentd/prompt/enqueue", _enqueue_params(sid, "one", "req-1"))
        assert ended["promptId"] == first["promptId"]
        assert (ended["stopReason"], ended["outcome"]) == ("end_turn", "completed")
        over_http = await asyncio.wait_for(
            _rpc(server.base_url, "_agentd/prompt/enqueue", _enqueue_params(sid, "one", "req-1")), BOUND_S
        )
        assert over_http["result"] == ended
        assert len(provider.requests) == 2  # the retries never ran


async def test_repeated_enqueue_after_a_restart_is_answered_with_the_original(
    server_factory, db_url: str, workspace: Path
) -> None:
    first_run = scripted(GATE_STEP)
    # The client stays connected while the server shuts down (served_session would close it).
    async with server_factory(first_run, database_url=db_url, shutdown_grace_s=1.0) as server:
        client = await server.client()
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        running = await _start_long_turn(client, sid)
        first = await client.call("_agentd/prompt/enqueue", _enqueue_params(sid, "one", "req-1"))
    running.cancel()
    await client.close()

    # Restarted (nothing resumes by itself): still queued, same prompt, nothing added.
    second_run = scripted({"expect": "one", "text": "one done"}, {"text": "now done"})
    async with server_factory(second_run, database_url=db_url, auto_resume=False) as server:
        client = await server.client()
        again = await client.call("_agentd/prompt/enqueue", _enqueue_params(sid, "one", "req-1"))
        assert again["promptId"] == first["promptId"] and "stopReason" not in again
        over_http = await asyncio.wait_for(
            _rpc(server.base_url, "_agentd/prompt/enqueue", _enqueue_params(sid, "one", "req-1")), BOUND_S
        )
        assert over_http["result"]["promptId"] == first["promptId"]
        listed = await client.call("_agentd/queue/list", {"sessionId": sid})
        assert [e["id"] for e in listed["queue"]] == [first["promptId"]]
        # The queue runs in order; then the retry learns how it ended.
        assert (await client.call("session/prompt", text_prompt(sid, "now")))["stopReason"] == "end_turn"
        ended = await client.call("_agentd/prompt/enqueue", _enqueue_params(sid, "one", "req-1"))
        assert (ended["promptId"], ended["outcome"]) == (first["promptId"], "completed")
        await client.close()

    # And after one more restart, from the log.
    async with server_factory(scripted({"text": "x"}), database_url=db_url, auto_resume=False) as server:
        answer = await asyncio.wait_for(
            _rpc(server.base_url, "_agentd/prompt/enqueue", _enqueue_params(sid, "one", "req-1")), BOUND_S
        )
        assert (answer["result"]["promptId"], answer["result"]["outcome"]) == (first["promptId"], "completed")
        assert server.provider.requests == []  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------------
# queued bytes are limited per session and per principal (R-X3)


async def test_queued_bytes_are_limited_per_session_and_per_principal(
    server_factory, db_url: str, workspace: Path
) -> None:
    provider = scripted(GATE_STEP, GATE_STEP)
    limits = {"max_queued_bytes_per_session": 1000, "max_queued_bytes_per_principal": 1500}
    async with server_factory(provider, database_url=db_url, **limits) as server:
        client = await server.client()
        a = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        b = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        running = [await _start_long_turn(client, a), await _start_long_turn(client, b)]

        kept = await client.call("_agentd/prompt/enqueue", _enqueue_params(a, "a" * 600))
        with pytest.raises(RpcFailed) as refused:
            await client.call("_agentd/prompt/enqueue", _enqueue_params(a, "x" * 500))
        assert refused.value.code == -32019
        assert refused.value.error["data"]["limit"] == "queued_bytes_session"
        assert refused.value.error["data"]["max"] == 1000
        # session/prompt is refused the same way, and so is an edit that grows past it.
        with pytest.raises(RpcFailed) as refused:
            await client.call("session/prompt", text_prompt(a, "y" * 500))
        assert refused.value.error["data"]["limit"] == "queued_bytes_session"
        with pytest.raises(RpcFailed) as refused:
            await client.call(
                "_agentd/queue/edit",
                {"sessionId": a, "id": kept["promptId"], "expectedVersion": 1, "text": "e" * 1001},
            )
        assert refused.value.error["data"]["limit"] == "queued_bytes_session"

        await client.call("_agentd/prompt/enqueue", _enqueue_params(b, "b" * 600))
        over_http = await _rpc(server.base_url, "_agentd/prompt/enqueue", _enqueue_params(b, "z" * 400))
        assert over_http["error"]["code"] == -32019
        assert over_http["error"]["data"]["limit"] == "queued_bytes_principal"
        assert over_http["error"]["data"]["max"] == 1500

        # Nothing changed, and the sessions still work.
        listed_a = await client.call("_agentd/queue/list", {"sessionId": a})
        assert [(e["text"], e["version"]) for e in listed_a["queue"]] == [("a" * 600, 1)]
        listed_b = await client.call("_agentd/queue/list", {"sessionId": b})
        assert [e["text"] for e in listed_b["queue"]] == ["b" * 600]
        # Room again once a prompt leaves the queue.
        await client.call(
            "_agentd/queue/remove", {"sessionId": a, "id": kept["promptId"], "expectedVersion": 1}
        )
        assert (await client.call("_agentd/prompt/enqueue", _enqueue_params(b, "z" * 400)))["position"] == 2
        for sid in (a, b):
            await client.notify("session/cancel", {"sessionId": sid})
        for task in running:
            await asyncio.wait_for(task, BOUND_S)
        await client.close()


# --------------------------------------------------------------------------------------------
# queue_update events are deltas


async def test_queue_updates_carry_only_the_change(server_factory, db_url: str, workspace: Path) -> None:
    provider = scripted(GATE_STEP, {"text": "ran"}, loop=False)
    async with served_session(server_factory, workspace, provider, database_url=db_url) as (
        server,
        client,
        sid,
    ):
        running = await _start_long_turn(client, sid)
        texts = [f"prompt-{i}-" + chr(ord("a") + i) * 2000 for i in range(6)]
        ids = [
            (await client.call("_agentd/prompt/enqueue", _enqueue_params(sid, t)))["promptId"] for t in texts
        ]
        await client.call(
            "_agentd/queue/edit", {"sessionId": sid, "id": ids[2], "expectedVersion": 1, "text": "edited-2"}
        )
        await client.call("_agentd/queue/hold", {"sessionId": sid, "id": ids[4]})
        await client.call("_agentd/queue/move", {"sessionId": sid, "order": [ids[5], ids[0]]})
        await client.call("_agentd/queue/remove", {"sessionId": sid, "id": ids[1], "expectedVersion": 1})
        listed = (await client.call("_agentd/queue/list", {"sessionId": sid}))["queue"]
        await client.wait_notification(
            lambda m: (
                m["method"] == "_agentd/event"
                and m["params"]["kind"] == "queue_update"
                and m["params"]["event"]["changes"][-1].get("id") == ids[1]
            ),
            within=BOUND_S,
        )
        events = _queue_events(client, sid)
        assert len(events) == 10  # 6 added, edited, held, moved, removed

        # Each add carries its own text and no other prompt's: sizes do not grow with the queue.
        for i, event in enumerate(events[:6]):
            raw = json.dumps(event)
            assert texts[i] in raw
            assert not any(t in raw for j, t in enumerate(texts) if j != i)
        for event in events[6:]:
            raw = json.dumps(event)
            assert not any(t in raw for t in texts), event
        assert [c["change"] for e in events[6:] for c in e["changes"]] == [
            "updated",
            "updated",
            "moved",
            "removed",
        ]
        assert events[-1]["changes"][0]["reason"] == "removed_from_queue"

        # Applied in order, the deltas give exactly the queue the server lists.
        queue: list[dict[str, Any]] = []
        for event in events:
            queue = apply_queue_update(queue, event)
        assert queue == listed

        # The snapshot of a client attaching now carries the whole queue.
        other = await server.client()
        snap = (await other.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0}))["snapshot"]
        assert [(q["promptId"], q["text"], q["version"]) for q in snap["queue"]] == [
            (e["id"], e["text"], e["version"]) for e in listed
        ]
        await client.call("_agentd/queue/clear", {"sessionId": sid})
        await client.notify("session/cancel", {"sessionId": sid})
        await asyncio.wait_for(running, BOUND_S)
        await other.close()


# --------------------------------------------------------------------------------------------
# migration 0006 moves queues out of the session row


async def test_migration_moves_existing_queues_into_rows_and_back(db_url: str) -> None:
    old_queue = [
        {
            "id": f"prompt_{i}",
            "kind": "prompt",
            "version": 1 + i,
            "owner": "local",
            "lastEditor": "local",
            "sendNow": False,
            "blocks": [{"type": "text", "text": f"queued {i}"}],
            "meta": {"requestId": f"req-{i}"} if i else {},
        }
        for i in range(3)
    ]
    store = await Store.open(db_url)
    try:
        async with store.engine.begin() as conn:
            await conn.run_sync(lambda c: command.upgrade(alembic_config(c), "0005"))
            await conn.execute(
                text(
                    "INSERT INTO sessions (id, owner, cwd, mode, model, agent, permission_memory, queue,"
                    " created_at, updated_at) VALUES ('s1', 'local', '/tmp', 'default', 'm', 'default',"
                    " '{}', :queue, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                ),
                {"queue": json.dumps(old_queue)},
            )
        await store.migrate()
        record = await store.get_session("s1")
        assert record is not None and record.queue is not None
        assert [(q["id"], q["version"], q["requestId"], q["blocks"]) for q in record.queue] == [
            (q["id"], q["version"], q["meta"].get("requestId"), q["blocks"]) for q in old_queue
        ]
        assert await store.sessions_with_queued_prompts() == ["s1"]

        async with store.engine.begin() as conn:
            await conn.run_sync(lambda c: command.downgrade(alembic_config(c), "0005"))
            stored = (await conn.execute(text("SELECT queue FROM sessions WHERE id = 's1'"))).scalar()
        restored = json.loads(stored) if isinstance(stored, str) else stored
        assert [q["id"] for q in restored] == [q["id"] for q in old_queue]
        assert restored[1]["meta"] == {"requestId": "req-1"}
    finally:
        await store.close()
