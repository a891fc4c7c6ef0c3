"""A background task running when the server is `kill -9`'d (agentd/core/task_history.py,
agentd/session/eventlog/recovery.py), on SQLite and on Postgres.

A real `agentd serve` process starts a background task — a `bash` with run_in_background,
or a background sub-agent — and dies with it running. After the restart on the same
database the session knows what happened instead of forgetting the task:

- its log holds a `background_task` event with status `interrupted` for the task
  (committed by crash repair before anyone attaches, so every client replays it);
- the next turn's first request carries the task's notice (a system reminder), once;
- `task_output` for its id says it was interrupted (not "unknown task");
- nothing starts a turn by itself after the restart.

Nothing is resumed: the task is gone with its process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from agentd.infra.config import PermissionMode
from tests.support.client import WsClient, text_prompt
from tests.support.frames import attach
from tests.support.proc import agentd_process, free_port, pids_with_cwd, scripted_serve_args, wait_healthy
from tests.support.server import scripted
from tests.support.session import assert_valid_frames, events, is_event, new_session, tool_call
from tests.support.subagents import WAITER

HANG = {"text": "still working", "delay": 600}  # a model call that lasts until the kill
JOB = "sleep 600"


def first_life(kind: str) -> tuple[dict[str, Any], str]:
    """The first server's script, and the id of the task it leaves running."""
    if kind == "bash":
        start = tool_call("bash", "call_bg", command=JOB, run_in_background=True)
        return {"steps": [{"tool_calls": [start]}, {"text": "Started it."}]}, "bg-1"
    start = tool_call(
        "task", "call_bg", agent="waiter", prompt="compute", description="compute", run_in_background=True
    )
    # The child and the parent's next round each take one of the hanging steps.
    return {"steps": [{"tool_calls": [start]}, HANG, HANG]}, "agent-1"


async def run_until_killed(db_url: str, workspace: Path, tmp_path: Path, kind: str) -> tuple[str, str]:
    """A real `agentd serve` starts the task; it is killed once the task's start is
    committed (a client saw it). Returns (session id, task id)."""
    script, task_id = first_life(kind)
    script_path = tmp_path / "script.json"
    script_path.write_text(json.dumps(script))
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "waiter.toml").write_text(WAITER)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(
        AGENTD_HOME=str(tmp_path / "home"),
        HOME=str(tmp_path),
        AGENTD_PERMISSION_MODE="bypass",
        AGENTD_AGENTS_DIR=str(agents),
    )
    args = scripted_serve_args(port, db_url, script_path)
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    async with agentd_process(args, env=env, log=log) as proc:
        await wait_healthy(base, proc, log)
        client = await WsClient.connect(base)
        sid = await new_session(client, workspace)
        prompt = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "start it")))
        # Seen by a client = committed (the writer commits, then publishes).
        await client.wait_notification(is_event(sid, "background_task_started", taskId=task_id), within=30)
        os.kill(proc.pid, signal.SIGKILL)
        assert await proc.wait() == -signal.SIGKILL
        prompt.cancel()
        with contextlib.suppress(BaseException):
            await prompt
        await client.close()
    return sid, task_id


def end_leftovers(workspace: Path) -> None:
    """The killed server's background shell outlives it (its own process group): end it."""
    for pid in pids_with_cwd(workspace):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("kind", ["bash", "agent"])
async def test_a_background_task_running_at_kill_9_is_interrupted_after_the_restart(
    server_factory, db_url: str, workspace: Path, tmp_path: Path, kind: str
) -> None:
    try:
        sid, task_id = await run_until_killed(db_url, workspace, tmp_path, kind)
    finally:
        end_leftovers(workspace)

    after = scripted(
        {"tool_calls": [tool_call("task_output", "call_out", task_id=task_id)]},
        {"text": "The task was lost in the restart; I will start it again if you want."},
    )
    async with server_factory(after, database_url=db_url, permission_mode=PermissionMode.BYPASS) as server:
        client = await server.client()
        await attach(client, sid, 0)  # loads the session: crash repair runs first
        (lost,) = [e for e in events(client, sid, "background_task") if e["taskId"] == task_id]
        assert lost["status"] == "interrupted"
        assert lost["taskKind"] == kind
        assert lost["exitCode"] is None
        assert "was interrupted: the server stopped while it ran" in lost["message"]

        resp = await client.call("session/prompt", text_prompt(sid, "how is the task going?"))
        assert resp["stopReason"] == "end_turn"
        first, second = after.requests
        assert first.messages[-2].content == "how is the task going?"
        notice = str(first.messages[-1].content)
        assert "<system-reminder>" in notice and f"{task_id} has finished" in notice
        assert "was interrupted" in notice
        output = str(second.messages[-1].content)
        assert second.messages[-1].tool_call_id == "call_out"
        assert "was interrupted" in output and "no background task" not in output
        # Announced once: the second request has that one task reminder in its history only
        # (beside it the opening's own reminders, issue 30 item 7).
        assert sum(f"{task_id} has finished" in str(m.content) for m in second.messages) == 1
        # The restart started no turn of its own (only the user's, after the first life's).
        assert [e.get("source") for e in events(client, sid, "turn_started")][-1] == "user"
        assert len(after.requests) == 2
        assert_valid_frames(client)
        await client.close()
