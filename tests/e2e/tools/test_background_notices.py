"""Background-task notifications (issue 16 item 12), through the real server and a WebSocket.

"注入一条提醒消息" (000: the remedy for "the model did not notice" is a reminder message),
and "后台通知" is one of the inputs a turn knows (001). A background `bash` that finishes:

- during a turn → the next model request carries one system reminder (task id, command,
  exit status, the `task_output` call that reads it), and clients get a `background_task`
  `_agentd/event` as soon as it finishes;
- while the session is idle and waking is off (`wake_on_task_finish=False`) → the event at
  once, the reminder in the next turn's first request; no turn starts on its own (with
  waking on, the default, a turn starts by itself: test_background_wake.py);
- either way it is announced once: later requests hold that one reminder in their history
  and no new one; a task whose end the model saw through `wait` gets no reminder at all.

The background command blocks reading a FIFO the test owns, so "it finished now" is a
fact the test arranged (it writes the line), never a delay.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentd.infra.config import PermissionMode
from tests.support.background import FIFO, make_fifo, release, reminders
from tests.support.client import WsClient, text_prompt
from tests.support.frames import attach
from tests.support.gated import GatedProvider
from tests.support.server import scripted
from tests.support.session import assert_valid_frames, events, is_event, is_update, new_session

COMMAND = f'read line < {FIFO}; echo "got $line"; exit 3'
START_JOB = {"name": "bash", "arguments": {"command": COMMAND, "run_in_background": True}}


def assert_reminder(text: str) -> None:
    assert "Background task bg-1 has finished: task bg-1 finished with exit code 3." in text
    assert f"Command: {COMMAND}" in text
    assert 'task_output (task_id "bg-1")' in text


async def finished_event(client: WsClient, sid: str) -> dict[str, Any]:
    frame = await client.wait_notification(is_event(sid, "background_task", taskId="bg-1"))
    event: dict[str, Any] = frame["params"]["event"]
    assert event == {
        "taskId": "bg-1",
        "taskKind": "bash",
        "summary": COMMAND,
        "status": "failed",
        "exitCode": 3,
        "message": "task bg-1 finished with exit code 3",
    }
    assert isinstance(frame["params"]["_meta"]["agentd"]["seq"], int)  # durable
    return event


async def test_task_finishing_during_a_turn_reaches_the_next_request_once(server_factory, workspace: Path):
    fifo = make_fifo(workspace)
    inner = scripted(
        {"tool_calls": [{**START_JOB, "id": "call_bg"}]},
        {
            "text": "Meanwhile, a quick check.",
            "tool_calls": [{"name": "bash", "id": "call_echo", "arguments": {"command": "echo checked"}}],
        },
        {"text": "The job failed with exit code 3."},
        {"text": "You are welcome."},
    )
    provider = GatedProvider(inner, hold={1})
    async with server_factory(provider, permission_mode=PermissionMode.BYPASS) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        prompt = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "run the job")))

        # Request 1 is on its way (the model is streaming): the task finishes now.
        await provider.held(1)
        await release(fifo)
        await finished_event(client, sid)
        provider.release(1)

        resp = await prompt
        assert resp["result"]["stopReason"] == "end_turn", resp
        assert len(provider.requests) == 3
        assert reminders(provider.requests[0]) == reminders(provider.requests[1]) == []
        # The round after it finished: the echo's result, then the reminder, newest.
        after = provider.requests[2]
        assert after.messages[-2].tool_call_id == "call_echo"
        assert after.messages[-1].role == "user"
        assert_reminder(str(after.messages[-1].content))
        assert len(reminders(after)) == 1

        # The next turn: the reminder is history, not announced again.
        await client.call("session/prompt", text_prompt(sid, "thanks"))
        nxt = provider.requests[3]
        assert len(reminders(nxt)) == 1
        assert nxt.messages[-1].content == "thanks"
        assert len(events(client, sid, "background_task")) == 1
        assert_valid_frames(client)
        await client.close()


async def test_task_finishing_while_idle_without_waking_is_in_the_next_turns_first_request(
    server_factory, workspace: Path
):
    fifo = make_fifo(workspace)
    provider = scripted(
        {"tool_calls": [{**START_JOB, "id": "call_bg"}]},
        {"text": "Started it."},
        {"text": "It failed with exit code 3."},
        {"text": "Nothing new."},
    )
    off = {"permission_mode": PermissionMode.BYPASS, "wake_on_task_finish": False}
    async with server_factory(provider, **off) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        await client.call("session/prompt", text_prompt(sid, "start the job"))
        assert len(provider.requests) == 2

        # Idle: the task finishes; clients hear of it at once.
        await release(fifo)
        await finished_event(client, sid)

        await client.call("session/prompt", text_prompt(sid, "how did it go?"))
        first = provider.requests[2]
        assert [reminders(r) for r in provider.requests[:2]] == [[], []]
        assert first.messages[-2].content == "how did it go?"
        assert_reminder(str(first.messages[-1].content))

        await client.call("session/prompt", text_prompt(sid, "anything else?"))
        assert len(reminders(provider.requests[3])) == 1
        assert provider.requests[3].messages[-1].content == "anything else?"
        # No turn started by itself: three prompts, three turns, four model calls.
        assert len(events(client, sid, "turn_started")) == 3
        assert len(provider.requests) == 4
        assert len(events(client, sid, "background_task")) == 1
        # Durable: a client attaching later replays it from the store, once.
        late = await server.client()
        await attach(late, sid, 0)
        assert len(events(late, sid, "background_task")) == 1
        assert_valid_frames(client)
        await client.close()
        await late.close()


async def test_task_the_model_waited_for_gets_the_event_but_no_reminder(server_factory, workspace: Path):
    fifo = make_fifo(workspace)
    provider = scripted(
        {"tool_calls": [{**START_JOB, "id": "call_bg"}]},
        {
            "tool_calls": [
                {"name": "wait", "id": "call_wait", "arguments": {"task_id": "bg-1", "timeout": 60}}
            ]
        },
        {"text": "It exited with 3."},
    )
    async with server_factory(provider, permission_mode=PermissionMode.BYPASS) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        prompt = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "run and wait")))
        await client.wait_notification(
            is_update(sid, "tool_call_update", toolCallId="call_wait", status="in_progress")
        )
        await release(fifo)
        resp = await prompt
        assert resp["result"]["stopReason"] == "end_turn", resp

        last = provider.requests[2]
        assert last.messages[-1].tool_call_id == "call_wait"
        assert "finished with exit code 3" in str(last.messages[-1].content)
        assert reminders(last) == []  # the wait's result was the model learning it
        await finished_event(client, sid)
        assert len(events(client, sid, "background_task")) == 1
        await client.close()
