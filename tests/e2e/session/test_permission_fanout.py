"""Permission fan-out (R-T4; issue 5, acceptance item 6), end to end over real sockets.

"Permission requests go to every attached client that can answer; the first answer wins
and every client gets `_agentd/permission/resolved` (also when a cancel or turn end clears
it) so stale dialogs close; a request with no client attached waits (visible to clients
that attach later) until answered, cancelled, or a configurable timeout."

The clients here never answer by themselves: each test reads the
`session/request_permission` requests a client received and answers them explicitly, so
the order of the answers is decided by the test, not by scheduling. Every test runs on
SQLite and on Postgres (R-E5).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from agentd.infra.config import PermissionMode
from tests.support.client import WsClient, text_prompt
from tests.support.frames import attach, has_turn_ended
from tests.support.permissions import (
    ASK,
    RESOLVED,
    answer,
    asked,
    asks,
    bash,
    resolutions,
    resolved,
    round_trip,
    write,
)
from tests.support.polling import until, value_of
from tests.support.server import scripted
from tests.support.session import events, new_session, served_session, shown_text
from tests.support.sse import sse

# ---------------------------------------------------------------------------- helpers


async def stored(server: Any, session_id: str, kind: str) -> list[dict[str, Any]]:
    """Payloads of the session's durable events of one kind, from the store."""
    rows = await server.app.state.agentd.store.read_events(session_id, after_seq=0)
    return [r.payload for r in rows if r.kind == kind]


async def until_stored(server: Any, session_id: str, kind: str, n: int = 1) -> list[dict[str, Any]]:
    """Poll the store (the log is written behind the live stream) until `n` are there."""

    async def enough() -> list[dict[str, Any]] | None:
        found = await stored(server, session_id, kind)
        return found if len(found) >= n else None

    return await value_of(enough, what=f"{n} stored {kind} event(s)")


def final_status(client: WsClient, session_id: str, tool_call_id: str) -> dict[str, Any]:
    """The last status-carrying update of one tool call."""
    last: dict[str, Any] | None = None
    for u in client.updates(session_id):
        if u["sessionUpdate"] in ("tool_call", "tool_call_update") and u["toolCallId"] == tool_call_id:
            if "status" in u:
                last = u
    assert last is not None, f"no status for {tool_call_id}"
    return last


async def enqueue_over_http(base_url: str, session_id: str, text: str) -> dict[str, Any]:
    """`_agentd/prompt/enqueue` through `POST /rpc`: a prompt from no attached client."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "_agentd/prompt/enqueue",
        "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
    }
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        resp = await http.post("/rpc", json=body)
    resp.raise_for_status()
    assert "error" not in resp.json(), resp.json()
    return resp.json()["result"]


async def without_clients(server: Any, session_id: str) -> None:
    """Wait until the session has no subscriber left (a closed socket detaches)."""
    actor = server.app.state.agentd.manager.live_actor(session_id)
    if actor is not None:
        await until(lambda: len(actor.hub) == 0)


# ---------------------------------------------------------------------------- tests


async def test_request_goes_to_every_attached_client_and_the_first_answer_wins(
    server_factory: Any, db_url: str, workspace: Path
) -> None:
    """Three WebSocket clients (one created the session, one attached with
    `_agentd/session/attach`, one with `session/load`) are all asked; the second client's
    allow_once is the first answer and wins: the command runs once, every client gets the
    same `_agentd/permission/resolved`. Later answers from the other two (even a
    reject_always) change nothing: not the run, not the recorded outcome, not the
    session's permission memory."""
    provider = scripted(
        {"text": "Running it.", "tool_calls": [bash("call_run", "echo ran >> ran.txt")]},
        {"text": "It ran."},
        {"tool_calls": [bash("call_again", "echo again >> ran.txt")]},
        {"text": "Ran again."},
    )
    async with server_factory(
        provider, database_url=db_url, permission_mode=PermissionMode.DEFAULT
    ) as server:
        alice = await server.client()
        sid = await new_session(alice, workspace)
        bob = await server.client()
        await attach(bob, sid, 0)
        carol = await server.client()
        await carol.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        clients = (alice, bob, carol)

        prompt = asyncio.create_task(alice.call("session/prompt", text_prompt(sid, "run it")))
        requests = [await asked(c) for c in clients]
        for r in requests:
            assert r["params"]["sessionId"] == sid
            assert r["params"]["toolCall"]["toolCallId"] == "call_run"
            assert {o["optionId"] for o in r["params"]["options"]} >= {"allow_once", "reject_once"}
        assert not (workspace / "ran.txt").exists(), "ran before anyone answered"
        (request_id,) = {e["requestId"] for c in clients for e in events(c, sid, "permission_requested")}
        # The request itself names it too, so a dialog can be matched to its resolution.
        assert {r["params"]["_meta"]["agentd"]["requestId"] for r in requests} == {request_id}

        await answer(bob, requests[1], "allow_once")
        result = await prompt
        assert result["stopReason"] == "end_turn"
        assert (workspace / "ran.txt").read_text() == "ran\n"
        assert final_status(alice, sid, "call_run")["status"] == "completed"
        for c in clients:
            got = await resolved(c, sid)
            assert (got["requestId"], got["outcome"], got.get("optionId")) == (
                request_id,
                "selected",
                "allow_once",
            )

        # The stale dialogs of alice and carol are answered late: nothing happens.
        await answer(carol, requests[2], "reject_once")
        await answer(alice, requests[0], "reject_always")
        for c in clients:
            await round_trip(c)
        await until(has_turn_ended(carol, sid))
        assert (workspace / "ran.txt").read_text() == "ran\n", "the command ran more than once"
        assert await stored(server, sid, "permission_resolved") == [
            {"requestId": request_id, "outcome": "selected", "optionId": "allow_once"}
        ]
        for c in clients:
            assert len(resolutions(c, sid)) == 1

        # alice's late reject_always was not remembered: the next bash call is asked again.
        again = asyncio.create_task(alice.call("session/prompt", text_prompt(sid, "once more")))
        second = [await asked(c, 2) for c in clients]
        assert {r["params"]["toolCall"]["toolCallId"] for r in second} == {"call_again"}
        await answer(carol, second[2], "allow_once")
        assert (await again)["stopReason"] == "end_turn"
        assert (workspace / "ran.txt").read_text() == "ran\nagain\n"
        for c in clients:
            await c.close()


async def test_first_answer_wins_when_it_is_a_reject(
    server_factory: Any, db_url: str, workspace: Path
) -> None:
    """Alice rejects first, then Bob allows: the rejection stands, the file is never
    written, the call fails as rejected and the turn stops (`permission_rejected`)."""
    provider = scripted(
        {"tool_calls": [write("call_w", "out.txt", "data")]},
        {"text": "never reached in this turn"},
    )
    async with served_session(
        server_factory, workspace, provider, database_url=db_url, permission_mode=PermissionMode.DEFAULT
    ) as (server, alice, sid):
        bob = await server.client()
        await attach(bob, sid, 0)

        prompt = asyncio.create_task(alice.call("session/prompt", text_prompt(sid, "write it")))
        to_alice, to_bob = await asked(alice), await asked(bob)
        await answer(alice, to_alice, "reject_once")
        await round_trip(alice)  # the server has read alice's answer before bob answers
        await answer(bob, to_bob, "allow_once")
        result = await prompt

        assert result["stopReason"] == "cancelled"
        assert result["_meta"]["agentd"]["reason"] == "permission_rejected"
        await round_trip(bob)
        assert not (workspace / "out.txt").exists(), "a later allow overrode the first answer"
        for c in (alice, bob):
            final = final_status(c, sid, "call_w")
            assert final["status"] == "failed"
            assert "rejected by the user" in shown_text(final)
            got = await resolved(c, sid)
            assert (got["outcome"], got.get("optionId")) == ("selected", "reject_once")
            assert len(resolutions(c, sid)) == 1
        assert len(provider.requests) == 1, "the model was called again after the rejection"
        await alice.close()
        await bob.close()


async def test_request_with_no_client_attached_waits_for_the_next_client(
    server_factory: Any, db_url: str, workspace: Path
) -> None:
    """A prompt enqueued over HTTP while no client is attached: its permission request
    stays pending. A client that attaches later finds it in the snapshot's
    `pendingPermissions`, is asked, and its answer lets the turn finish."""
    provider = scripted(
        {"tool_calls": [write("call_w", "out.txt", "hello")]},
        {"text": "Written."},
    )
    async with served_session(
        server_factory, workspace, provider, database_url=db_url, permission_mode=PermissionMode.DEFAULT
    ) as (server, creator, sid):
        await creator.close()
        await without_clients(server, sid)

        queued = await enqueue_over_http(server.base_url, sid, "write it")
        assert queued["position"] == 0
        (requested,) = await until_stored(server, sid, "permission_requested")
        assert requested["toolCall"]["toolCallId"] == "call_w"

        bob = await server.client()
        snap = (await attach(bob, sid, 0))["result"]["snapshot"]
        assert snap["status"] == "running"
        assert [p["requestId"] for p in snap["pendingPermissions"]] == [requested["requestId"]]
        assert snap["pendingPermissions"][0]["toolCall"]["toolCallId"] == "call_w"
        assert await stored(server, sid, "permission_resolved") == [], "resolved with nobody to ask"
        assert not (workspace / "out.txt").exists()

        request = await asked(bob)
        assert request["params"]["toolCall"]["toolCallId"] == "call_w"
        await answer(bob, request, "allow_once")
        await until(has_turn_ended(bob, sid))
        assert events(bob, sid, "turn_ended")[-1]["outcome"] == "completed"
        assert (workspace / "out.txt").read_text() == "hello"
        got = await resolved(bob, sid)
        assert (got["requestId"], got["outcome"], got.get("optionId")) == (
            requested["requestId"],
            "selected",
            "allow_once",
        )
        assert final_status(bob, sid, "call_w")["status"] == "completed"
        await bob.close()


async def test_request_is_refused_when_the_last_client_able_to_answer_leaves(
    server_factory: Any, db_url: str, workspace: Path
) -> None:
    """Issue 29 item 1: the only client is asked and disconnects without answering — the
    question ends refused at once (`unanswered`), the call is not run and the turn ends
    `cancelled`, instead of waiting for the permission timeout; the next client to attach
    finds the turn over."""
    provider = scripted(
        {"tool_calls": [bash("call_b", "echo ok > ok.txt")]},
        {"text": "Done."},
    )
    async with served_session(
        server_factory, workspace, provider, database_url=db_url, permission_mode=PermissionMode.DEFAULT
    ) as (server, alice, sid):
        prompt = asyncio.create_task(alice.request("session/prompt", text_prompt(sid, "run")))
        await asked(alice)
        (requested,) = events(alice, sid, "permission_requested")
        await alice.close()
        prompt.cancel()
        await without_clients(server, sid)

        bob = await server.client()
        await attach(bob, sid, 0)
        await until(has_turn_ended(bob, sid))
        assert events(bob, sid, "turn_ended")[-1]["outcome"] == "cancelled"
        got = await resolved(bob, sid)
        assert (got["requestId"], got["outcome"]) == (requested["requestId"], "unanswered")
        assert not (workspace / "ok.txt").exists()
        await bob.close()


async def test_cancel_resolves_the_pending_request_for_every_client(
    server_factory: Any, db_url: str, workspace: Path
) -> None:
    """`session/cancel` while three clients are being asked: all three get
    `_agentd/permission/resolved` with outcome `cancelled`, the prompt ends `cancelled`,
    and an allow that arrives afterwards runs nothing."""
    provider = scripted(
        {"tool_calls": [write("call_w", "out.txt", "no")]},
        {"text": "Fine."},
    )
    async with server_factory(
        provider, database_url=db_url, permission_mode=PermissionMode.DEFAULT
    ) as server:
        alice = await server.client()
        sid = await new_session(alice, workspace)
        bob = await server.client()
        await attach(bob, sid, 0)
        carol = await server.client()
        await attach(carol, sid, 0)
        clients = (alice, bob, carol)

        prompt = asyncio.create_task(alice.call("session/prompt", text_prompt(sid, "write it")))
        requests = [await asked(c) for c in clients]
        (request_id,) = {e["requestId"] for c in clients for e in events(c, sid, "permission_requested")}
        await alice.notify("session/cancel", {"sessionId": sid})
        result = await prompt

        assert result["stopReason"] == "cancelled"
        assert result["_meta"]["agentd"]["reason"] == "user_cancelled"
        for c in clients:
            got = await resolved(c, sid)
            assert (got["requestId"], got["outcome"]) == (request_id, "cancelled")
            assert "optionId" not in got
            assert final_status(c, sid, "call_w")["status"] == "failed"

        await answer(bob, requests[1], "allow_once")  # a stale dialog answered late
        await round_trip(bob)
        assert not (workspace / "out.txt").exists()
        assert await stored(server, sid, "permission_resolved") == [
            {"requestId": request_id, "outcome": "cancelled"}
        ]
        late = await server.client()
        snap = (await attach(late, sid, 0))["result"]["snapshot"]
        assert snap["status"] == "idle" and snap["pendingPermissions"] == []
        assert asks(late) == []
        for c in (*clients, late):
            await c.close()


async def test_sse_viewer_is_not_asked_but_sees_the_resolution(
    server_factory: Any, db_url: str, workspace: Path
) -> None:
    """An SSE viewer (`GET /sessions/{id}/events`) cannot answer: with only a viewer
    attached the request stays pending (the viewer does not count as a client that can
    answer); the viewer sees the request and its resolution as events, never a question.
    A WebSocket client that attaches is asked and answers."""
    provider = scripted(
        {"tool_calls": [write("call_w", "out.txt", "seen")]},
        {"text": "Written."},
    )
    async with served_session(
        server_factory, workspace, provider, database_url=db_url, permission_mode=PermissionMode.DEFAULT
    ) as (server, creator, sid):
        await creator.close()
        await without_clients(server, sid)

        async with sse(server.base_url, sid) as viewer:
            await viewer.next()  # the snapshot
            await enqueue_over_http(server.base_url, sid, "write it")
            requested = await viewer.until(
                lambda f: f.get("event") == "_agentd/event" and f["data"]["kind"] == "permission_requested"
            )
            request_id = requested["data"]["event"]["requestId"]
            await until_stored(server, sid, "permission_requested")
            assert await stored(server, sid, "permission_resolved") == []

            bob = await server.client()
            snap = (await attach(bob, sid, 0))["result"]["snapshot"]
            assert [p["requestId"] for p in snap["pendingPermissions"]] == [request_id]
            await answer(bob, await asked(bob), "allow_once")

            got = await viewer.until(lambda f: f.get("event") == RESOLVED)
            assert got["data"]["sessionId"] == sid
            assert (got["data"]["requestId"], got["data"]["outcome"], got["data"].get("optionId")) == (
                request_id,
                "selected",
                "allow_once",
            )
            await viewer.until(
                lambda f: f.get("event") == "_agentd/event" and f["data"]["kind"] == "turn_ended"
            )
            assert not any(f.get("event") == ASK for f in viewer.frames), "an SSE viewer was asked"
            assert [f for f in viewer.frames if f.get("event") == RESOLVED] == [got]
        assert (workspace / "out.txt").read_text() == "seen"
        assert (await resolved(bob, sid))["requestId"] == request_id
        await bob.close()
