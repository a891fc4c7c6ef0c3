"""The server-side prompt queue (R-S3): versions, owners, and every operation, each change
a `queue_update` event; removed or merged prompts answer `cancelled` with reason
`removed_from_queue`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from tests.support.client import WsClient, agent_text, allow, text_prompt
from tests.support.polling import until
from tests.support.server import scripted
from tests.support.session import events as events_of

GATE_STEP = {"text": "working", "delay": 30}  # the first turn runs until cancelled


def _blocks(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


async def _setup(server, workspace: Path) -> tuple[WsClient, str, asyncio.Task[Any]]:
    client = await server.client()
    sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
    running = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "long job")))
    await client.wait_notification(
        lambda m: m["method"] == "_agentd/event" and m["params"]["kind"] == "turn_started"
    )
    return client, sid, running


async def _enqueue(client: WsClient, sid: str, text: str) -> dict[str, Any]:
    return await client.call("_agentd/prompt/enqueue", {"sessionId": sid, "prompt": _blocks(text)})


def _queue_updates(client: WsClient, sid: str) -> list[dict[str, Any]]:
    return [
        f["params"]["event"]
        for f in client.frames
        if f.get("method") == "_agentd/event"
        and f["params"]["kind"] == "queue_update"
        and f["params"]["sessionId"] == sid
    ]


async def test_enqueue_answers_at_once_and_every_change_is_a_queue_update(server_factory, workspace: Path):
    provider = scripted(GATE_STEP, {"text": "a"}, {"text": "b"})
    async with server_factory(provider) as server:
        client, sid, running = await _setup(server, workspace)
        first = await _enqueue(client, sid, "first")
        second = await _enqueue(client, sid, "second")
        assert (first["position"], second["position"]) == (1, 2)  # 0 is the running turn
        listed = await client.call("_agentd/queue/list", {"sessionId": sid})
        assert [(e["id"], e["text"], e["version"], e["owner"]) for e in listed["queue"]] == [
            (first["promptId"], "first", 1, "local"),
            (second["promptId"], "second", 1, "local"),
        ]
        await client.wait_notification(
            lambda m: (
                m["method"] == "_agentd/event"
                and m["params"]["kind"] == "queue_update"
                and m["params"]["event"]["length"] == 2
            )
        )
        assert [u["length"] for u in _queue_updates(client, sid)] == [1, 2]
        # Over plain HTTP too: enqueue needs no server→client request.
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            resp = await http.post(
                "/rpc",
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "_agentd/prompt/enqueue",
                    "params": {"sessionId": sid, "prompt": _blocks("third")},
                },
            )
        assert resp.json()["result"]["position"] == 3
        await client.notify("session/cancel", {"sessionId": sid})
        assert (await running)["result"]["stopReason"] == "cancelled"
        await client.close()


async def test_stale_versions_change_nothing_and_removal_answers_removed_from_queue(
    server_factory, workspace: Path
):
    provider = scripted(GATE_STEP, {"text": "kept"})
    async with server_factory(provider) as server:
        client, sid, running = await _setup(server, workspace)
        keep = await client.call("_agentd/prompt/enqueue", {"sessionId": sid, "prompt": _blocks("keep")})
        # A queued session/prompt whose response is pending.
        doomed = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "doomed")))
        await client.wait_notification(
            lambda m: (
                m["method"] == "_agentd/event"
                and m["params"]["kind"] == "queue_update"
                and m["params"]["event"]["length"] == 2
            )
        )
        queue = (await client.call("_agentd/queue/list", {"sessionId": sid}))["queue"]
        doomed_id = queue[1]["id"]

        stale = await client.call(
            "_agentd/queue/remove", {"sessionId": sid, "id": doomed_id, "expectedVersion": 7}
        )
        assert stale["applied"] is False and stale["reason"] == "stale_version" and stale["queue"] == queue
        missing = await client.call(
            "_agentd/queue/edit", {"sessionId": sid, "id": "nope", "expectedVersion": 1, "text": "x"}
        )
        assert missing["applied"] is False and missing["queue"] == queue

        edited = await client.call(
            "_agentd/queue/edit",
            {"sessionId": sid, "id": keep["promptId"], "expectedVersion": 1, "text": "kept, edited"},
        )
        assert edited["applied"] is True and edited["queue"][0]["version"] == 2
        assert edited["queue"][0]["text"] == "kept, edited"
        again = await client.call(
            "_agentd/queue/edit",
            {"sessionId": sid, "id": keep["promptId"], "expectedVersion": 1, "text": "lost"},
        )
        assert again["applied"] is False  # last write wins only with the current version

        removed = await client.call(
            "_agentd/queue/remove", {"sessionId": sid, "id": doomed_id, "expectedVersion": 1}
        )
        assert [e["id"] for e in removed["queue"]] == [keep["promptId"]]
        answer = (await doomed)["result"]
        assert answer["stopReason"] == "cancelled"
        assert answer["_meta"]["agentd"]["reason"] == "removed_from_queue"

        await client.notify("session/cancel", {"sessionId": sid})
        await running
        await client.wait_notification(
            lambda m: (
                m["method"] == "_agentd/event"
                and m["params"]["kind"] == "turn_ended"
                and m["params"]["event"]["outcome"] == "completed"
            )
        )
        assert [m.content for m in provider.requests[-1].messages if m.role == "user"][-1] == "kept, edited"
        await client.close()


async def test_move_combine_hold_release_clear(server_factory, workspace: Path):
    provider = scripted(GATE_STEP, {"text": "combined answer"}, loop=False)
    async with server_factory(provider) as server:
        client, sid, running = await _setup(server, workspace)
        ids = [(await _enqueue(client, sid, t))["promptId"] for t in ("a", "b", "c")]
        moved = await client.call(
            "_agentd/queue/move", {"sessionId": sid, "order": [ids[2], "unknown", ids[0]]}
        )
        assert [e["id"] for e in moved["queue"]] == [ids[2], ids[0], ids[1]]
        combined = await client.call("_agentd/queue/combine", {"sessionId": sid})
        assert len(combined["queue"]) == 1
        assert combined["queue"][0]["text"] == "c\n\na\n\nb" and combined["queue"][0]["version"] == 2
        held = await client.call("_agentd/queue/hold", {"sessionId": sid, "id": ids[2]})
        assert held["queue"][0]["held"] is True
        # The running turn ends; the held front is not promoted.
        await client.notify("session/cancel", {"sessionId": sid})
        await running
        # A mailbox round trip: the actor has handled the turn's end (and any promotion) first.
        listed = await client.call("_agentd/queue/list", {"sessionId": sid})
        assert [e["id"] for e in listed["queue"]] == [ids[2]] and listed["queue"][0]["held"] is True
        assert len(provider.requests) == 1
        released = await client.call("_agentd/queue/release", {"sessionId": sid, "id": ids[2]})
        assert released["applied"] is True
        await client.wait_notification(
            lambda m: (
                m["method"] == "_agentd/event"
                and m["params"]["kind"] == "turn_ended"
                and m["params"]["event"]["outcome"] == "completed"
            )
        )
        assert [m.content for m in provider.requests[-1].messages if m.role == "user"][-1] == "c\n\na\n\nb"
        # clear never touches a running turn
        running2 = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "again")))
        await client.wait_notification(
            lambda m: m["method"] == "_agentd/event" and m["params"]["kind"] == "turn_started"
        )
        await _enqueue(client, sid, "x")
        cleared = await client.call("_agentd/queue/clear", {"sessionId": sid})
        assert cleared["queue"] == []
        again = (await running2)["result"]
        assert again["stopReason"] == "end_turn", again  # the exhausted script's text ends it normally
        await client.close()


async def test_interject_a_queued_entry_and_send_now(server_factory, workspace: Path):
    provider = scripted(
        {
            "text": "waiting",
            "tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30", "run_in_background": True}}],
        },
        {"tool_calls": [{"name": "wait", "arguments": {"timeout": 60}}]},
        {"text": "saw the steer"},
        {"text": "slow", "delay": 30},
        {"text": "urgent handled"},
    )
    async with server_factory(provider, permission_mode="bypass") as server:
        client, sid, running = await _setup(server, workspace)
        await client.wait_notification(
            lambda m: (
                m["method"] == "session/update"
                and m["params"]["update"].get("status") == "in_progress"
                and m["params"]["update"].get("toolCallId") == "call_2"
            )
        )
        # Only plain text can join a running turn: a queued `!cmd` is refused as such
        # (not "not found": it is there) and stays queued, unchanged.
        bang = await _enqueue(client, sid, "!echo hi")
        refused = await client.call("_agentd/queue/interject", {"sessionId": sid, "id": bang["promptId"]})
        assert refused["applied"] is False and refused["reason"] == "not_plain", refused
        assert [e["id"] for e in refused["queue"]] == [bang["promptId"]]
        version = refused["queue"][0]["version"]
        await client.call(
            "_agentd/queue/remove", {"sessionId": sid, "id": bang["promptId"], "expectedVersion": version}
        )
        entry = await _enqueue(client, sid, "steer: look at the logs")
        moved = await client.call("_agentd/queue/interject", {"sessionId": sid, "id": entry["promptId"]})
        assert moved["applied"] is True and moved["queue"] == []
        done = await running
        assert done["result"]["stopReason"] == "end_turn", done
        assert provider.requests[2].messages[-1].content == "steer: look at the logs"

        # send_now: cancels the running turn (recorded cancelled) and runs next.
        slow = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "slow one")))
        await client.wait_notification(
            lambda m: (
                m["method"] == "_agentd/event"
                and m["params"]["kind"] == "turn_started"
                and m["params"]["event"].get("kind") == "prompt"
            )
        )
        await _enqueue(client, sid, "later")
        urgent = await client.call("_agentd/prompt/send_now", {"sessionId": sid, "prompt": _blocks("urgent")})
        assert urgent["position"] == 1  # right behind the running front, before "later"
        assert (await slow)["result"]["stopReason"] == "cancelled"
        await client.wait_notification(
            lambda m: (
                m["method"] == "_agentd/event"
                and m["params"]["kind"] == "turn_ended"
                and m["params"]["event"]["outcome"] == "completed"
            )
        )
        assert [m.content for m in provider.requests[4].messages if m.role == "user"][-1] == "urgent"
        await client.close()


async def test_queued_prompts_survive_a_restart_and_resume_by_themselves(
    server_factory, db_url: str, workspace: Path
):
    first = scripted(GATE_STEP)
    async with server_factory(first, database_url=db_url, idle_evict_s=3600) as server:
        client, sid, _running = await _setup(server, workspace)
        await _enqueue(client, sid, "queued one")
        await client.call(
            "_agentd/prompt/enqueue",
            {"sessionId": sid, "prompt": _blocks("queued two"), "_meta": {"agentd": {"requestId": "r-2"}}},
        )
        await client.close()
    # The server went away with two prompts waiting. The next one runs them, in order,
    # without any client asking.
    second = scripted({"text": "done one"}, {"text": "done two"})
    async with server_factory(second, database_url=db_url) as server:
        store = server.app.state.agentd.store

        async def both_completed() -> bool:
            ended = [e.payload.get("outcome") for e in await store.read_events(sid) if e.kind == "turn_ended"]
            return ended.count("completed") == 2

        await until(both_completed, what="the two resumed turns")
        assert [m.content for m in second.requests[0].messages if m.role == "user"][-1] == "queued one"
        assert [m.content for m in second.requests[1].messages if m.role == "user"][-1] == "queued two"
        record = await store.get_session(sid)
        assert record is not None and record.queue is None  # nothing left waiting
        # The requestId is still known: a client retrying it learns the outcome, no rerun.
        client = await server.client()
        again = await client.call("session/prompt", text_prompt(sid, "queued two", requestId="r-2"))
        assert again["stopReason"] == "end_turn"
        assert len(second.requests) == 2
        await client.close()


def test_a_hold_expires_after_ten_minutes() -> None:
    """Pure: a held front blocks the queue until the hold runs out (default 10 minutes)."""
    from collections import deque
    from types import SimpleNamespace

    from agentd.session.queue import ops as queue_ops

    entry = SimpleNamespace(id="p1", kind="prompt", version=1, owner="u", last_editor="u", held_until=None)
    q: deque[Any] = deque([entry])
    assert queue_ops.hold(q, "p1", "editor", now=1000.0).applied
    assert queue_ops.HOLD_SECONDS == 600.0
    assert queue_ops.front_is_held(q, now=1000.0 + 599.9)
    assert not queue_ops.front_is_held(q, now=1000.0 + 600.0)
    assert entry.held_until is None  # expired holds are forgotten
    assert not queue_ops.hold(q, "nope", "editor", now=0).applied


async def test_a_held_prompt_runs_by_itself_when_its_hold_expires(server_factory, workspace: Path):
    """Nothing else happens in the session, yet the held prompt starts once the hold runs
    out (the hold time is configurable; here 1 s instead of 10 minutes)."""
    provider = scripted(GATE_STEP, {"text": "ran after the hold"}, loop=False)
    async with server_factory(provider, queue_hold_s=1.0) as server:
        client, sid, running = await _setup(server, workspace)
        pid = (await _enqueue(client, sid, "held one"))["promptId"]
        held = await client.call("_agentd/queue/hold", {"sessionId": sid, "id": pid})
        assert held["queue"][0]["held"] is True
        await client.notify("session/cancel", {"sessionId": sid})
        assert (await running)["result"]["stopReason"] == "cancelled"
        ended = await client.wait_notification(
            lambda m: (
                m["method"] == "_agentd/event"
                and m["params"]["kind"] == "turn_ended"
                and m["params"]["event"]["promptId"] == pid
            ),
            within=30,
        )
        assert ended["params"]["event"]["outcome"] == "completed"
        assert [m.content for m in provider.requests[-1].messages if m.role == "user"][-1] == "held one"
        assert agent_text(client.updates(sid)).endswith("ran after the hold")
        await client.close()


async def test_combine_never_merges_a_queued_command_into_plain_text(server_factory, workspace: Path):
    """A `!cmd` or `/command` waiting in the queue is not plain text: combine leaves it
    alone, and it still runs as a command when its turn comes.

    SPEC R-S3: "combine (merge consecutive plain-text prompts into the front, joined by a
    blank line …)"; seed 001 lists it among the L0 queue edits — "改队列（删/改/重排/hold
    combine）" — and decides a prompt's kind from its text: "/ 命令？· 多数 builtin → 本地做完，
    本 turn 结束 … · 普通文字 → 往下". A prompt's kind is fixed when it is queued, so combine
    sees it.
    """
    provider = scripted(GATE_STEP, {"text": "answered the plain prompts"}, loop=False)
    async with server_factory(provider) as server:
        client, sid, running = await _setup(server, workspace)
        client.on_request = allow()
        plain = (await _enqueue(client, sid, "first plain"))["promptId"]
        bang = (await _enqueue(client, sid, "!echo bang-ran-in-the-shell"))["promptId"]
        local = (await _enqueue(client, sid, "/usage"))["promptId"]
        listed = (await client.call("_agentd/queue/list", {"sessionId": sid}))["queue"]

        # Nothing plain follows the plain front: nothing to combine, nothing changed.
        refused = await client.call("_agentd/queue/combine", {"sessionId": sid})
        assert refused["applied"] is False and refused["reason"] == "nothing_to_combine"
        assert refused["queue"] == listed
        assert [(e["id"], e["kind"]) for e in listed] == [(plain, "prompt"), (bang, "bang"), (local, "local")]
        # Moved to the front, the command is not merged into either.
        await client.call("_agentd/queue/move", {"sessionId": sid, "order": [bang, plain]})
        refused = await client.call("_agentd/queue/combine", {"sessionId": sid})
        assert refused["applied"] is False
        assert [e["text"] for e in refused["queue"]] == [
            "!echo bang-ran-in-the-shell",
            "first plain",
            "/usage",
        ]

        await client.notify("session/cancel", {"sessionId": sid})
        await running
        await until(lambda: len(events_of(client, sid, "turn_ended")) == 4)
        ended = events_of(client, sid, "turn_ended")
        # The shell command ran as one (no sampling), the plain prompt was sampled, the
        # builtin answered locally.
        assert [e.get("reason") for e in ended[1:]] == ["shell_command", None, "local_command:usage"]
        outputs = [u for u in client.updates(sid) if u["sessionUpdate"] == "tool_call_update"]
        assert outputs and outputs[-1]["status"] == "completed"
        assert len(provider.requests) == 2
        users = [m.content for m in provider.requests[1].messages if m.role == "user"]
        assert users[-1] == "first plain"
        assert users[-2].startswith("I ran `echo bang-ran-in-the-shell` myself:")
        assert not any("!echo" in u for u in users)
        await client.close()


async def test_an_edit_classifies_the_entry_again(server_factory, workspace: Path):
    """A queued plain prompt edited into `!cmd` is a command from then on (and back):
    combine reads the kind the current text has.

    SPEC R-S3: "combine (merge consecutive plain-text prompts into the front …)".
    """
    provider = scripted(GATE_STEP, loop=False)
    async with server_factory(provider) as server:
        client, sid, running = await _setup(server, workspace)
        first = (await _enqueue(client, sid, "first"))["promptId"]
        second = (await _enqueue(client, sid, "second"))["promptId"]
        edited = await client.call(
            "_agentd/queue/edit", {"sessionId": sid, "id": second, "expectedVersion": 1, "text": "!ls"}
        )
        assert edited["applied"] is True and edited["queue"][1]["kind"] == "bang"
        refused = await client.call("_agentd/queue/combine", {"sessionId": sid})
        assert refused["applied"] is False
        back = await client.call(
            "_agentd/queue/edit",
            {"sessionId": sid, "id": second, "expectedVersion": 2, "text": "plain again"},
        )
        assert back["queue"][1]["kind"] == "prompt"
        combined = await client.call("_agentd/queue/combine", {"sessionId": sid})
        assert [(e["id"], e["text"]) for e in combined["queue"]] == [(first, "first\n\nplain again")]
        await client.call("_agentd/queue/clear", {"sessionId": sid})
        await client.notify("session/cancel", {"sessionId": sid})
        await running
        await client.close()


async def test_a_queued_command_is_stored_and_comes_back_a_command(
    server_factory, db_url: str, workspace: Path
):
    """Classified when queued, a `!cmd` is still stored with the queue (only compaction jobs
    are not) and still a command after a restart: combine leaves it alone there too.

    SPEC R-S3: "combine (merge consecutive plain-text prompts into the front …)".
    """
    first = scripted(GATE_STEP)
    async with server_factory(first, database_url=db_url) as server:
        client, sid, _running = await _setup(server, workspace)
        await _enqueue(client, sid, "plain")
        await _enqueue(client, sid, "!echo after-restart")
        await client.close()
    second = scripted(loop=False)
    async with server_factory(second, database_url=db_url, auto_resume=False) as server:
        client = await server.client()
        listed = (await client.call("_agentd/queue/list", {"sessionId": sid}))["queue"]
        assert [(e["kind"], e["text"]) for e in listed] == [
            ("prompt", "plain"),
            ("bang", "!echo after-restart"),
        ]
        refused = await client.call("_agentd/queue/combine", {"sessionId": sid})
        assert refused["applied"] is False and refused["queue"] == listed
        await client.close()
