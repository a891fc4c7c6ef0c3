"""`GET /sessions/{id}/events` (R-E3): Server-Sent Events with the snapshot first, `id:`
lines (= seq) on durable events only, resume with `Last-Event-ID` or `?after=`, comment
heartbeats without ids, 404 / 400 / 409 errors, and live events of a WebSocket prompt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.support.client import text_prompt
from tests.support.frames import stored_seqs
from tests.support.server import scripted
from tests.support.session import new_session
from tests.support.sse import SseStream, durable_ids, frame_seq, is_turn_ended, sse

SNAPSHOT = "_agentd/session/snapshot"


async def finished_session(server: Any, workspace: Path, *texts: str) -> str:
    client = await server.client()
    sid = await new_session(client, workspace)
    for t in texts:
        await client.call("session/prompt", text_prompt(sid, t))
    await client.close()
    return sid


async def drain_replay(stream: SseStream, last: int) -> list[dict[str, Any]]:
    """Frames up to (and including) the one with id `last` (after the snapshot)."""
    out: list[dict[str, Any]] = []
    while not out or out[-1].get("id") != str(last):
        out.append(await stream.next())
    return out


async def test_snapshot_first_and_ids_equal_seq(server_factory: Any, workspace: Path) -> None:
    provider = scripted({"text": "An answer for the SSE viewer.", "chunk_size": 4})
    async with server_factory(provider) as server:
        sid = await finished_session(server, workspace, "hi")
        seqs = await stored_seqs(server, sid)
        async with sse(server.base_url, sid) as stream:
            first = await stream.next()
            assert first["event"] == SNAPSHOT and "id" not in first
            assert first["data"]["lastSeq"] == seqs[-1] and first["data"]["status"] == "idle"
            replay = await drain_replay(stream, seqs[-1])
            for f in replay:
                if "id" in f:
                    assert int(f["id"]) == frame_seq(f), f
                else:
                    assert f["event"] == "session/update"  # available commands: no seq
                    assert frame_seq(f) is None
            assert durable_ids(replay) == seqs


async def test_resume_with_last_event_id_and_after(server_factory: Any, workspace: Path) -> None:
    provider = scripted({"text": "one"}, {"text": "two"})
    async with server_factory(provider) as server:
        sid = await finished_session(server, workspace, "a", "b")
        seqs = await stored_seqs(server, sid)
        n = seqs[len(seqs) // 2]
        for kw in ({"headers": {"Last-Event-ID": str(n)}}, {"params": {"after": n}}):
            async with sse(server.base_url, sid, **kw) as stream:
                assert (await stream.next())["event"] == SNAPSHOT
                replay = await drain_replay(stream, seqs[-1])
                assert durable_ids(replay) == [s for s in seqs if s > n], kw
        # At the very end: nothing to replay, and the stream still opens.
        async with sse(server.base_url, sid, params={"after": seqs[-1]}) as stream:
            assert (await stream.next())["event"] == SNAPSHOT


async def test_heartbeats_are_comments_without_ids(server_factory: Any, workspace: Path) -> None:
    async with server_factory(scripted({"text": "ok"}), sse_heartbeat_s=0.2) as server:
        sid = await finished_session(server, workspace, "hi")
        last = (await stored_seqs(server, sid))[-1]
        async with sse(server.base_url, sid, params={"after": last}) as stream:
            assert (await stream.next())["event"] == SNAPSHOT
            beats = []
            while len(beats) < 3:
                f = await stream.next(within=5)
                if f["comments"]:
                    beats.append(f)
            for b in beats:
                assert set(b) == {"comments"}, b  # no id, no event, no data
                assert b["comments"] == ["keepalive"]


async def test_errors(server_factory: Any, workspace: Path) -> None:
    async with server_factory(scripted({"text": "ok"})) as server:
        sid = await finished_session(server, workspace, "hi")
        last = (await stored_seqs(server, sid))[-1]
        async with httpx.AsyncClient(base_url=server.base_url, timeout=10) as http:
            assert (await http.get("/sessions/sess_nope/events")).status_code == 404
            bad = await http.get(f"/sessions/{sid}/events", headers={"Last-Event-ID": "abc"})
            assert bad.status_code == 400
            assert (await http.get(f"/sessions/{sid}/events", params={"after": last + 1})).status_code == 409
            beyond = await http.get(f"/sessions/{sid}/events", headers={"Last-Event-ID": str(last + 10)})
            assert beyond.status_code == 409


async def test_live_events_of_a_websocket_prompt(server_factory: Any, workspace: Path) -> None:
    text = "A live answer streamed to the browser, chunk by chunk. " * 3
    provider = scripted({"text": text, "chunk_size": 5, "chunk_delay": 0.001})
    async with server_factory(provider) as server:
        alice = await server.client()
        sid = await new_session(alice, workspace)
        async with sse(server.base_url, sid) as stream:
            assert (await stream.next())["event"] == SNAPSHOT
            result = await alice.call("session/prompt", text_prompt(sid, "go"))
            assert result["stopReason"] == "end_turn"
            await stream.until(is_turn_ended)
            chunks = [
                f
                for f in stream.frames
                if f.get("event") == "session/update"
                and f["data"]["update"]["sessionUpdate"] == "agent_message_chunk"
            ]
            assert len(chunks) > 5
            assert all("id" not in c for c in chunks), "transient chunks must not carry ids"
            assert all(c["data"]["_meta"]["agentd"].get("transient") for c in chunks)
            assert "".join(c["data"]["update"]["content"]["text"] for c in chunks) == text
            assert durable_ids(stream.frames) == await stored_seqs(server, sid)
            for f in stream.frames:
                if "id" in f:
                    assert int(f["id"]) == frame_seq(f)
        await alice.close()


async def test_after_must_be_a_seq_and_is_described(server_factory: Any, workspace: Path) -> None:
    async with server_factory(scripted({"text": "hi"})) as server:
        sid = await finished_session(server, workspace, "hello")
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            for bad in ("-1", "abc"):
                resp = await http.get(f"/sessions/{sid}/events", params={"after": bad})
                assert resp.status_code == 422, (bad, resp.text)
            spec = (await http.get("/openapi.json")).json()
        params = spec["paths"]["/sessions/{session_id}/events"]["get"]["parameters"]
        assert {(p["name"], p["in"]) for p in params} == {("session_id", "path"), ("after", "query")}
