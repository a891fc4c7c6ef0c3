"""An idle session wakes when a background task finishes (a "后台通知" prompt, 001), through a
real server and a WebSocket (agentd/session/wake.py).

- a background `bash` that finishes while no turn runs starts a turn by itself: its
  `turn_started` says `source: "task_notification"`, it shows no user message, and its
  first model request ends with the task's reminder;
- a background sub-agent that finishes while idle does the same;
- wake turns that keep starting tasks stop after `wake_max_consecutive` in a row: a notice
  says so, the last news waits for the user's next prompt, and that prompt starts a fresh
  allowance;
- a prompt already waiting — held by someone editing it — is never overtaken: no wake turn
  starts, and that prompt's turn carries the news once released; a task that ends after
  the running turn's last sampling round wakes nobody while that prompt waits;
- with `wake_on_task_finish=False` nothing wakes (test_background_notices.py covers the
  notice then reaching the next prompt's first request).

Each background command blocks reading a FIFO the test owns, so "it finished now" is a fact
the test arranged, never a delay.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from agentd.core.provider import ProviderRequest
from agentd.infra.config import PermissionMode
from tests.support.background import make_fifo, release, reminders
from tests.support.client import WsClient, text_prompt
from tests.support.frames import attach
from tests.support.gated import GatedProvider
from tests.support.routed import RoutedProvider
from tests.support.server import scripted
from tests.support.session import assert_valid_frames, events, is_event, new_session
from tests.support.subagents import task

BYPASS = PermissionMode.BYPASS
WAKE = "task_notification"


def start_job(call_id: str, fifo: str) -> dict[str, Any]:
    command = f'read line < {fifo}; echo "got $line"'
    return {"name": "bash", "id": call_id, "arguments": {"command": command, "run_in_background": True}}


def make_fifo_named(workspace: Path, name: str) -> Path:
    path = workspace / name
    os.mkfifo(path)
    return path


def sources(client: WsClient, sid: str) -> list[str]:
    return [e["source"] for e in events(client, sid, "turn_started")]


def is_notice(sid: str) -> Any:
    """A notice, as an ACP `notice` update or (a client not advertising it) `_agentd/event`."""

    def predicate(msg: dict[str, Any]) -> bool:
        params = msg.get("params") or {}
        if params.get("sessionId") != sid:
            return False
        update = params.get("update") or {}
        return update.get("sessionUpdate") == "notice" or params.get("kind") == "notice"

    return predicate


def last_is_reminder_for(request: ProviderRequest, task_id: str) -> bool:
    last = request.messages[-1]
    return last.role == "user" and f"{task_id} has finished" in str(last.content)


async def test_background_bash_finishing_while_idle_starts_a_turn_with_its_notice(
    server_factory, workspace: Path
):
    fifo = make_fifo(workspace)
    provider = scripted(
        {"tool_calls": [start_job("call_bg", fifo.name)]},
        {"text": "Started it."},
        {"text": "The job printed: got go."},
    )
    async with server_factory(provider, permission_mode=BYPASS) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        await client.call("session/prompt", text_prompt(sid, "start the job"))
        assert len(provider.requests) == 2

        await release(fifo)
        await client.wait_notification(is_event(sid, "background_task", taskId="bg-1", status="completed"))
        started = await client.wait_notification(is_event(sid, "turn_started", source=WAKE))
        turn_id = started["params"]["event"]["turnId"]
        ended = await client.wait_notification(is_event(sid, "turn_ended", turnId=turn_id))

        assert ended["params"]["event"]["stopReason"] == "end_turn"
        assert started["params"]["event"]["kind"] == "prompt"
        assert sources(client, sid) == ["user", WAKE]
        woke = provider.requests[2]
        # No user message of its own: the assistant's last word, then the reminder.
        assert woke.messages[-2].role == "assistant" and woke.messages[-2].content == "Started it."
        assert last_is_reminder_for(woke, "bg-1")
        assert len(reminders(woke)) == 1
        # Recorded like any turn: a client attaching later sees why it started, and only
        # the user's own prompt as a user message.
        late = await server.client()
        await attach(late, sid, 0)
        assert sources(late, sid) == ["user", WAKE]
        shown = [u for u in late.updates(sid) if u["sessionUpdate"] == "user_message_chunk"]
        assert [u["content"]["text"] for u in shown] == ["start the job"]
        assert_valid_frames(client)
        await client.close()
        await late.close()


async def test_background_subagent_finishing_while_idle_starts_a_turn(
    server_factory,
    workspace: Path,
    agents_dir: Path,
):
    parent = scripted(
        {"tool_calls": [task("t1", "waiter", "compute", description="compute", run_in_background=True)]},
        {"text": "Started it."},
        {"text": "It said 7."},
    )
    child = GatedProvider(scripted({"text": "Background result: 7"}), hold={0})
    routed = RoutedProvider(parent, {"WAITER": child})
    async with server_factory(routed, agents_dir=agents_dir) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        await client.call("session/prompt", text_prompt(sid, "start it"))
        await client.wait_notification(is_event(sid, "background_task_started", taskId="agent-1"))
        await child.held(0)

        child.release(0)
        started = await client.wait_notification(is_event(sid, "turn_started", source=WAKE))
        turn_id = started["params"]["event"]["turnId"]
        await client.wait_notification(is_event(sid, "turn_ended", turnId=turn_id))

        assert sources(client, sid) == ["user", WAKE]
        assert last_is_reminder_for(parent.requests[2], "agent-1")
        (done,) = events(client, sid, "background_task")
        assert (done["taskId"], done["status"]) == ("agent-1", "completed")
        await client.close()


async def test_wake_turns_stop_after_the_cap_until_the_user_prompts(server_factory, workspace: Path):
    fifos = [make_fifo_named(workspace, f"job{i}.fifo") for i in (1, 2, 3)]
    provider = scripted(
        # The user's turn, then two wake turns: each starts the next job and ends.
        {"tool_calls": [start_job("c1", fifos[0].name)]},
        {"text": "Started job 1."},
        {"tool_calls": [start_job("c2", fifos[1].name)]},
        {"text": "Started job 2."},
        {"tool_calls": [start_job("c3", fifos[2].name)]},
        {"text": "Started job 3."},
        # The user's next prompt: job 3's news was kept for it.
        {"text": "Job 3 is done too."},
    )
    async with server_factory(provider, permission_mode=BYPASS, wake_max_consecutive=2) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        await client.call("session/prompt", text_prompt(sid, "start job 1"))

        for n, fifo in enumerate(fifos[:2], start=1):
            await release(fifo)
            started = await client.wait_notification(is_event(sid, "turn_started", source=WAKE))
            turn_id = started["params"]["event"]["turnId"]
            await client.wait_notification(is_event(sid, "turn_ended", turnId=turn_id))
            assert last_is_reminder_for(provider.requests[2 * n], f"bg-{n}")

        # Job 3 ends after two wake turns in a row: no third one, a notice instead.
        await release(fifos[2])
        await client.wait_notification(is_event(sid, "background_task", taskId="bg-3"))
        await client.wait_notification(is_notice(sid))
        assert sources(client, sid) == ["user", WAKE, WAKE]
        assert len(provider.requests) == 6

        # The user is back: the news reaches their turn, and the allowance starts again.
        await client.call("session/prompt", text_prompt(sid, "and job 3?"))
        first = provider.requests[6]
        assert first.messages[-2].content == "and job 3?"
        assert last_is_reminder_for(first, "bg-3")
        assert sources(client, sid) == ["user", WAKE, WAKE, "user"]
        assert len(events(client, sid, "background_task")) == 3
        await client.close()


async def test_a_held_prompt_is_not_overtaken_and_its_turn_carries_the_news(server_factory, workspace: Path):
    fifo = make_fifo(workspace)
    inner = scripted(
        {"tool_calls": [start_job("call_bg", fifo.name)]},
        {"text": "Started it."},
        {"text": "Your edit, and the job printed: got go."},
    )
    provider = GatedProvider(inner, hold={1})
    async with server_factory(provider, permission_mode=BYPASS) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        running = asyncio.create_task(client.call("session/prompt", text_prompt(sid, "start the job")))
        # The turn's last request is on its way (its reminders already drained): a prompt
        # waits behind it, held, and the job finishes.
        await provider.held(1)
        queued = await client.call(
            "_agentd/prompt/enqueue", {"sessionId": sid, "prompt": [{"type": "text", "text": "my edit"}]}
        )
        held = await client.call("_agentd/queue/hold", {"sessionId": sid, "id": queued["promptId"]})
        assert held["queue"][0]["held"] is True
        await release(fifo)
        await client.wait_notification(is_event(sid, "background_task", taskId="bg-1"))
        provider.release(1)
        assert (await running)["stopReason"] == "end_turn"

        await client.call("_agentd/queue/release", {"sessionId": sid, "id": queued["promptId"]})
        await client.wait_notification(is_event(sid, "turn_ended", promptId=queued["promptId"]))
        # Had the session woken, its turn would have run before the released prompt's.
        assert sources(client, sid) == ["user", "user"]
        first = provider.requests[2]
        assert first.messages[-2].content == "my edit"
        assert last_is_reminder_for(first, "bg-1")
        assert len(provider.requests) == 3
        await client.close()


async def test_a_task_ending_after_the_turns_last_round_wakes_the_session_when_the_turn_ends(
    server_factory, workspace: Path
):
    fifo = make_fifo(workspace)
    inner = scripted(
        {"tool_calls": [start_job("call_bg", fifo.name)]},
        {"text": "Started it."},
        {"text": "The job printed: got go."},
    )
    provider = GatedProvider(inner, hold={1})
    async with server_factory(provider, permission_mode=BYPASS) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        running = asyncio.create_task(client.call("session/prompt", text_prompt(sid, "start the job")))
        await provider.held(1)  # its reminders drained: the job's end cannot reach this turn
        await release(fifo)
        await client.wait_notification(is_event(sid, "background_task", taskId="bg-1"))
        provider.release(1)
        assert (await running)["stopReason"] == "end_turn"

        started = await client.wait_notification(is_event(sid, "turn_started", source=WAKE))
        await client.wait_notification(
            is_event(sid, "turn_ended", turnId=started["params"]["event"]["turnId"])
        )
        assert last_is_reminder_for(provider.requests[2], "bg-1")
        assert sources(client, sid) == ["user", WAKE]
        await client.close()
