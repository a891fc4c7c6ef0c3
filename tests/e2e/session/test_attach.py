"""`_agentd/session/attach` over WebSocket (R-E3): the snapshot first, then every durable
event after `afterSeq` (no gap, no duplicate), then the partial text of a message still
streaming, then live traffic; `-32017 resync_required` for a cursor beyond the log;
`_agentd/session/detach` stops delivery; a property-style check that clients attached at
random moments of a long turn reconstruct exactly what `session/load` replays."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

from agentd.infra.config import PermissionMode
from tests.support.client import RpcFailed, WsClient, text_prompt
from tests.support.frames import (
    ATTACH,
    DETACH,
    RESYNC_REQUIRED,
    SNAPSHOT,
    Counter,
    agentd_meta,
    attach,
    durable_seqs,
    has_turn_ended,
    is_agent_chunk,
    load_transcript,
    message_text,
    reach,
    response_index,
    stored_seqs,
    transcript,
)
from tests.support.polling import until
from tests.support.server import scripted
from tests.support.session import new_session, served_session
from tests.support.text import distinct_words

# ---------------------------------------------------------------------------- helpers


LONG = distinct_words(2000)  # ~2 kB streamed answer (not repetitive: the detector would cut it)


# ---------------------------------------------------------------------------- tests


async def test_attach_from_zero_snapshot_then_history_then_response(
    server_factory: Any, workspace: Path
) -> None:
    provider = scripted({"text": "Hello there, attached friend.", "chunk_size": 4})
    async with served_session(server_factory, workspace, provider) as (server, alice, sid):
        result = await alice.call("session/prompt", text_prompt(sid, "hi"))
        assert result["stopReason"] == "end_turn"

        bob = await server.client()
        resp = await attach(bob, sid, 0)
        at = response_index(bob, resp["id"])
        before = [f for f in bob.frames[resp["start"] : at] if isinstance(f, dict)]
        assert before[0]["method"] == SNAPSHOT, before[0]
        snap = before[0]["params"]
        assert snap == resp["result"]["snapshot"]
        last = (await stored_seqs(server, sid))[-1]
        assert snap["sessionId"] == sid
        assert snap["status"] == "idle" and "turnId" not in snap
        assert snap["lastSeq"] == last
        assert snap["mode"] == PermissionMode.DEFAULT.value
        assert isinstance(snap["model"], str) or snap["model"] is None
        assert snap["queue"] == [] and snap["pendingPermissions"] == []

        seqs = durable_seqs(before, sid)
        assert seqs == sorted(set(seqs)), "seqs must be strictly increasing"
        assert seqs == await stored_seqs(server, sid)
        # The final texts come whole, marked final.
        finals = [
            f
            for f in before
            if f.get("method") == "session/update"
            and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        ]
        assert len(finals) == 1 and agentd_meta(finals[0]).get("final") is True
        assert finals[0]["params"]["update"]["content"]["text"] == "Hello there, attached friend."
        assert transcript(before, sid) == await load_transcript(server, sid)
        await alice.close()
        await bob.close()


async def test_attach_after_n_then_live_no_gap_no_duplicate(server_factory: Any, workspace: Path) -> None:
    provider = scripted(
        {"text": "First answer, streamed in small pieces.", "chunk_size": 3},
        {"text": "Second answer, also streamed.", "chunk_size": 3},
    )
    async with served_session(server_factory, workspace, provider) as (server, alice, sid):
        await alice.call("session/prompt", text_prompt(sid, "one"))
        first = await stored_seqs(server, sid)
        n = first[len(first) // 2]

        bob = await server.client()
        resp = await attach(bob, sid, n)
        at = response_index(bob, resp["id"])
        assert bob.frames[resp["start"]]["method"] == SNAPSHOT
        assert durable_seqs(bob.frames[resp["start"] : at], sid) == [s for s in first if s > n]

        await alice.call("session/prompt", text_prompt(sid, "two"))
        await until(has_turn_ended(bob, sid))
        all_seqs = await stored_seqs(server, sid)
        got = durable_seqs(bob.frames, sid)
        assert got == [s for s in all_seqs if s > n], "a gap or a duplicate"
        # Bob saw the second prompt live: the user text and the streamed answer.
        live = transcript(bob.frames[at:], sid)
        assert ("user_message_chunk", live[0][1], "two") == live[0]
        assert [t[2] for t in live if t[0] == "agent_message_chunk"] == ["Second answer, also streamed."]
        await alice.close()
        await bob.close()


async def test_attach_mid_stream_gets_partial_then_rest(server_factory: Any, workspace: Path) -> None:
    provider = scripted({"text": LONG, "chunk_size": 5, "chunk_delay": 0.002})
    async with served_session(server_factory, workspace, provider) as (server, alice, sid):
        prompt = asyncio.create_task(alice.call("session/prompt", text_prompt(sid, "stream")))
        chunks = Counter(alice, is_agent_chunk)
        total_chunks = len(LONG) // 5
        moments = [1, 3, total_chunks // 4, total_chunks // 2, (3 * total_chunks) // 4, total_chunks - 5]
        watchers: list[WsClient] = []
        for m in moments:
            await reach(chunks, m, prompt)
            w = await server.client()
            await attach(w, sid, 0)
            watchers.append(w)
        assert (await prompt)["stopReason"] == "end_turn"
        mid = next(
            f["params"]["update"]["messageId"]
            for f in alice.frames
            if isinstance(f, dict) and is_agent_chunk(f)
        )
        assert message_text(alice.frames, sid, mid) == LONG
        seeded = 0
        for w in watchers:
            await until(has_turn_ended(w, sid))
            assert message_text(w.frames, sid, mid) == LONG, "duplicated or missing characters"
            own = [
                f
                for f in w.frames
                if isinstance(f, dict) and is_agent_chunk(f) and f["params"]["update"]["messageId"] == mid
            ]
            if own and not agentd_meta(own[0]).get("final"):
                seeded += 1
                # Live path: partial seed then the rest; the whole is exactly the text.
                assert "".join(f["params"]["update"]["content"]["text"] for f in own) == LONG
            assert transcript(w.frames, sid) == await load_transcript(server, sid)
        assert seeded >= 3, "most watchers should have attached while the message streamed"
        for c in [alice, *watchers]:
            await c.close()


async def test_snapshot_of_running_turn_with_queue_and_pending_permission(
    server_factory: Any, workspace: Path
) -> None:
    provider = scripted(
        {
            "text": "I will write the file.",
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "out.txt", "content": "hi"}, "id": "call_w"}
            ],
        },
        {"text": "Written."},
        {"text": "Second prompt answered."},
    )
    async with server_factory(provider) as server:
        alice = await server.client()  # never answers permission requests
        sid = await new_session(alice, workspace)
        first = asyncio.create_task(alice.call("session/prompt", text_prompt(sid, "write it")))
        await until(lambda: any(r["method"] == "session/request_permission" for r in alice.server_requests))
        second = asyncio.create_task(alice.call("session/prompt", text_prompt(sid, "and then this")))
        actor = await server.app.state.agentd.manager.get(sid)
        await until(lambda: actor.queued == 1)

        answered_by_carol = asyncio.Event()

        async def bob_answers(msg: dict[str, Any]) -> dict[str, Any]:
            await answered_by_carol.wait()  # carol answers first
            return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}

        async def carol_answers(msg: dict[str, Any]) -> dict[str, Any]:
            answered_by_carol.set()
            return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

        bob = await server.client()
        bob.on_request = bob_answers
        carol = await server.client()
        carol.on_request = carol_answers
        # Bob attaches first, while the permission is still pending.
        snap = (await attach(bob, sid, 0))["result"]["snapshot"]
        assert snap["status"] == "running" and snap["turnId"].startswith("turn")
        assert [q["text"] for q in snap["queue"]] == ["and then this"]
        assert len(snap["pendingPermissions"]) == 1
        pending = snap["pendingPermissions"][0]
        assert pending["toolCall"]["toolCallId"] == "call_w"
        assert {o["optionId"] for o in pending["options"]} >= {"allow_once", "reject_once"}
        await until(lambda: any(r["method"] == "session/request_permission" for r in bob.server_requests))
        await attach(carol, sid, 0)

        assert (await first)["stopReason"] == "end_turn"
        assert (await second)["stopReason"] == "end_turn"
        assert (workspace / "out.txt").read_text() == "hi", "carol's allow (the first answer) must win"
        resolved = [
            f["params"]
            for f in alice.frames
            if isinstance(f, dict) and f.get("method") == "_agentd/permission/resolved"
        ]
        assert len(resolved) == 1 and resolved[0]["outcome"] == "selected"
        assert resolved[0]["optionId"] == "allow_once"
        for r in (bob.server_requests[0], carol.server_requests[0]):
            assert r["params"]["toolCall"]["toolCallId"] == "call_w"
        for c in (alice, bob, carol):
            await c.close()


async def test_cursor_beyond_last_seq_is_resync_required(server_factory: Any, workspace: Path) -> None:
    async with served_session(server_factory, workspace, scripted({"text": "ok"})) as (server, alice, sid):
        await alice.call("session/prompt", text_prompt(sid, "hi"))
        last = (await stored_seqs(server, sid))[-1]

        bob = await server.client()
        try:
            await bob.call(ATTACH, {"sessionId": sid, "afterSeq": last + 5})
        except RpcFailed as exc:
            assert exc.code == RESYNC_REQUIRED
            assert exc.error["data"]["reason"] == "resync_required"
            assert exc.error["data"]["lastSeq"] == last
        else:
            raise AssertionError("expected resync_required")
        assert not any(isinstance(f, dict) and f.get("method") == SNAPSHOT for f in bob.frames)
        # The connection stays usable: a valid cursor works, exactly at the end.
        resp = await attach(bob, sid, last)
        assert resp["result"]["snapshot"]["lastSeq"] == last
        assert durable_seqs(bob.frames, sid) == []
        await alice.close()
        await bob.close()


async def test_a_failed_attach_keeps_the_existing_subscription(server_factory: Any, workspace: Path) -> None:
    provider = scripted({"text": "first"}, {"text": "still delivered"})
    async with served_session(server_factory, workspace, provider) as (server, alice, sid):
        await alice.call("session/prompt", text_prompt(sid, "one"))
        last = (await stored_seqs(server, sid))[-1]
        bob = await server.client()
        await attach(bob, sid, 0)
        try:
            await bob.call(ATTACH, {"sessionId": sid, "afterSeq": last + 1})
        except RpcFailed as exc:
            assert exc.code == RESYNC_REQUIRED
        else:
            raise AssertionError("expected resync_required")
        await alice.call("session/prompt", text_prompt(sid, "two"))
        await until(has_turn_ended(bob, sid, 2))  # the first subscription still delivers
        assert durable_seqs(bob.frames, sid) == await stored_seqs(server, sid)
        assert "still delivered" in [t[2] for t in transcript(bob.frames, sid)]
        for c in (alice, bob):
            await c.close()


async def test_detach_stops_delivery(server_factory: Any, workspace: Path) -> None:
    provider = scripted({"text": "first"}, {"text": "second answer"})
    async with served_session(server_factory, workspace, provider) as (server, alice, sid):
        bob = await server.client()
        carol = await server.client()
        await attach(bob, sid, 0)
        await attach(carol, sid, 0)
        await alice.call("session/prompt", text_prompt(sid, "one"))
        await until(has_turn_ended(bob, sid))
        assert await bob.call(DETACH, {"sessionId": sid}) == {"detached": True}
        assert await bob.call(DETACH, {"sessionId": sid}) == {"detached": False}
        seen = len(bob.frames)
        await alice.call("session/prompt", text_prompt(sid, "two"))
        await until(has_turn_ended(carol, sid, 2))  # carol, still attached, got it all
        assert "second answer" in [t[2] for t in transcript(carol.frames, sid)]
        late = [f for f in bob.frames[seen:] if isinstance(f, dict) and "method" in f]
        assert late == [], f"delivered after detach: {late[:3]}"
        for c in (alice, bob, carol):
            await c.close()


async def test_random_attach_moments_reconstruct_the_replay(server_factory: Any, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("some notes\n")
    steps = [
        {
            "reasoning": "Look first. " + distinct_words(110, start=1000),
            "text": "Looking around. " + distinct_words(300, start=2000),
            "chunk_size": 4,
            "chunk_delay": 0.001,
            "tool_calls": [
                {"name": "list_dir", "arguments": {"path": "."}},
                {"name": "read_file", "arguments": {"path": "notes.txt"}},
            ],
        },
        {
            "text": "Running a command now. " + distinct_words(320, start=3000),
            "chunk_size": 4,
            "chunk_delay": 0.001,
            "tool_calls": [{"name": "bash", "arguments": {"command": "echo hi && echo there"}}],
        },
        {
            "text": "All done, here is the summary. " + distinct_words(600, start=4000),
            "chunk_size": 4,
            "chunk_delay": 0.001,
        },
    ]
    for seed in (1, 2, 3):
        rng = random.Random(seed)
        async with served_session(
            server_factory,
            workspace,
            scripted(*steps),
            permission_mode=PermissionMode.BYPASS,
            home=workspace.parent / f"home{seed}",
        ) as (server, alice, sid):
            prompt = asyncio.create_task(alice.call("session/prompt", text_prompt(sid, "go")))
            notes = Counter(alice, lambda f: f.get("method") in ("session/update", "_agentd/event"))
            moments = sorted(rng.sample(range(1, 400), 5))
            watchers: list[WsClient] = []
            for m in moments:
                await reach(notes, m, prompt)
                w = await server.client()
                await attach(w, sid, 0)
                watchers.append(w)
            assert (await prompt)["stopReason"] == "end_turn"
            expected = await load_transcript(server, sid)
            assert sum(1 for t in expected if t[0] == "tool") == 3
            assert all(t[2] == "completed" for t in expected if t[0] == "tool")
            for m, w in zip(moments, watchers, strict=True):
                await until(has_turn_ended(w, sid))
                assert transcript(w.frames, sid) == expected, f"seed {seed}, attached after {m} notifications"
                seqs = durable_seqs(w.frames, sid)
                assert seqs == await stored_seqs(server, sid), f"seed {seed}: gap or duplicate"
            for c in [alice, *watchers]:
                await c.close()
