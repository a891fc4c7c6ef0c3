"""R-E1 when the provider's stream is cut mid-message (issue 9): the cut-off message still
gets its final event with exactly the text streamed so far, marked `interrupted` (and
`discarded`: the retried call replaces it in the conversation), and the partial-text
checkpoint is cleared in the same commit — live, and after a `kill -9` that follows the
cut. A cut always lands within a second of the last checkpoint (they are written every
second while text streams): the final text is what was shown, not the checkpoint's."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from agentd.core.events import EventKind
from agentd.store.db import Store
from tests.support.client import WsClient, text_prompt
from tests.support.proc import agentd_process, free_port, scripted_serve_args, wait_healthy
from tests.support.server import scripted
from tests.support.spies import SubmitSpy

TEXT = "".join(f"tok{i:03d} " for i in range(120))  # 840 characters
CUT_AFTER = 40  # chunks of 7 characters: 280 characters, ~2 s of streaming at 50 ms a chunk


def cut_step(chunk_delay: float, cut_after: int = CUT_AFTER) -> dict[str, Any]:
    return {
        "text": TEXT,
        "chunk_size": 7,
        "chunk_delay": chunk_delay,
        "error": {"kind": "provider_unavailable", "message": "stream cut", "after_chunks": cut_after},
    }


def streamed_by_message(client: WsClient, session_id: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for u in client.updates(session_id):
        if u["sessionUpdate"] == "agent_message_chunk":
            out[u["messageId"]] = out.get(u["messageId"], "") + u["content"]["text"]
    return out


def is_event(kind: str) -> Any:
    return lambda m: m.get("method") == "_agentd/event" and m["params"]["kind"] == kind


# 2 chunks: cut right after the first checkpoint (written as the first chunk arrives);
# 40 chunks: after about two seconds, within a second of the latest one.
@pytest.mark.parametrize("cut_after", [2, CUT_AFTER])
async def test_a_cut_stream_ends_its_message_interrupted_with_the_streamed_text(
    server_factory, workspace: Path, db_url: str, cut_after: int
) -> None:
    provider = scripted(cut_step(0.05, cut_after), {"text": "Second attempt."})
    async with server_factory(provider, database_url=db_url) as server:
        spy = SubmitSpy(server.app.state.agentd.writer)
        client = await server.client()
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        result = await client.call("session/prompt", text_prompt(sid, "stream"))
        assert result["stopReason"] == "end_turn"  # the retry succeeded

        streamed = streamed_by_message(client, sid)
        cut_id, shown = next(iter(streamed.items()))
        assert shown == TEXT[: cut_after * 7]
        # The live client got the final marker of the cut message, flagged interrupted.
        finals = [f["params"]["event"] for f in client.frames if is_event("agent_message")(f)]
        assert finals[0] == {"messageId": cut_id, "text": shown, "discarded": True, "interrupted": True}
        assert finals[1]["text"] == "Second attempt." and "interrupted" not in finals[1]

        # A checkpoint of that message was stored before the cut (a prefix of what was shown).
        written = spy.checkpoints()
        held = [
            p["messages"][0]["text"]
            for _, p in written
            if p is not None and p["messages"][0]["messageId"] == cut_id
        ]
        assert held and all(shown.startswith(t) for t in held)
        # The final text is submitted first, the cleared checkpoint right after it: one commit.
        kinds = [
            kw["event"].payload.get("messageId") if kw.get("event") is not None else kw.get("session_fields")
            for _, kw in spy.calls
        ]
        at = next(
            i
            for i, (_, kw) in enumerate(spy.calls)
            if kw.get("event") is not None
            and kw["event"].kind is EventKind.AGENT_MESSAGE
            and kw["event"].payload["messageId"] == cut_id
        )
        assert kinds[at + 1] == {"partial": None}

        # A client loading the session later sees the same text, marked final and interrupted.
        viewer = await server.client()
        await viewer.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        replayed = [
            f["params"]
            for f in viewer.frames
            if f.get("method") == "session/update"
            and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        ]
        assert replayed[0]["update"]["content"]["text"] == shown
        assert replayed[0]["_meta"]["agentd"]["final"] is True
        assert replayed[0]["_meta"]["agentd"]["interrupted"] is True
        await viewer.close()
        await client.close()

    store = await Store.open(db_url)
    try:
        assert (await store.get_session(sid)).partial is None
        events = await store.read_events(sid)
        cut_finals = [
            e.payload for e in events if e.kind == "agent_message" and e.payload["messageId"] == cut_id
        ]
        assert cut_finals == [{"messageId": cut_id, "text": shown, "discarded": True, "interrupted": True}]
    finally:
        await store.close()


async def test_after_a_cut_and_a_kill_9_the_message_has_one_interrupted_final(
    server_factory, workspace: Path, tmp_path: Path
) -> None:
    """`agentd serve` is killed while it waits on the retry of a cut stream: after the
    restart the cut message has its one final event (not a second one recovered from a
    stale checkpoint), the turn ends interrupted, and no checkpoint is left."""
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"
    script = tmp_path / "script.json"
    # The retried call hangs (30 s before its first token): the server dies waiting on it.
    script.write_text(json.dumps({"steps": [cut_step(0.05), {"delay": 30, "text": "never reached"}]}))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(AGENTD_HOME=str(tmp_path / "home"), HOME=str(tmp_path))
    args = scripted_serve_args(port, db_url, script)
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    async with agentd_process(args, env=env, log=log) as proc:
        await wait_healthy(base, proc, log)
        client = await WsClient.connect(base)
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        prompt = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "stream")))
        # The retry decision is committed (and so published) after the cut message's final.
        await client.wait_notification(is_event("retry"), within=30)
        os.kill(proc.pid, signal.SIGKILL)
        assert await proc.wait() == -signal.SIGKILL
        prompt.cancel()
        with contextlib.suppress(BaseException):
            await prompt  # never answered: the server died
        await client.close()
    cut_id, shown = next(iter(streamed_by_message(client, sid).items()))
    assert shown == TEXT[: CUT_AFTER * 7]

    async with server_factory(scripted({"text": "after"}), database_url=db_url) as server:
        viewer = await server.client()
        await viewer.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        texts = [
            (f["params"]["update"]["content"]["text"], f["params"]["_meta"]["agentd"].get("interrupted"))
            for f in viewer.frames
            if f.get("method") == "session/update"
            and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        ]
        assert texts == [(shown, True)]
        await viewer.close()

    store = await Store.open(db_url)
    try:
        assert (await store.get_session(sid)).partial is None
        events = await store.read_events(sid)
        finals = [e.payload for e in events if e.kind == "agent_message"]
        assert finals == [{"messageId": cut_id, "text": shown, "discarded": True, "interrupted": True}]
        assert [e.payload["outcome"] for e in events if e.kind == "turn_ended"] == ["interrupted"]
    finally:
        await store.close()
