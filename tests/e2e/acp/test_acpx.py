"""acpx, a stock ACP client agentd did not write, drives `agentd acp` end to end (issue 29
item 4): a prompt writing a new file through the client's file system and then editing it,
permissions approved and denied, a streamed answer cancelled with `acpx cancel`, a session
resumed from a fresh acpx process — and acpx's
stderr holds nothing but its own status lines (no "Method not found", no `_agentd/`)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.acp_stdio import agentd_env
from tests.support.acpx_client import AcpxRun, finish_acpx, run_acpx, start_acpx
from tests.support.polling import until

pytestmark = pytest.mark.timeout(120)


def _env(tmp_path: Path, steps: list[dict[str, Any]]) -> dict[str, str]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": steps}))
    env = agentd_env(tmp_path / "agentd-home", script)
    env["HOME"] = str(tmp_path / "acpx-home")  # acpx's sessions and queue owner: this test's own
    os.makedirs(env["HOME"], exist_ok=True)
    return env


def _call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "id": call_id, "arguments": arguments}


def _clean(run: AcpxRun, returncode: int = 0) -> None:
    assert run.returncode == returncode, run.stderr
    assert run.foreign_stderr() == []
    assert not any("_agentd" in json.dumps(f) for f in run.frames if "method" in f and "id" not in f)
    # No error from agentd to anything acpx asked (acpx's own errors answering agentd's
    # requests — "not found" for a new file's pre-read — are the protocol working).
    mine = {
        f["id"] for f in run.frames if "method" in f and "id" in f and not str(f["id"]).startswith("agentd-")
    }
    assert not [f for f in run.frames if "error" in f and f.get("id") in mine], (
        "agentd answered with an error"
    )


async def test_acpx_writes_a_new_file_through_the_client_and_edits_it(
    tmp_path: Path, workspace: Path
) -> None:
    steps = [
        {"tool_calls": [_call("write_file", "c_write", path="new.txt", content="hello\n")]},
        {
            "tool_calls": [
                _call("edit_file", "c_edit", path="new.txt", old_string="hello", new_string="hello, edited")
            ]
        },
        {"text": "Written and edited."},
    ]
    run = await run_acpx(
        _env(tmp_path, steps), workspace, "--approve-all", "exec", "write new.txt, then edit it"
    )
    _clean(run)
    assert (workspace / "new.txt").read_text() == "hello, edited\n"
    # Through acpx's own file system: it wrote both versions, and it answered two permissions.
    written = [r["params"]["content"] for r in run.requests("fs/write_text_file")]
    assert written == ["hello\n", "hello, edited\n"]
    asked = run.requests("session/request_permission")
    assert [a["params"]["toolCall"]["toolCallId"] for a in asked] == ["c_write", "c_edit"]
    assert all(run.reply_to(a)["result"]["outcome"]["outcome"] == "selected" for a in asked)
    [prompt] = run.requests("session/prompt")
    assert run.reply_to(prompt)["result"]["stopReason"] == "end_turn"
    text = "".join(u["content"]["text"] for u in run.updates("agent_message_chunk"))
    assert text == "Written and edited."


async def test_acpx_denying_a_permission_leaves_the_workspace_untouched(
    tmp_path: Path, workspace: Path
) -> None:
    steps = [
        {"tool_calls": [_call("write_file", "c_write", path="denied.txt", content="no\n")]},
        {"text": "It was refused."},
    ]
    run = await run_acpx(_env(tmp_path, steps), workspace, "--deny-all", "exec", "write denied.txt")
    _clean(run, returncode=5)  # acpx's exit code when every permission asked was denied
    assert not (workspace / "denied.txt").exists() and run.requests("fs/write_text_file") == []
    [asked] = run.requests("session/request_permission")
    assert run.reply_to(asked)["result"]["outcome"]["optionId"].startswith("reject")
    ended = [u for u in run.updates("tool_call_update") if u["toolCallId"] == "c_write" and u.get("status")]
    assert ended and ended[-1]["status"] == "failed"
    [prompt] = run.requests("session/prompt")
    assert "stopReason" in run.reply_to(prompt)["result"]  # the turn ended: the refusal did not hang it


async def test_a_fresh_acpx_process_resumes_the_session_and_goes_on(tmp_path: Path, workspace: Path) -> None:
    env = _env(tmp_path, [{"text": "first answer"}, {"text": "second answer"}])
    created = await run_acpx(env, workspace, "sessions", "new")
    assert created.returncode == 0 and created.foreign_stderr() == []
    [ensured] = created.frames  # acpx's own record of the session it created through session/new
    assert ensured["action"] == "session_ensured" and ensured["created"] is True
    sid = ensured["acpxSessionId"]
    queues = Path(env["HOME"]) / ".acpx" / "queues"
    runs = []
    for text in ("hello", "and again"):
        # acpx's queue owner (and the `agentd acp` it runs) lingers for its TTL: each prompt
        # here must start a new agent process, not talk to the previous one.
        await until(
            lambda: not queues.exists() or not any(queues.iterdir()), within=30, what="no queue owner"
        )
        run = await run_acpx(env, workspace, "--ttl", "1", "prompt", text)
        _clean(run)
        runs.append(run)
    for run in runs:
        # A new `agentd acp` process each time: acpx reattaches by id (resume, else load).
        reattach = run.requests("session/resume") or run.requests("session/load")
        assert [r["params"]["sessionId"] for r in reattach] == [sid]
        assert "result" in run.reply_to(reattach[0])
        [prompt] = run.requests("session/prompt")
        assert prompt["params"]["sessionId"] == sid
        assert run.reply_to(prompt)["result"]["stopReason"] == "end_turn"


async def test_acpx_cancel_stops_a_streaming_answer(tmp_path: Path, workspace: Path) -> None:
    # ~2,000 chunks 20 ms apart, never repeating (a repetitive stream is cut as degenerate):
    # still streaming when the cancel lands.
    long = " ".join(f"w{i}" for i in range(2000))
    env = _env(tmp_path, [{"text": long, "chunk_size": 5, "chunk_delay": 0.02}])
    created = await run_acpx(env, workspace, "sessions", "new")
    assert created.returncode == 0 and created.foreign_stderr() == []
    prompting = await start_acpx(env, workspace, "--ttl", "1", "prompt", "talk")
    assert prompting.stdout is not None
    read = b""
    while b"agent_message_chunk" not in read:  # the answer is streaming
        line = await asyncio.wait_for(prompting.stdout.readline(), 60)
        assert line, "acpx ended before the answer streamed"
        read += line
    cancelled = await run_acpx(env, workspace, "cancel")  # a second acpx process, through the queue owner
    assert cancelled.returncode == 0 and cancelled.foreign_stderr() == []
    assert cancelled.frames[-1]["action"] == "cancel_result" and cancelled.frames[-1]["cancelled"] is True
    run = await finish_acpx(prompting, read)
    _clean(run)
    [prompt] = run.requests("session/prompt")
    assert run.frames_with("session/cancel")  # acpx's queue owner sent it to agentd
    assert run.reply_to(prompt)["result"]["stopReason"] == "cancelled"
    said = "".join(u["content"]["text"] for u in run.updates("agent_message_chunk"))
    assert said and len(said) < len(long)  # cut short, not streamed to its end
