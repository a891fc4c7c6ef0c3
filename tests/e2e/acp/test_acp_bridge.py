"""`agentd acp --connect` (issue 12, item 1, bridge mode): an editor's stdio relayed to a
shared `agentd serve`, tested with the official ACP Python SDK spawning the bridge and a real
server process — the whole session, and a `kill -9` + restart of the server mid-turn after
which the editor's prompt is still answered, nothing is duplicated and the editor was told."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from acp import text_block
from acp.schema import AgentMessageChunk
from acp.stdio import spawn_agent_process

from tests.support.acp_sdk import RecordingClient
from tests.support.acp_stdio import SCRIPT, Recorder, whole_session
from tests.support.client import WsClient
from tests.support.databases import stored_partial
from tests.support.polling import until
from tests.support.proc import agentd_serve_on as agentd_serve
from tests.support.proc import free_port, shared_database_url

WORDS = " ".join(f"w{i:03d}" for i in range(120))  # ~600 characters, streamed over ~4 s


@asynccontextmanager
async def bridged_editor(
    tmp_path: Path, port: int
) -> AsyncIterator[tuple[Any, RecordingClient, Recorder, Any]]:
    client = RecordingClient()
    recorder = Recorder()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env["AGENTD_HOME"] = str(tmp_path / "editor-home")  # the bridge keeps nothing there
    async with spawn_agent_process(
        client,
        sys.executable, "-m", "agentd.cli", "acp", "--connect", f"ws://127.0.0.1:{port}/acp",
        env=env,
        observers=[recorder],
    ) as (conn, process):  # fmt: skip
        # It asks for agentd's own notifications (turn ends among them): the bridge passes
        # them on only to an editor that asked.
        init = await asyncio.wait_for(
            conn.initialize(protocol_version=1, agentd={"notifications": ["*"]}), 60
        )
        assert init.agent_capabilities.load_session is True
        yield conn, client, recorder, process


async def test_an_editor_runs_a_whole_session_through_the_bridge(tmp_path: Path, workspace: Path) -> None:
    port = free_port()
    async with agentd_serve(tmp_path, port, SCRIPT):
        await whole_session(lambda: bridged_editor(tmp_path, port), workspace)
    assert (workspace / "out.txt").read_text() == "stdio\n"


def agentd_seq(frame: dict[str, Any]) -> int | None:
    params = frame.get("params") if "method" in frame else None
    meta = ((params or {}).get("_meta") or {}).get("agentd") or {} if isinstance(params, dict) else {}
    return meta.get("seq") if isinstance(meta.get("seq"), int) and not meta.get("transient") else None


def durable_seqs(recorder: Recorder, session_id: str) -> list[int]:
    seqs = []
    for frame in recorder.received:
        params = frame.get("params") if "method" in frame else None
        if not isinstance(params, dict) or params.get("sessionId") != session_id:
            continue
        meta = (params.get("_meta") or {}).get("agentd") or {}
        if isinstance(meta.get("seq"), int) and not meta.get("transient"):
            seqs.append(meta["seq"])
    return seqs


async def test_server_killed_and_restarted_mid_turn(tmp_path: Path, workspace: Path) -> None:
    port = free_port()
    script = {"loop": True, "steps": [{"text": WORDS, "chunk_size": 5, "chunk_delay": 0.03}]}
    async with contextlib.AsyncExitStack() as stack:
        first = await stack.enter_async_context(agentd_serve(tmp_path, port, script))
        conn, client, recorder, _ = await stack.enter_async_context(bridged_editor(tmp_path, port))
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("a long answer")]))
        await asyncio.wait_for(client.update_seen.wait(), 60)  # the turn is streaming

        # Killed only once a checkpoint holds some answer text (R-E1): before the first one
        # commits, the crash leaves no cut message in the log to end `interrupted` — what the
        # editor saw is then in no event, and the assertions below have nothing to find.
        async def checkpointed() -> bool:
            checkpoint = await stored_partial(shared_database_url(tmp_path), sid)
            return any(m["text"] for m in (checkpoint or {}).get("messages", []))

        await until(checkpointed, what="a partial-text checkpoint holding answer text")
        os.kill(first.pid, signal.SIGKILL)
        await first.wait()
        seen_before_restart = client.agent_text(sid)
        assert not prompt.done()  # its answer was lost with the server

        await stack.enter_async_context(agentd_serve(tmp_path, port, script))
        # The bridge reconnects and re-sends the prompt under its requestId: the server
        # answers with the recorded outcome of the turn the crash interrupted.
        answered = await asyncio.wait_for(prompt, 90)
        assert answered.stop_reason == "cancelled"
        again = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("again")]), 60)
        assert again.stop_reason == "end_turn"

        # What the log says, from an independent client.
        watcher = await WsClient.connect(f"http://127.0.0.1:{port}")
        try:
            await watcher.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
            final_frames = [
                f["params"]
                for f in watcher.frames
                if isinstance(f, dict)
                and f.get("method") == "session/update"
                and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            ]
            finals = [p["update"]["content"]["text"] for p in final_frames]
            (cut_seq,) = [
                p["_meta"]["agentd"]["seq"] for p in final_frames if p["_meta"]["agentd"].get("interrupted")
            ]
        finally:
            await watcher.close()

    seqs = durable_seqs(recorder, sid)
    assert seqs == sorted(set(seqs)), "the editor got a durable event twice or out of order"
    # Issue 29 item 9: the cut message's final event reached the editor although it had the
    # text already (an empty chunk, maybe): its seq and its `interrupted` mark.
    assert cut_seq in seqs
    (cut,) = [f["params"] for f in recorder.received if agentd_seq(f) == cut_seq]
    assert cut["_meta"]["agentd"].get("interrupted") is True
    texts = [u.content.text for s, u in client.updates if s == sid and isinstance(u, AgentMessageChunk)]
    notices = [t for t in texts if t.startswith("\n[agentd: ")]
    assert any("lost the connection" in t for t in notices), texts
    assert any("reconnected" in t for t in notices), texts
    shown = "".join(t for t in texts if t not in notices)
    # The interrupted answer: what the editor saw before the crash, nothing repeated after;
    # the log keeps a prefix of it (the checkpoint). Then the second answer, whole.
    first_answer = shown[: len(shown) - len(WORDS)]
    assert first_answer.startswith(seen_before_restart) or seen_before_restart.startswith(first_answer)
    assert WORDS.startswith(first_answer), "the first answer has a gap or a repeat"
    assert shown.endswith(WORDS)
    assert finals[-1] == WORDS
    assert first_answer.startswith(finals[0]), (finals[0], first_answer)
    interrupted = [
        p for m, p in client.ext_notifications if m.endswith("agentd/event") and p["kind"] == "turn_ended"
    ]
    assert interrupted, client.ext_notifications[:5]
    recorder.assert_all_frames_valid()
