"""R-E5 / R-E6 acceptance: sessions survive a server restart (clean stop, and `kill -9` of
a real `agentd serve` process). After a restart `session/load` replays the same history,
and the conversation continues with the model seeing the full earlier context."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
import signal
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy.engine import make_url

from agentd.core import INTERRUPTED_RESULT
from agentd.core.conversation import Message, ToolCall
from agentd.infra.config import PermissionMode
from agentd.loop.reminders import system_reminder
from agentd.loop.turn_reminders import TASK_RECOVERY_TEXT
from agentd.store.db import Batch, Store
from tests.support.client import WsClient, agent_text, text_prompt
from tests.support.databases import stored_partial
from tests.support.frames import conversation_view, notification_seqs, texts_by_message
from tests.support.managers import open_manager
from tests.support.polling import until
from tests.support.proc import agentd_process, free_port, pids_with_cwd, scripted_serve_args, wait_healthy
from tests.support.server import scripted

# --------------------------------------------------------------------------------------------
# Clean restart, both databases


async def test_restart_replays_the_same_history_and_continues_with_full_context(
    server_factory, workspace: Path, db_url: str
) -> None:
    first = scripted(
        {
            "reasoning": "The user wants notes; I will write the file.",
            "text": "Writing notes.txt now.",
            "chunk_size": 5,
            "tool_calls": [
                {
                    "name": "write_file",
                    "arguments": {"path": "notes.txt", "content": "hello\n"},
                    "id": "call_w",
                }
            ],
        },
        {"text": "Done: notes.txt holds a greeting.", "chunk_size": 4},
    )
    async with server_factory(first, database_url=db_url, permission_mode=PermissionMode.BYPASS) as server:
        client = await server.client()
        session = await client.call("session/new", {"cwd": str(workspace), "mcpServers": []})
        sid = session["sessionId"]
        result = await client.call("session/prompt", text_prompt(sid, "please write my notes"))
        assert result["stopReason"] == "end_turn"
        assert (workspace / "notes.txt").read_text() == "hello\n"
        live = client.updates(sid)
        live_seqs = notification_seqs(client)
        await client.close()
    # The server is stopped (lifespan shut down, store closed). Sanity-check what was live.
    live_kinds = [u["sessionUpdate"] for u in live]
    assert live_kinds.count("agent_message_chunk") > 2  # really streamed in pieces
    assert agent_text(live) == "Writing notes.txt now.Done: notes.txt holds a greeting."
    assert [u.get("status") for u in live if u["sessionUpdate"] in ("tool_call", "tool_call_update")] == [
        "pending",
        "in_progress",
        "completed",
    ]

    second = scripted({"expect": "what did you write", "text": "I wrote notes.txt with a greeting."})
    async with server_factory(second, database_url=db_url, permission_mode=PermissionMode.BYPASS) as server:
        client = await server.client()
        loaded = await client.call(
            "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        )
        assert loaded["modes"]["currentModeId"] == "bypass"  # the session's mode survived too
        replayed = client.updates(sid)
        replay_seqs = notification_seqs(client)

        # The replay starts with the user's prompt (the live sender never got it echoed)...
        assert replayed[0] == {
            "sessionUpdate": "user_message_chunk",
            "content": {"type": "text", "text": "please write my notes"},
            "messageId": replayed[0]["messageId"],
        }
        # ...and then is exactly what was seen live, modulo chunk boundaries: same order,
        # same assembled text per messageId, identical tool_call / tool_call_update payloads.
        assert conversation_view(replayed) == conversation_view(live)
        assert texts_by_message(replayed) == texts_by_message(live)
        assert texts_by_message(replayed, "agent_thought_chunk") == texts_by_message(
            live, "agent_thought_chunk"
        )
        tool_updates = [u for u in replayed if u["sessionUpdate"] in ("tool_call", "tool_call_update")]
        assert tool_updates[0]["sessionUpdate"] == "tool_call" and tool_updates[0]["toolCallId"] == "call_w"
        assert tool_updates[-1]["status"] == "completed" and tool_updates[-1]["toolCallId"] == "call_w"
        # Replayed durable seqs are the same log: increasing, and no newer than what was live.
        assert replay_seqs == sorted(set(replay_seqs))
        assert max(replay_seqs) <= max(live_seqs)

        # The conversation continues: the new provider's first request carries everything.
        result = await client.call("session/prompt", text_prompt(sid, "what did you write?"))
        assert result["stopReason"] == "end_turn"
        assert len(second.requests) == 1
        messages = second.requests[0].messages
        assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant", "user"]
        user1, asked, tool_result, answer, user2 = messages
        assert user1.content == "please write my notes"
        assert asked.content == "Writing notes.txt now."
        assert asked.reasoning == "The user wants notes; I will write the file."
        assert [(c.id, c.name, json.loads(c.arguments)) for c in asked.tool_calls] == [
            ("call_w", "write_file", {"path": "notes.txt", "content": "hello\n"})
        ]
        assert tool_result.tool_call_id == "call_w" and tool_result.name == "write_file"
        assert not tool_result.is_error and tool_result.content
        assert answer == Message(role="assistant", content="Done: notes.txt holds a greeting.")
        assert user2.content == "what did you write?"
        # Byte for byte what the first server's model saw, plus its final answer.
        assert messages[:3] == first.requests[1].messages
        # New durable events continue the old seq numbering (no reuse after the restart).
        new_seqs = notification_seqs(client)[len(replay_seqs) :]
        assert new_seqs and min(new_seqs) > max(live_seqs)

        listed = await client.call("session/list", {})
        entry = next(s for s in listed["sessions"] if s["sessionId"] == sid)
        assert entry["title"] == "please write my notes"
        assert entry["cwd"] == str(workspace)
        await client.close()

    # A third start sees the second turn as well (it was persisted, not just kept in memory).
    third = scripted({"text": "ok"})
    async with server_factory(third, database_url=db_url) as server:
        client = await server.client()
        await client.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        assert agent_text(client.updates(sid)).endswith("I wrote notes.txt with a greeting.")
        await client.call("session/prompt", text_prompt(sid, "thanks"))
        assert [m.role for m in third.requests[0].messages] == [
            "user", "assistant", "tool", "assistant", "user", "assistant", "user",
        ]  # fmt: skip
        await client.close()


# --------------------------------------------------------------------------------------------
# kill -9 of a real `agentd serve` process, SQLite


@dataclass
class Crashed:
    session_id: str
    db_url: str
    seen: list[dict[str, Any]]  # the session/update payloads the client got before the crash
    last_seen_seq: int
    workspace: Path  # the session's cwd


async def crash_mid_tool(workspace: Path, tmp_path: Path) -> Crashed:
    """Run `agentd serve` on SQLite, prompt a `sleep 30` bash call, and `kill -9` the
    server once the client has seen the call go `in_progress`."""
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "steps": [
                    {
                        "text": "Running the slow command.",
                        "chunk_size": 6,
                        "tool_calls": [
                            {"name": "bash", "arguments": {"command": "sleep 30"}, "id": "call_s"}
                        ],
                    },
                    {"text": "This step must never be reached."},
                ]
            }
        )
    )
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(AGENTD_HOME=str(tmp_path / "home"), HOME=str(tmp_path))
    args = scripted_serve_args(port, db_url, script, "--permission-mode", "bypass")
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"

    async with agentd_process(args, env=env, log=log) as proc:
        await wait_healthy(base, proc, log)
        client = await WsClient.connect(base)
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        prompt_task = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "run it")))
        await client.wait_notification(
            lambda m: (
                m["method"] == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "tool_call_update"
                and m["params"]["update"].get("status") == "in_progress"
            ),
            within=30,
        )
        # Let the shell actually start (the update is emitted just before the spawn).
        await until(lambda: pids_with_cwd(workspace), what="the shell to start")
        crashed = Crashed(sid, db_url, client.updates(sid), max(notification_seqs(client)), workspace)

        os.kill(proc.pid, signal.SIGKILL)
        assert await proc.wait() == -signal.SIGKILL
        # The bash tool runs in its own process group, which outlives the server: end it.
        for pid in pids_with_cwd(workspace):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        prompt_task.cancel()
        with contextlib.suppress(BaseException):
            await prompt_task  # never answered: the server died
        await client.close()
    return crashed


C = TypeVar("C", bound=Crashed)


def crash_once(
    tmp_path_factory: pytest.TempPathFactory, crash: Callable[[Path, Path], Coroutine[Any, Any, C]]
) -> C:
    """One crash for the whole module: each test restarts on its own copy (`private_copy`)."""
    tmp = tmp_path_factory.mktemp("crash")
    workspace = tmp / "workspace"
    workspace.mkdir()
    # Its own event loop, like the other module-scoped real-process fixtures.
    return asyncio.run(crash(workspace.resolve(), tmp))


def private_copy(crashed: C, tmp_path: Path) -> C:
    """The crashed database as the kill left it (file and WAL: the committed log), copied
    for one test, whose restart recovers the session and so changes it."""
    source = Path(str(make_url(crashed.db_url).database))
    for name in (source.name, f"{source.name}-wal"):  # the -shm index is rebuilt on open
        if (source.parent / name).exists():
            shutil.copyfile(source.parent / name, tmp_path / name)
    return dataclasses.replace(crashed, db_url=f"sqlite+aiosqlite:///{tmp_path / source.name}")


@pytest.fixture(scope="module")
def mid_tool_crash(tmp_path_factory: pytest.TempPathFactory) -> Crashed:
    return crash_once(tmp_path_factory, crash_mid_tool)


async def test_kill_9_mid_tool_then_restart_recovers_the_session(
    server_factory, mid_tool_crash: Crashed, tmp_path: Path
) -> None:
    crashed = private_copy(mid_tool_crash, tmp_path)
    workspace = crashed.workspace
    sid, db_url = crashed.session_id, crashed.db_url
    seen_before_crash = crashed.seen
    assert [u.get("status") for u in seen_before_crash if u["sessionUpdate"].startswith("tool_call")] == [
        "pending",
        "in_progress",
    ]
    # Restart on the same database file (in-process, so the provider's requests are visible).
    after = scripted({"expect": "what happened", "text": "The command was interrupted by a restart."})
    async with server_factory(after, database_url=db_url, permission_mode=PermissionMode.BYPASS) as server:
        client = await server.client()
        await client.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        replayed = client.updates(sid)
        # History intact up to the last durable event the client saw before the crash.
        assert replayed[0]["sessionUpdate"] == "user_message_chunk"
        assert replayed[0]["content"]["text"] == "run it"
        seen = conversation_view(seen_before_crash)
        assert conversation_view(replayed)[: len(seen)] == seen
        # ...then the recovery: the dangling call finished as interrupted (R-L3c).
        recovered = conversation_view(replayed)[len(seen) :]
        assert [(u["toolCallId"], u["status"]) for u in recovered] == [("call_s", "failed")]
        assert agent_text(replayed) == "Running the slow command."
        assert max(notification_seqs(client)) >= crashed.last_seen_seq

        result = await client.call("session/prompt", text_prompt(sid, "what happened?"))
        assert result["stopReason"] == "end_turn"
        assert agent_text(client.updates(sid)).endswith("The command was interrupted by a restart.")
        messages = after.requests[0].messages
        assert [m.role for m in messages] == ["user", "assistant", "tool", "user", "user"]
        assert messages[1].tool_calls[0].id == "call_s"
        dangling = messages[2]
        assert dangling.tool_call_id == "call_s" and dangling.name == "bash" and dangling.is_error
        assert dangling.content == INTERRUPTED_RESULT and "Interrupted" in dangling.content
        # The turn after the crash opens with 001's "任务恢复" reminder (issue 30 item 7).
        assert messages[3].content == system_reminder(TASK_RECOVERY_TEXT)
        assert messages[4].content == "what happened?"
        await client.close()

    # The log records the interrupted turn, and the repaired conversation was persisted.
    store = await Store.open(db_url)
    try:
        events = await store.read_events(sid)
        ended = [e.payload for e in events if e.kind == "turn_ended"]
        assert [(e["outcome"], e.get("reason")) for e in ended] == [
            ("interrupted", "server_restarted"),
            ("completed", None),
        ]
        started = [e.payload["turnId"] for e in events if e.kind == "turn_started"]
        assert [e["turnId"] for e in ended] == started
        seqs = [e.seq for e in events]
        assert seqs == list(range(1, len(seqs) + 1))
        stored = [Message.model_validate(m) for m in await store.load_messages(sid)]
        assert [m.role for m in stored] == ["user", "assistant", "tool", "user", "user", "assistant"]
        assert stored[2].content == INTERRUPTED_RESULT
    finally:
        await store.close()


# --------------------------------------------------------------------------------------------
# Regressions: bugs found while writing these tests


def commit_failed(caplog: pytest.LogCaptureFixture) -> bool:
    """The event writer logged a failed group commit (it then retries the same batch forever)."""
    return any("event log commit failed" in r.getMessage() for r in caplog.records)


async def test_after_kill_9_replay_shows_the_dangling_tool_call_finished(
    server_factory, mid_tool_crash: Crashed, tmp_path: Path
) -> None:
    crashed = private_copy(mid_tool_crash, tmp_path)
    load = {"sessionId": crashed.session_id, "cwd": str(crashed.workspace), "mcpServers": []}
    async with server_factory(scripted({"text": "ok"}), database_url=crashed.db_url) as server:
        first = await server.client()
        await first.call("session/load", load)  # loading the session runs the recovery...
        await server.app.state.agentd.writer.barrier()  # ...and its events are committed
        await first.close()
        second = await server.client()
        await second.call("session/load", load)
        updates = [u for u in second.updates(crashed.session_id) if u.get("toolCallId") == "call_s"]
        await second.close()
    assert [u.get("status") for u in updates][:2] == ["pending", "in_progress"]
    # The turn is closed `interrupted` and the model is told the call was interrupted; a client
    # replaying the session must not be left with a call that runs forever.
    assert updates[-1]["status"] == "failed"


async def test_a_prompt_containing_a_nul_character_does_not_wedge_the_event_log(
    server_factory, workspace: Path, db_url: str, request: pytest.FixtureRequest, caplog
) -> None:
    provider = scripted({"text": "ok"}, loop=True)
    async with server_factory(provider, database_url=db_url) as server:
        writer = server.app.state.agentd.writer
        client = await server.client()
        sid_a = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        sid_b = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        bad = asyncio.create_task(client.request("session/prompt", text_prompt(sid_a, "a\x00b")))
        try:
            await until(lambda: bad.done() or commit_failed(caplog))
            assert not commit_failed(caplog)
            # Answered one way or the other (accepted, or refused as invalid params)...
            response = bad.result()
            assert "result" in response or response["error"]["code"] == -32602
            # ...and the server goes on working for everybody.
            result = await client.call("session/prompt", text_prompt(sid_b, "plain text"))
            assert result["stopReason"] == "end_turn"
        finally:
            if commit_failed(caplog):
                # Un-wedge the writer (drop the poisoned batch) so the server can shut down.
                writer._task.cancel()
                writer.start()
            bad.cancel()
            await client.close()


async def test_recovery_of_a_dangling_call_before_later_messages_is_persisted(
    migrated_db_url: str, tmp_path: Path, caplog
) -> None:
    store, writer, manager = await open_manager(migrated_db_url, tmp_path / "home")
    try:
        await store.create_session(id="sess_x", owner="local", cwd=str(tmp_path), mode="bypass", model="m")
        c1 = ToolCall(id="c1", name="read_file", arguments='{"path": "a.txt"}')
        c2 = ToolCall(id="c2", name="read_file", arguments='{"path": "b.txt"}')
        # Two parallel calls; only the first one's result reached the store.
        stored = [
            Message.user("read both"),
            Message(role="assistant", tool_calls=[c1, c2]),
            Message.tool_result(c1, "A"),
        ]
        await store.commit(
            [Batch("sess_x", messages=[(i, m.model_dump(mode="json")) for i, m in enumerate(stored)])]
        )
        actor = await manager.get("sess_x")
        assert actor is not None
        in_memory = actor.conversation.messages
        assert {m.tool_call_id for m in in_memory if m.role == "tool"} == {"c1", "c2"}
        barrier = asyncio.ensure_future(writer.barrier())
        await until(lambda: barrier.done() or commit_failed(caplog))
        assert not commit_failed(caplog)
        persisted = [Message.model_validate(m) for m in await store.load_messages("sess_x")]
        assert persisted == in_memory  # what a restart would load is what the model saw
    finally:
        if commit_failed(caplog):
            writer._task.cancel()
            writer.start()
        await manager.shutdown(grace=1)
        await writer.stop()
        await store.close()


# --------------------------------------------------------------------------------------------
# kill -9 while a message streams: the partial text checkpoint (R-E1) and the interrupted
# prompt's requestId (R-E6)

STREAMED = "".join(f"word{i:03d} " for i in range(200))  # 1,600 characters


@dataclass
class CrashedMidStream(Crashed):
    request_id: str
    streamed: str  # the text the client had assembled from live chunks
    checkpoint: dict[str, Any]  # sessions.partial as the dead server left it


async def crash_mid_stream(workspace: Path, tmp_path: Path) -> CrashedMidStream:
    """Run `agentd serve` on SQLite, prompt a long slowly streamed answer, and `kill -9`
    the server once a partial-text checkpoint is in the database."""
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"
    script = tmp_path / "script.json"
    # ~20 s of streaming: the server is killed long before the message could end.
    step = {"reasoning": "Let me think.", "text": STREAMED, "chunk_size": 8, "chunk_delay": 0.1}
    script.write_text(json.dumps({"steps": [step, {"text": "never reached"}]}))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(AGENTD_HOME=str(tmp_path / "home"), HOME=str(tmp_path))
    args = scripted_serve_args(port, db_url, script)
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    request_id = "req-stream-1"

    async with agentd_process(args, env=env, log=log) as proc:
        await wait_healthy(base, proc, log)
        client = await WsClient.connect(base)
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        prompt_task = asyncio.create_task(
            client.request("session/prompt", text_prompt(sid, "tell me a long story", requestId=request_id))
        )
        await client.wait_notification(
            lambda m: m["method"] == "_agentd/event" and m["params"]["kind"] == "turn_started"
        )
        # A second prompt waits in the queue when the server dies.
        queued = {"type": "text", "text": "queued behind the story"}
        await client.call(
            "_agentd/prompt/enqueue",
            {"sessionId": sid, "prompt": [queued], "_meta": {"agentd": {"requestId": "req-queued"}}},
        )
        # Wait (not a timing assertion) until a checkpoint holding some answer text is stored.

        async def checkpointed() -> bool:
            checkpoint = await stored_partial(db_url, sid)
            texts = [m["text"] for m in (checkpoint or {}).get("messages", [])]
            return any(t.startswith("word000 word001") for t in texts)

        await until(checkpointed, what="a partial-text checkpoint holding answer text")

        os.kill(proc.pid, signal.SIGKILL)
        assert await proc.wait() == -signal.SIGKILL
        prompt_task.cancel()
        with contextlib.suppress(BaseException):
            await prompt_task  # never answered: the server died
        await client.close()
    streamed = texts_by_message(client.updates(sid))
    final_checkpoint = await stored_partial(db_url, sid)
    assert final_checkpoint is not None
    return CrashedMidStream(
        sid,
        db_url,
        client.updates(sid),
        max(notification_seqs(client)),
        workspace,
        request_id=request_id,
        streamed="".join(streamed.values()),
        checkpoint=final_checkpoint,
    )


@pytest.fixture(scope="module")
def mid_stream_crash(tmp_path_factory: pytest.TempPathFactory) -> CrashedMidStream:
    return crash_once(tmp_path_factory, crash_mid_stream)


async def test_kill_9_while_streaming_keeps_the_checkpointed_partial_text(
    server_factory, mid_stream_crash: CrashedMidStream, tmp_path: Path
) -> None:
    crashed = private_copy(mid_stream_crash, tmp_path)
    sid = crashed.session_id
    by_kind = {m["kind"]: m for m in crashed.checkpoint["messages"]}
    # Reasoning and answer are both still in flight: their final events come at the step's end.
    assert set(by_kind) == {"agent_message_chunk", "agent_thought_chunk"}
    assert by_kind["agent_thought_chunk"]["text"] == "Let me think."
    checkpointed = by_kind["agent_message_chunk"]["text"]
    assert checkpointed and STREAMED.startswith(checkpointed) and checkpointed != STREAMED
    # A checkpoint only ever holds text that was streamed to clients.
    assert crashed.streamed.startswith(checkpointed) or checkpointed.startswith(crashed.streamed)

    after = scripted(
        {"expect": "queued behind", "text": "Queued one done."}, {"expect": "go on", "text": "Continuing."}
    )
    async with server_factory(after, database_url=crashed.db_url) as server:
        # A client re-attaching from its last seq gets a consistent stream: the cut-off
        # message's final text (marked interrupted), then the turn closed `interrupted`.
        watcher = await server.client()
        await watcher.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": crashed.last_seen_seq})
        ended = await watcher.wait_notification(
            lambda m: m["method"] == "_agentd/event" and m["params"]["kind"] == "turn_ended"
        )
        # The queued prompt is still queued and resumes by itself (AGENTD_AUTO_RESUME).
        resumed = await watcher.wait_notification(
            lambda m: m["method"] == "_agentd/event" and m["params"]["kind"] == "turn_ended", within=30
        )
        assert resumed["params"]["event"]["outcome"] == "completed"
        assert resumed["params"]["event"]["requestId"] == "req-queued"
        assert ended["params"]["event"]["outcome"] == "interrupted"
        assert ended["params"]["event"]["reason"] == "server_restarted"
        assert ended["params"]["event"]["requestId"] == crashed.request_id
        finals = [
            f["params"]
            for f in watcher.frames
            if f.get("method") == "session/update"
            and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        ]
        assert finals[0]["update"]["content"]["text"] == checkpointed
        assert agent_text(watcher.updates(sid)) == checkpointed + "Queued one done."
        assert finals[0]["_meta"]["agentd"]["final"] is True
        assert finals[0]["_meta"]["agentd"]["interrupted"] is True
        assert finals[0]["_meta"]["agentd"]["seq"] < ended["params"]["_meta"]["agentd"]["seq"]
        thoughts = [
            f["params"]["update"]["content"]["text"]
            for f in watcher.frames
            if f.get("method") == "session/update"
            and f["params"]["update"]["sessionUpdate"] == "agent_thought_chunk"
        ]
        assert thoughts == ["Let me think."]

        # The prompt's client reconnects and retries with the same requestId: it learns the
        # outcome, and nothing runs again.
        retry = await server.client()
        result = await retry.call(
            "session/prompt", text_prompt(sid, "tell me a long story", requestId=crashed.request_id)
        )
        assert result["stopReason"] == "cancelled"
        assert result["_meta"]["agentd"]["outcome"] == "interrupted"
        assert result["_meta"]["agentd"]["reason"] == "server_restarted"
        queued_retry = await retry.call(
            "session/prompt", text_prompt(sid, "queued behind the story", requestId="req-queued")
        )
        assert queued_retry["stopReason"] == "end_turn"
        assert len(after.requests) == 1  # only the resumed queued prompt ever ran

        # The model sees its own cut-off words before the next prompt.
        await retry.call("session/prompt", text_prompt(sid, "go on"))
        messages = after.requests[1].messages
        assert [(m.role, m.content) for m in messages] == [
            ("user", "tell me a long story"),
            ("assistant", checkpointed),
            ("user", system_reminder(TASK_RECOVERY_TEXT)),  # 001's "任务恢复" (issue 30 item 7)
            ("user", "queued behind the story"),
            ("assistant", "Queued one done."),
            ("user", "go on"),
        ]
        # A fresh replay shows exactly that transcript.
        fresh = await server.client()
        await fresh.call("session/load", {"sessionId": sid, "cwd": str(crashed.workspace), "mcpServers": []})
        assert list(texts_by_message(fresh.updates(sid)).values()) == [
            checkpointed,
            "Queued one done.",
            "Continuing.",
        ]
        for c in (watcher, retry, fresh):
            await c.close()

    store = await Store.open(crashed.db_url)
    try:
        assert (await store.get_session(sid)).partial is None  # recovered once, then cleared
        events = await store.read_events(sid)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert len(events) >= crashed.last_seen_seq  # nothing a client received is missing
        ended = [e.payload["outcome"] for e in events if e.kind == "turn_ended"]
        assert ended == ["interrupted", "completed", "completed"]
    finally:
        await store.close()


async def test_after_kill_9_with_auto_resume_off_the_queue_waits_for_the_next_prompt(
    server_factory, mid_stream_crash: CrashedMidStream, tmp_path: Path
) -> None:
    crashed = private_copy(mid_stream_crash, tmp_path)
    sid = crashed.session_id
    after = scripted(
        {"expect": "queued behind", "text": "Queued one done."}, {"expect": "now", "text": "Now."}
    )
    async with server_factory(after, database_url=crashed.db_url, auto_resume=False) as server:
        client = await server.client()
        attached = await client.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
        snapshot = attached["snapshot"]
        assert snapshot["status"] == "idle"  # the interrupted turn was closed
        assert [q["text"] for q in snapshot["queue"]] == ["queued behind the story"]
        assert after.requests == []  # nothing resumed by itself
        # The next prompt lines up behind it: the queue runs in order.
        result = await client.call("session/prompt", text_prompt(sid, "now please"))
        assert result["stopReason"] == "end_turn"
        assert [[m.content for m in r.messages if m.role == "user"][-1] for r in after.requests] == [
            "queued behind the story",
            "now please",
        ]
        await client.close()
