"""R-S5 graceful shutdown, end to end over real sockets.

On shutdown the server drains *before* uvicorn closes connections: running turns stop at
their next budget gate (shutdown is the first gate, R-B1), or are cancelled, or killed
within `shutdown_grace_s`; every waiting `session/prompt` is answered over the still-open
socket; queued prompts stay queued in the store (their requests answered `cancelled`,
reason `deferred_by_shutdown`) and run after the restart (R-E6 auto-resume); the event
log is flushed. `_meta.agentd.requestId` lets a client retry a prompt after the restart
and learn how it ended without running it twice (R-S3).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from agentd.infra.config import PermissionMode
from agentd.store.db import Store, StoredEvent
from agentd.tools.base import Access, ToolContext, ToolKind, ToolResult
from agentd.tools.registry import builtin_tools
from tests.support.client import WsClient, agent_text, text_prompt
from tests.support.frames import conversation_view
from tests.support.polling import until
from tests.support.proc import agentd_process, free_port, pids_with_cwd, scripted_serve_args, wait_healthy
from tests.support.server import Server, scripted
from tests.support.session import assert_valid_frames, is_update, new_session, queue_of_length

BOUND_S = 30.0  # bounds a hang; never a timing assertion


# ---------------------------------------------------------------------------- test tools


class Hold:
    """A read-only test tool that blocks until `release()` is true (polled), so a turn is
    provably mid-tool when the shutdown starts. Being read-only, a turn cancel stops it."""

    name: ClassVar[str] = "hold"
    kind: ClassVar[ToolKind] = ToolKind.OTHER
    access: ClassVar[Access] = Access.READ
    description: ClassVar[str] = "Test tool: waits until the test releases it."
    guidance: ClassVar[str] = "Only for tests."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}, "additionalProperties": False}

    def __init__(self) -> None:
        self.release: Callable[[], bool] = lambda: False
        self.started = asyncio.Event()
        self.finished = False

    def title(self, args: dict[str, Any]) -> str:
        return "Hold"

    def locations(self, args: dict[str, Any], ctx: ToolContext) -> list[dict[str, Any]]:
        return []

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.started.set()
        await until(self.release, BOUND_S * 2)
        self.finished = True
        return ToolResult("released")


class StuckWrite:
    """A write tool that takes forever. Write tools run to completion whatever a turn
    cancel says (they are never half-applied), so only the final kill can end it: it
    ignores both the budget gate and the cancel."""

    name: ClassVar[str] = "stuck_write"
    kind: ClassVar[ToolKind] = ToolKind.EDIT
    access: ClassVar[Access] = Access.WRITE
    description: ClassVar[str] = "Test tool: a write that never finishes."
    guidance: ClassVar[str] = "Only for tests."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}, "additionalProperties": False}

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.killed = False

    def title(self, args: dict[str, Any]) -> str:
        return "Stuck write"

    def locations(self, args: dict[str, Any], ctx: ToolContext) -> list[dict[str, Any]]:
        return []

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.started.set()
        try:
            await asyncio.sleep(BOUND_S * 4)
        except asyncio.CancelledError:
            self.killed = True
            raise
        return ToolResult("written (should never happen)")


# ---------------------------------------------------------------------------- helpers


class Background:
    """A `server_factory` server whose context runs in its own task, so the test can start
    the real uvicorn shutdown (exiting the context) and watch the server while it drains."""

    def __init__(self, cm: Any) -> None:
        self._cm = cm
        self._stop = asyncio.Event()
        self._ready: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
        self.task: asyncio.Task[None] = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async with self._cm as server:
            self._ready.set_result(server)
            await self._stop.wait()

    async def started(self) -> Server:
        await asyncio.wait({self._ready, self.task}, timeout=BOUND_S, return_when=asyncio.FIRST_COMPLETED)
        if self._ready.done():
            return self._ready.result()
        if self.task.done():
            self.task.result()
        pytest.fail("the server never started")

    def shutdown(self) -> None:
        """Begin the shutdown (uvicorn notices within a tick); `stopped()` waits for its end."""
        self._stop.set()

    async def stopped(self, within: float = BOUND_S) -> None:
        async with asyncio.timeout(within):
            await asyncio.shield(self.task)

    async def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(self.task), BOUND_S)


@contextlib.asynccontextmanager
async def background(cm: Any) -> AsyncIterator[tuple[Server, Background]]:
    bg = Background(cm)
    try:
        yield await bg.started(), bg
    finally:
        await bg.close()


def prompt_request(client: WsClient, session_id: str, text: str, **meta: Any) -> asyncio.Task[dict]:
    return asyncio.create_task(client.request("session/prompt", text_prompt(session_id, text, **meta)))


def kinds(events: list[StoredEvent], kind: str) -> list[dict[str, Any]]:
    return [e.payload for e in events if e.kind == kind]


async def stored(db_url: str, session_id: str) -> tuple[list[StoredEvent], Any]:
    """The session's event log and row, read by a fresh connection (what a restart sees)."""
    store = await Store.open(db_url)
    try:
        return await store.read_events(session_id), await store.get_session(session_id)
    finally:
        await store.close()


def tools_with(*extra: Any) -> dict[str, Any]:
    return {**builtin_tools(), **{t.name: t for t in extra}}


# ---------------------------------------------------------------------------- 1. in-process drain


async def test_shutdown_answers_the_running_and_queued_prompts_and_restart_resumes_the_queue(
    server_factory, workspace: Path, db_url: str
) -> None:
    hold = Hold()
    first = scripted(
        {
            "text": "Starting the long job.",
            "chunk_size": 4,
            "tool_calls": [{"name": "hold", "arguments": {}, "id": "call_hold"}],
        },
        {"text": "This step must never be sampled: the shutdown gate comes first."},
    )
    cm = server_factory(
        first,
        database_url=db_url,
        permission_mode=PermissionMode.BYPASS,
        tools=tools_with(hold),
        shutdown_grace_s=60.0,  # the gate half alone is 30 s: the turn stops at the gate
    )
    async with background(cm) as (server, bg):
        # The tool returns once the drain has begun, so the turn's next L3 iteration
        # provably starts after the shutdown request and meets the shutdown gate.
        hold.release = lambda: server.app.state.agentd.manager.closing
        client = await server.client()
        sid = await new_session(client, workspace)
        running = prompt_request(client, sid, "first prompt", requestId="req-1")
        await asyncio.wait_for(hold.started.wait(), BOUND_S)
        queued = prompt_request(client, sid, "second prompt", requestId="req-2")
        await client.wait_notification(queue_of_length(sid, 1), within=BOUND_S)
        assert not running.done() and not queued.done()

        bg.shutdown()
        # Both answers arrive over the socket that is still open during the drain.
        running_resp = await asyncio.wait_for(running, BOUND_S)
        queued_resp = await asyncio.wait_for(queued, BOUND_S)
        await bg.stopped()

    assert hold.finished
    # The running turn stopped at the shutdown budget gate: no second model call.
    assert len(first.requests) == 1
    result = running_resp["result"]
    assert result["stopReason"] == "max_turn_requests"
    assert result["_meta"]["agentd"]["outcome"] == "budget_stopped"
    assert result["_meta"]["agentd"]["reason"] == "shutdown"
    turn_id = result["_meta"]["agentd"]["turnId"]
    # The queued prompt did not run; it was deferred to the next start.
    deferred = queued_resp["result"]
    assert deferred["stopReason"] == "cancelled"
    assert deferred["_meta"]["agentd"]["outcome"] == "cancelled"
    assert deferred["_meta"]["agentd"]["reason"] == "deferred_by_shutdown"
    assert "turnId" not in deferred["_meta"]["agentd"]
    deferred_prompt_id = deferred["_meta"]["agentd"]["promptId"]
    assert agent_text(client.updates(sid)) == "Starting the long job."
    # The user saw why the turn stopped.
    assert "Stopped: the server is shutting down." in json.dumps(client.frames)
    # (Schema validation of these frames: see the test below.)

    # The log was flushed before the process would exit: the turn's end is durable, and
    # the queued prompt is still queued in the session row.
    events, row = await stored(db_url, sid)
    started = kinds(events, "turn_started")
    ended = kinds(events, "turn_ended")
    assert [(s["turnId"], s.get("requestId")) for s in started] == [(turn_id, "req-1")]
    assert [(e["turnId"], e["outcome"], e.get("reason"), e.get("requestId")) for e in ended] == [
        (turn_id, "budget_stopped", "shutdown", "req-1")
    ]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert row is not None and row.queue is not None
    assert [(q["id"], q["meta"].get("requestId")) for q in row.queue] == [(deferred_prompt_id, "req-2")]
    assert json.dumps(row.queue[0]["blocks"]).count("second prompt") == 1

    # Restart on the same database: the queued prompt runs by itself (auto-resume).
    second = scripted(
        {"expect": "second prompt", "text": "Second answer."},
        {"text": "A retried prompt must never be sampled again."},
    )
    async with server_factory(second, database_url=db_url, permission_mode=PermissionMode.BYPASS) as server:
        store = server.app.state.agentd.store

        async def resumed_turn_ended() -> bool:
            return len(kinds(await store.read_events(sid), "turn_ended")) == 2

        await until(resumed_turn_ended)
        assert len(second.requests) == 1
        resumed = kinds(await store.read_events(sid), "turn_ended")[-1]
        assert (resumed["outcome"], resumed.get("requestId"), resumed["promptId"]) == (
            "completed",
            "req-2",
            deferred_prompt_id,
        )

        # Retrying with the first prompt's requestId answers its recorded outcome...
        client = await server.client()
        retry = await client.call("session/prompt", text_prompt(sid, "first prompt", requestId="req-1"))
        assert retry["stopReason"] == "max_turn_requests"
        assert retry["_meta"]["agentd"]["outcome"] == "budget_stopped"
        assert retry["_meta"]["agentd"]["reason"] == "shutdown"
        assert retry["_meta"]["agentd"]["turnId"] == turn_id
        # ...and so does retrying the deferred one, which has run by now.
        retry2 = await client.call("session/prompt", text_prompt(sid, "second prompt", requestId="req-2"))
        assert retry2["stopReason"] == "end_turn"
        assert retry2["_meta"]["agentd"]["outcome"] == "completed"
        assert retry2["_meta"]["agentd"]["turnId"] == resumed["turnId"]
        # Neither retry started a turn or called the model.
        await server.app.state.agentd.writer.barrier()
        events = await store.read_events(sid)
        assert len(kinds(events, "turn_started")) == 2
        assert len(second.requests) == 1
        row = await store.get_session(sid)
        assert row is not None and not row.queue
        assert_valid_frames(client)
        await client.close()


async def test_frames_of_a_turn_stopped_by_the_shutdown_gate_are_schema_valid(
    server_factory, workspace: Path
) -> None:
    hold = Hold()
    provider = scripted(
        {"text": "Working.", "tool_calls": [{"name": "hold", "arguments": {}, "id": "call_hold"}]},
        {"text": "never"},
    )
    cm = server_factory(
        provider, permission_mode=PermissionMode.BYPASS, tools=tools_with(hold), shutdown_grace_s=60.0
    )
    async with background(cm) as (server, bg):
        hold.release = lambda: server.app.state.agentd.manager.closing
        client = await server.client()
        sid = await new_session(client, workspace)
        running = prompt_request(client, sid, "work", requestId="req-1")
        await asyncio.wait_for(hold.started.wait(), BOUND_S)
        bg.shutdown()
        resp = await asyncio.wait_for(running, BOUND_S)
        await bg.stopped()
    assert resp["result"]["_meta"]["agentd"]["outcome"] == "budget_stopped"
    assert_valid_frames(client)


# ---------------------------------------------------------------------------- 2. grace period


async def test_a_tool_ignoring_the_gate_is_cancelled_within_the_grace_period(
    server_factory, workspace: Path, db_url: str
) -> None:
    provider = scripted(
        {
            "text": "Sleeping.",
            "tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}, "id": "call_sleep"}],
        },
        {"text": "This step must never be sampled."},
    )
    cm = server_factory(
        provider, database_url=db_url, permission_mode=PermissionMode.BYPASS, shutdown_grace_s=1.0
    )
    try:
        async with background(cm) as (server, bg):
            client = await server.client()
            sid = await new_session(client, workspace)
            running = prompt_request(client, sid, "sleep a while", requestId="req-sleep")
            await client.wait_notification(
                is_update(sid, "tool_call_update", toolCallId="call_sleep", status="in_progress"),
                within=BOUND_S,
            )
            await until(lambda: pids_with_cwd(workspace))  # the shell really runs
            bg.shutdown()
            # A hang here (the drain never giving up on the sleeping tool) fails the test.
            async with asyncio.timeout(20):
                resp = await running
                await bg.stopped()
        result = resp["result"]
        assert result["stopReason"] == "cancelled"
        outcome = result["_meta"]["agentd"]["outcome"]
        assert outcome in ("cancelled", "interrupted")
        # The server cancelled it, not the user: the reason says so.
        assert result["_meta"]["agentd"]["reason"] == "server_shutdown"
        assert len(provider.requests) == 1
        # The tool call was closed for the client, not left running.
        final = [
            u
            for u in client.updates(sid)
            if u.get("toolCallId") == "call_sleep" and u.get("status") in ("completed", "failed")
        ]
        assert len(final) == 1
        # The shell's process group did not outlive the turn.
        await until(lambda: not pids_with_cwd(workspace))

        events, _ = await stored(db_url, sid)
        ended = kinds(events, "turn_ended")
        assert [(e["turnId"], e["outcome"], e.get("requestId")) for e in ended] == [
            (result["_meta"]["agentd"]["turnId"], outcome, "req-sleep")
        ]
    finally:
        for pid in pids_with_cwd(workspace):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


async def test_a_tool_ignoring_gate_and_cancel_is_killed_at_the_end_of_the_grace_period(
    server_factory, workspace: Path, db_url: str
) -> None:
    stuck = StuckWrite()
    provider = scripted(
        {"text": "Writing.", "tool_calls": [{"name": "stuck_write", "arguments": {}, "id": "call_stuck"}]},
        {"text": "This step must never be sampled."},
    )
    cm = server_factory(
        provider,
        database_url=db_url,
        permission_mode=PermissionMode.BYPASS,
        tools=tools_with(stuck),
        shutdown_grace_s=1.0,
    )
    async with background(cm) as (server, bg):
        client = await server.client()
        sid = await new_session(client, workspace)
        running = prompt_request(client, sid, "write forever", requestId="req-stuck")
        await asyncio.wait_for(stuck.started.wait(), BOUND_S)
        bg.shutdown()
        async with asyncio.timeout(20):
            resp = await running
            await bg.stopped()
    assert stuck.killed  # neither the gate nor the cancel ended it: the kill did
    result = resp["result"]
    assert result["stopReason"] == "cancelled"
    assert result["_meta"]["agentd"]["outcome"] == "interrupted"
    assert result["_meta"]["agentd"]["reason"] == "server_shutdown"
    assert len(provider.requests) == 1

    events, _ = await stored(db_url, sid)
    ended = kinds(events, "turn_ended")
    assert [(e["turnId"], e["outcome"], e.get("reason"), e.get("requestId")) for e in ended] == [
        (result["_meta"]["agentd"]["turnId"], "interrupted", "server_shutdown", "req-stuck")
    ]

    # After a restart the killed call is closed for clients replaying the session, and the
    # model sees it interrupted (R-E6); the clean stop added no second turn end.
    after = scripted({"expect": "what happened", "text": "The write was interrupted."})
    async with server_factory(after, database_url=db_url, permission_mode=PermissionMode.BYPASS) as server:
        client = await server.client()
        await client.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        statuses = [u.get("status") for u in client.updates(sid) if u.get("toolCallId") == "call_stuck"]
        assert statuses[0] == "pending" and statuses[-1] == "failed"
        retry = await client.call("session/prompt", text_prompt(sid, "write forever", requestId="req-stuck"))
        assert retry["_meta"]["agentd"]["outcome"] == "interrupted"
        assert len(after.requests) == 0  # the retry was answered from the log
        done = await client.call("session/prompt", text_prompt(sid, "what happened?"))
        assert done["stopReason"] == "end_turn"
        roles = [m.role for m in after.requests[0].messages]
        assert roles == ["user", "assistant", "tool", "user"]
        assert after.requests[0].messages[2].is_error
        await client.close()
    events, _ = await stored(db_url, sid)
    assert [e["outcome"] for e in kinds(events, "turn_ended")] == ["interrupted", "completed"]


async def test_a_killed_turn_closes_its_tool_call_for_the_clients_watching(
    server_factory, workspace: Path
) -> None:
    stuck = StuckWrite()
    provider = scripted(
        {"text": "Writing.", "tool_calls": [{"name": "stuck_write", "arguments": {}, "id": "call_stuck"}]},
    )
    cm = server_factory(
        provider, permission_mode=PermissionMode.BYPASS, tools=tools_with(stuck), shutdown_grace_s=1.0
    )
    async with background(cm) as (server, bg):
        client = await server.client()
        sid = await new_session(client, workspace)
        running = prompt_request(client, sid, "write forever")
        await asyncio.wait_for(stuck.started.wait(), BOUND_S)
        bg.shutdown()
        async with asyncio.timeout(20):
            await running
            await bg.stopped()
    assert stuck.killed
    # R-T8: every call ends completed or failed; a client watching the shutdown must not be
    # left with a call that stays in progress forever.
    statuses = [u.get("status") for u in client.updates(sid) if u.get("toolCallId") == "call_stuck"]
    assert statuses[-1] in ("completed", "failed"), statuses


async def test_input_interjected_into_a_turn_stopped_by_shutdown_is_kept_and_runs_after_restart(
    server_factory, workspace: Path, db_url: str
) -> None:
    hold = Hold()
    first = scripted(
        {"text": "Working.", "tool_calls": [{"name": "hold", "arguments": {}, "id": "call_hold"}]},
        {"text": "never"},
    )
    cm = server_factory(
        first,
        database_url=db_url,
        permission_mode=PermissionMode.BYPASS,
        tools=tools_with(hold),
        shutdown_grace_s=60.0,
    )
    async with background(cm) as (server, bg):
        hold.release = lambda: server.app.state.agentd.manager.closing
        client = await server.client()
        sid = await new_session(client, workspace)
        running = prompt_request(client, sid, "work")
        await asyncio.wait_for(hold.started.wait(), BOUND_S)
        steer = await client.call(
            "_agentd/interject",
            {"sessionId": sid, "prompt": [{"type": "text", "text": "also check the tests"}]},
        )
        assert steer["status"] == "interjected"
        bg.shutdown()
        resp = await asyncio.wait_for(running, BOUND_S)
        await bg.stopped()
    # The turn stopped at the gate, before it could hand the interjection to the model...
    assert resp["result"]["_meta"]["agentd"]["outcome"] == "budget_stopped"
    assert len(first.requests) == 1
    # ...so it is stored as the next queued prompt (R-S4: never lost)...
    _, row = await stored(db_url, sid)
    assert row is not None and row.queue is not None
    assert ["also check the tests" in json.dumps(q["blocks"]) for q in row.queue] == [True]

    # ...and runs by itself after the restart.
    second = scripted({"expect": "also check the tests", "text": "Checked."})
    async with server_factory(second, database_url=db_url, permission_mode=PermissionMode.BYPASS) as server:
        store = server.app.state.agentd.store

        async def resumed() -> bool:
            return len(kinds(await store.read_events(sid), "turn_ended")) == 2

        await until(resumed)
    assert len(second.requests) == 1


# ---------------------------------------------------------------------------- 4. while draining


async def test_while_draining_readyz_is_503_and_new_sessions_are_refused(
    server_factory, workspace: Path, db_url: str
) -> None:
    hold = Hold()
    release = asyncio.Event()
    hold.release = release.is_set
    provider = scripted(
        {"text": "Holding.", "tool_calls": [{"name": "hold", "arguments": {}, "id": "call_hold"}]},
        {"text": "never"},
    )
    cm = server_factory(
        provider,
        database_url=db_url,
        permission_mode=PermissionMode.BYPASS,
        tools=tools_with(hold),
        shutdown_grace_s=60.0,
    )
    async with background(cm) as (server, bg), httpx.AsyncClient(base_url=server.base_url) as http:
        client = await server.client()
        closed_sid = await new_session(client, workspace)
        await client.call("session/close", {"sessionId": closed_sid})  # stored, not live
        sid = await new_session(client, workspace)
        ready = await http.get("/readyz")
        assert ready.status_code == 200, ready.text

        running = prompt_request(client, sid, "hold on", requestId="req-hold")
        await asyncio.wait_for(hold.started.wait(), BOUND_S)
        bg.shutdown()

        async def draining() -> bool:
            return (await http.get("/readyz")).status_code == 503

        await until(draining)
        resp = await http.get("/readyz")
        assert resp.status_code == 503
        assert resp.json()["status"] == "draining"

        # Over the still-open WebSocket: no new session, no loading a stored one.
        new = await client.request("session/new", {"cwd": str(workspace), "mcpServers": []})
        assert new["error"]["code"] == -32018, new
        assert "server_shutting_down" in new["error"]["message"]
        load = await client.request(
            "session/load", {"sessionId": closed_sid, "cwd": str(workspace), "mcpServers": []}
        )
        assert load["error"]["code"] == -32018, load
        # The listener is still open during the drain; a new connection is refused work too.
        late = await server.client()
        refused = await late.request("session/new", {"cwd": str(workspace), "mcpServers": []})
        assert refused["error"]["code"] == -32018, refused
        await late.close()

        # The drain is still waiting for the running turn.
        assert not running.done() and not bg.task.done()
        release.set()
        result = (await asyncio.wait_for(running, BOUND_S))["result"]
        assert result["_meta"]["agentd"]["outcome"] == "budget_stopped"
        await bg.stopped()
    assert len(provider.requests) == 1


async def test_a_prompt_sent_to_a_live_session_while_draining_is_answered_shutting_down(
    server_factory, workspace: Path, db_url: str
) -> None:
    hold = Hold()
    release = asyncio.Event()
    hold.release = release.is_set
    provider = scripted(
        {"text": "Holding.", "tool_calls": [{"name": "hold", "arguments": {}, "id": "call_hold"}]},
        {"text": "never"},
    )
    cm = server_factory(
        provider,
        database_url=db_url,
        permission_mode=PermissionMode.BYPASS,
        tools=tools_with(hold),
        shutdown_grace_s=60.0,
    )
    async with background(cm) as (server, bg):
        client = await server.client()
        sid = await new_session(client, workspace)
        running = prompt_request(client, sid, "hold on", requestId="req-hold")
        await asyncio.wait_for(hold.started.wait(), BOUND_S)
        bg.shutdown()
        await until(lambda: server.app.state.agentd.manager.closing)
        try:
            late = await asyncio.wait_for(
                client.request("session/prompt", text_prompt(sid, "too late", requestId="req-late")), 10
            )
        finally:
            release.set()
        await asyncio.wait_for(running, BOUND_S)
        await bg.stopped()
    assert "result" in late, late
    assert late["result"]["stopReason"] == "cancelled"
    assert late["result"]["_meta"]["agentd"]["reason"] == "server_shutting_down"


# ---------------------------------------------------------------------------- 3. a real process


async def test_sigterm_drains_a_real_agentd_serve_process_and_the_session_survives(
    workspace: Path, tmp_path: Path
) -> None:
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
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(AGENTD_HOME=str(tmp_path / "home"), HOME=str(tmp_path), AGENTD_SHUTDOWN_GRACE_S="4")

    def args(port: int) -> list[str]:
        return scripted_serve_args(port, db_url, script, "--permission-mode", "bypass")

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    try:
        async with agentd_process(args(port), env=env, log=log) as proc:
            await wait_healthy(base, proc, log)
            client = await WsClient.connect(base)
            sid = await new_session(client, workspace)
            running = prompt_request(client, sid, "run it", requestId="req-run")
            await client.wait_notification(
                is_update(sid, "tool_call_update", toolCallId="call_s", status="in_progress"), within=BOUND_S
            )
            await until(lambda: pids_with_cwd(workspace))  # the shell really runs

            os.kill(proc.pid, signal.SIGTERM)
            async with asyncio.timeout(BOUND_S):
                returncode = await proc.wait()
                await client._reader  # the socket is closed: everything sent has been read
            output = await asyncio.to_thread(log.read_text)
            # The response was read before the socket closed (the reader has ended).
            assert running.done(), f"no session/prompt response before the close:\n{output}"
            resp = running.result()
            assert resp["result"]["stopReason"] == "cancelled", resp
            assert resp["result"]["_meta"]["agentd"]["outcome"] in ("cancelled", "interrupted")
            turn_id = resp["result"]["_meta"]["agentd"]["turnId"]
            live = client.updates(sid)
            await client.close()
            # It stopped by itself after the drain, then ended by re-raising the SIGTERM
            # (uvicorn's convention, which process managers read as a clean stop).
            assert returncode == -signal.SIGTERM, f"agentd serve exited with {returncode}:\n{output}"
    finally:
        for pid in pids_with_cwd(workspace):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    events, row = await stored(db_url, sid)
    ended = kinds(events, "turn_ended")
    assert [(e["turnId"], e.get("requestId")) for e in ended] == [(turn_id, "req-run")]
    assert ended[0]["outcome"] == resp["result"]["_meta"]["agentd"]["outcome"]
    assert row is not None and not row.queue

    # Restart the process on the same database: the session loads with the same history.
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with agentd_process(args(port), env=env, log=tmp_path / "serve2.log") as proc:
        await wait_healthy(base, proc, tmp_path / "serve2.log")
        client = await WsClient.connect(base)
        await client.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        replayed = client.updates(sid)
        assert replayed[0]["sessionUpdate"] == "user_message_chunk"
        assert replayed[0]["content"]["text"] == "run it"
        assert conversation_view(replayed) == conversation_view(live)
        assert agent_text(replayed) == "Running the slow command."
        # The clean stop left nothing to recover: no second, "interrupted" end was added.
        retry = await client.call("session/prompt", text_prompt(sid, "run it", requestId="req-run"))
        assert retry["_meta"]["agentd"]["turnId"] == turn_id
        await client.close()
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(BOUND_S):
            await proc.wait()
    events, _ = await stored(db_url, sid)
    assert [e["turnId"] for e in kinds(events, "turn_ended")] == [turn_id]
