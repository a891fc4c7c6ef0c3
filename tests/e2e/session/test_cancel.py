"""`session/cancel` (ACP; R-L3a): a cancelled prompt ends with stopReason `cancelled` (a
result, never an error) wherever the turn was — streaming the model's answer, running a
command, waiting for permission — and the session stays usable with a well-formed
conversation."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, TypeVar

from agentd.core.conversation import Message
from agentd.core.provider import ProviderRequest
from agentd.infra.config import PermissionMode, SandboxSetting
from agentd.loop.reminders import system_reminder
from agentd.loop.turn_reminders import INTERRUPTION_TEXT
from tests.support.client import agent_text, text_prompt
from tests.support.polling import until, value_of
from tests.support.proc import process_alive, read_pid
from tests.support.server import scripted
from tests.support.session import (
    assert_valid_frames,
    cancel,
    events,
    final_tool_updates,
    is_event,
    is_update,
    new_session,
    served_session,
    shown_text,
)

# The next turn opens with it after a user's cancel (001: "中断提示"; issue 30 item 7).
INTERRUPTED = system_reminder(INTERRUPTION_TEXT)

T = TypeVar("T")

# ---------------------------------------------------------------------------- helpers


def assert_well_formed(messages: list[Message]) -> None:
    """Every assistant tool call is answered by a tool result right after that message
    (before the next user or assistant message), and no tool result is orphaned."""
    i = 0
    while i < len(messages):
        m = messages[i]
        if m.role == "tool":
            raise AssertionError(f"tool result {m.tool_call_id} without a preceding tool call")
        i += 1
        if m.role == "assistant" and m.tool_calls:
            results = []
            while i < len(messages) and messages[i].role == "tool":
                results.append(messages[i].tool_call_id)
                i += 1
            assert sorted(results) == sorted(c.id for c in m.tool_calls), (m.tool_calls, results)


def assert_all_requests_well_formed(requests: list[ProviderRequest]) -> None:
    for request in requests:
        assert_well_formed(request.messages)


# ---------------------------------------------------------------------------- streaming


async def test_cancel_during_streamed_answer_ends_cancelled_and_keeps_the_partial_text(
    server_factory, workspace: Path
):
    full_text = "".join(f"word{n} " for n in range(300))
    provider = scripted(
        {"text": full_text, "chunk_size": 6, "chunk_delay": 0.05},  # ~15 s if not cancelled
        {"text": "Picking up where I left off."},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        prompt = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "tell me a story")))
        await client.wait_notification(is_update(sid, "agent_message_chunk"))
        await cancel(client, sid)
        resp = await prompt

        assert "error" not in resp, resp
        assert resp["result"]["stopReason"] == "cancelled"
        assert resp["result"]["_meta"]["agentd"]["reason"] == "user_cancelled"
        ended = events(client, sid, "turn_ended")
        assert len(ended) == 1 and ended[0]["outcome"] == "cancelled"

        partial = agent_text(client.updates(sid))
        assert partial and full_text.startswith(partial) and len(partial) < len(full_text)
        # The durable final-text event holds exactly what was streamed.
        assert [e["text"] for e in events(client, sid, "agent_message")] == [partial]

        result = await client.call("session/prompt", text_prompt(sid, "go on"))
        assert result["stopReason"] == "end_turn"
        assert len(provider.requests) == 2
        assert [(m.role, m.content) for m in provider.requests[1].messages] == [
            ("user", "tell me a story"),
            ("assistant", partial),
            ("user", INTERRUPTED),  # 001's opening "中断提示" (issue 30 item 7)
            ("user", "go on"),
        ]
        assert_all_requests_well_formed(provider.requests)
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- running tool


async def test_cancel_while_bash_runs_kills_the_command_and_its_children(server_factory, workspace: Path):
    provider = scripted(
        {
            "text": "Starting a long job.",
            "tool_calls": [
                {
                    "name": "bash",
                    "arguments": {"command": "sleep 30 & echo $! > child.pid; wait"},
                    "id": "call_sleep",
                }
            ],
        },
        {"text": "Okay, stopped."},
    )
    # Unconfined: the pid the command writes is a host pid only outside the sandbox's pid
    # namespace (the sandboxed case: tests/e2e/tools/test_sandbox_escapes.py).
    async with served_session(
        server_factory,
        workspace,
        provider,
        permission_mode=PermissionMode.BYPASS,
        sandbox=SandboxSetting.NONE,
    ) as (_, client, sid):
        prompt = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "run the job")))
        await client.wait_notification(is_update(sid, "tool_call_update", status="in_progress"))
        pid = await value_of(lambda: read_pid(workspace / "child.pid"), what="child.pid")
        assert process_alive(pid)
        await cancel(client, sid)
        resp = await prompt

        assert "error" not in resp, resp
        assert resp["result"]["stopReason"] == "cancelled"
        assert resp["result"]["_meta"]["agentd"]["reason"] == "user_cancelled"
        await until(lambda: not process_alive(pid), what=f"process {pid} to die")
        final = final_tool_updates(client, sid)["call_sleep"]
        assert final["status"] == "failed"
        assert "Cancelled by the user" in shown_text(final)
        assert client.server_requests == []  # bypass: nothing asked

        result = await client.call("session/prompt", text_prompt(sid, "what happened?"))
        assert result["stopReason"] == "end_turn"
        second = provider.requests[1].messages
        tool_msgs = [m for m in second if m.role == "tool"]
        assert len(tool_msgs) == 1 and tool_msgs[0].tool_call_id == "call_sleep" and tool_msgs[0].is_error
        assert [m.role for m in second] == ["user", "assistant", "tool", "user", "user"]
        assert second[-2].content == INTERRUPTED
        assert_all_requests_well_formed(provider.requests)
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- permission wait


async def test_cancel_while_waiting_for_permission(server_factory, workspace: Path):
    provider = scripted(
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}, "id": "call_write"},
                {"name": "bash", "arguments": {"command": "touch y.txt"}, "id": "call_bash"},
            ]
        },
        {"text": "Understood, I will not write it."},
    )
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        client = await server.client()
        client.on_request = None  # a client that never answers
        sid = await new_session(client, workspace)

        prompt = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "write x")))
        requested = await client.wait_notification(is_event(sid, "permission_requested"))
        request_id = requested["params"]["event"]["requestId"]
        await cancel(client, sid)
        resp = await prompt

        assert "error" not in resp, resp
        assert resp["result"]["stopReason"] == "cancelled"
        assert resp["result"]["_meta"]["agentd"]["reason"] == "user_cancelled"
        resolved = [
            f["params"]
            for f in client.frames
            if isinstance(f, dict) and f.get("method") == "_agentd/permission/resolved"
        ]
        assert len(resolved) == 1
        assert resolved[0]["sessionId"] == sid
        assert resolved[0]["requestId"] == request_id
        assert resolved[0]["outcome"] == "cancelled"
        # Resolved, then the turn ended, then the prompt was answered.
        order = [
            i
            for marker in (
                lambda f: f.get("method") == "_agentd/permission/resolved",
                lambda f: f.get("method") == "_agentd/event" and f["params"]["kind"] == "turn_ended",
                lambda f: "method" not in f and f.get("id") == resp["id"],
            )
            for i, f in enumerate(client.frames)
            if isinstance(f, dict) and marker(f)
        ]
        assert len(order) == 3 and order == sorted(order)
        # Only the first call was ever asked about; the second never ran either.
        assert [r["params"]["toolCall"]["toolCallId"] for r in client.server_requests] == ["call_write"]
        assert not (workspace / "x.txt").exists()
        assert not (workspace / "y.txt").exists()
        finals = final_tool_updates(client, sid)
        assert finals["call_write"]["status"] == "failed"
        assert "Cancelled by the user while waiting for permission" in shown_text(finals["call_write"])
        assert finals["call_bash"]["status"] == "failed"
        assert "earlier tool call in this step was cancelled" in shown_text(finals["call_bash"])

        result = await client.call("session/prompt", text_prompt(sid, "never mind"))
        assert result["stopReason"] == "end_turn"
        assert [m.role for m in provider.requests[1].messages] == [
            "user",
            "assistant",
            "tool",
            "tool",
            "user",  # the interruption reminder
            "user",
        ]
        assert_all_requests_well_formed(provider.requests)
        await client.close()


async def test_cancel_ends_only_the_running_turn_and_queued_prompts_still_run(
    server_factory, workspace: Path
):
    provider = scripted(
        {"text": "never streamed", "delay": 60},  # cancelled long before this
        {"text": "queued prompt answered"},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        first = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "slow one")))
        await client.wait_notification(is_event(sid, "turn_started"))
        # Frames of one connection are handled in order: the second prompt is queued
        # before the cancel arrives.
        second = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "queued one")))
        await cancel(client, sid)

        resp_1, resp_2 = await asyncio.gather(first, second)
        assert resp_1["result"]["stopReason"] == "cancelled"
        assert resp_2["result"]["stopReason"] == "end_turn"
        assert agent_text(client.updates(sid)) == "queued prompt answered"
        assert [e["outcome"] for e in events(client, sid, "turn_ended")] == ["cancelled", "completed"]
        # Cancelled before the first token: nothing of turn one reached the conversation.
        assert [(m.role, m.content) for m in provider.requests[1].messages] == [
            ("user", "slow one"),
            ("user", INTERRUPTED),
            ("user", "queued one"),
        ]


# ---------------------------------------------------------------------------- idle cancel


async def test_cancel_without_a_running_turn_is_harmless(server_factory, workspace: Path):
    provider = scripted({"text": "first answer"}, {"text": "second answer"})
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        # Before any turn, and for a session that does not exist: nothing happens.
        await cancel(client, sid)
        await cancel(client, "sess_does_not_exist")
        result = await client.call("session/prompt", text_prompt(sid, "hello"))
        assert result["stopReason"] == "end_turn"

        # After a finished turn: the next prompt is not affected by the stale cancel.
        await cancel(client, sid)
        result = await client.call("session/prompt", text_prompt(sid, "hello again"))
        assert result["stopReason"] == "end_turn"
        assert agent_text(client.updates(sid)) == "first answersecond answer"
        assert [e["outcome"] for e in events(client, sid, "turn_ended")] == ["completed", "completed"]
        # A cancel is a notification: the server never answers it.
        assert all(
            f.get("id") is None or f.get("id") in client.sent_methods
            for f in client.frames
            if isinstance(f, dict) and "method" not in f
        )
        assert_all_requests_well_formed(provider.requests)
        assert_valid_frames(client)


async def test_cancel_then_new_prompt_in_every_state_keeps_the_conversation_well_formed(
    server_factory, workspace: Path
):
    """Several cancels in one session (mid-stream, mid-tool, mid-permission): each next
    prompt works and every request the model gets pairs each tool call with a result."""
    (workspace / "data.txt").write_text("payload\n")
    provider = scripted(
        # turn 1: a slow answer, cancelled mid-stream
        {"text": "x" * 600, "chunk_size": 3, "chunk_delay": 0.05},
        # turn 2: a read (runs at once) plus a long command, cancelled while it runs
        {
            "text": "Reading and waiting.",
            "tool_calls": [
                {"name": "read_file", "arguments": {"path": "data.txt"}, "id": "call_read"},
                {"name": "bash", "arguments": {"command": "echo started; sleep 30"}, "id": "call_wait"},
            ],
        },
        # turn 3: a write that needs permission, cancelled while asking
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "out.txt", "content": "o"}, "id": "call_w"}
            ]
        },
        # turn 4: plain answer
        {"text": "All good now."},
    )
    async with server_factory(provider, permission_mode=PermissionMode.ACCEPT_EDITS) as server:
        client = await server.client()
        client.on_request = None
        sid = await new_session(client, workspace)

        p1 = asyncio.create_task(client.call("session/prompt", text_prompt(sid, "one")))
        await client.wait_notification(is_update(sid, "agent_message_chunk"))
        await cancel(client, sid)
        assert (await p1)["stopReason"] == "cancelled"

        # accept_edits asks for bash: approve it by answering the request ourselves.
        async def approve_bash(msg: dict[str, Any]) -> dict[str, Any] | None:
            if msg["params"]["toolCall"]["toolCallId"] == "call_wait":
                return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
            return None  # everything else: never answered

        client.on_request = approve_bash
        p2 = asyncio.create_task(client.call("session/prompt", text_prompt(sid, "two")))
        await client.wait_notification(
            is_update(sid, "tool_call_update", toolCallId="call_wait", status="in_progress")
        )
        await client.wait_notification(is_update(sid, "tool_call_update", toolCallId="call_wait"))  # output
        await cancel(client, sid)
        assert (await p2)["stopReason"] == "cancelled"
        finals = final_tool_updates(client, sid)
        assert finals["call_read"]["status"] == "completed"
        assert finals["call_wait"]["status"] == "failed"

        # Set the mode so write_file asks, then cancel while it waits.
        await client.call("session/set_mode", {"sessionId": sid, "modeId": "default"})
        p3 = asyncio.create_task(client.call("session/prompt", text_prompt(sid, "three")))
        await client.wait_notification(is_event(sid, "permission_requested"))
        await cancel(client, sid)
        assert (await p3)["stopReason"] == "cancelled"
        assert not (workspace / "out.txt").exists()

        assert (await client.call("session/prompt", text_prompt(sid, "four")))["stopReason"] == "end_turn"
        assert len(provider.requests) == 4
        assert_all_requests_well_formed(provider.requests)
        last = provider.requests[3].messages
        assert [m.role for m in last] == [
            "user", "assistant",  # one (partial text)
            "user", "user", "assistant", "tool", "tool",  # the interruption reminder, two
            "user", "user", "assistant", "tool",  # three
            "user", "user",  # four
        ]  # fmt: skip
        assert [e["outcome"] for e in events(client, sid, "turn_ended")] == [
            "cancelled", "cancelled", "cancelled", "completed",
        ]  # fmt: skip
        await client.close()
