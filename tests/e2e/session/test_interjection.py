"""`_agentd/interject` ("steer", R-S4) and preemptible waits (R-T7), over a real WebSocket.

- During a running turn the input is written into the conversation before the next
  sampling round, and a `wait` / `task_output` waiting on a background task returns early
  with "interrupted by new user input"; the response is `{status: "interjected", turnId}`.
- `expectedTurnId` naming a turn that is no longer running fails with -32016
  `turn_not_active` (and changes nothing).
- With no running turn and no `expectedTurnId` it is queued and runs as a prompt.
- Input sent while the model streams its final (no-tool) answer is answered in the same
  turn: one more provider request, one `turn_started`.
- Input that misses its turn (the turn ends before the next drain) becomes the next
  prompt at the front of the queue, ahead of prompts queued earlier.

To be deterministic, the provider can hold a chosen call after its first delta until the
test releases it (`GatedProvider`): the test acts while the model is provably mid-stream.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentd.core.conversation import Message
from agentd.core.provider import ProviderRequest
from agentd.infra.config import PermissionMode
from agentd.protocol.jsonrpc import ErrorCode
from agentd.session.commands import Prompt
from agentd.tools.shell.background import INTERRUPTED_TEXT
from tests.support.client import RpcFailed, WsClient, agent_text, text_prompt
from tests.support.gated import GatedProvider
from tests.support.server import scripted
from tests.support.session import (
    assert_valid_frames,
    events,
    is_event,
    is_update,
    served_session,
    shown_text,
)

# ---------------------------------------------------------------------------- helpers


def interject_params(session_id: str, text: str, expected_turn_id: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    if expected_turn_id is not None:
        params["expectedTurnId"] = expected_turn_id
    return params


def final_update(client: WsClient, session_id: str, call_id: str) -> dict[str, Any]:
    finals = [
        u
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "tool_call_update"
        and u["toolCallId"] == call_id
        and u.get("status") in ("completed", "failed")
    ]
    assert len(finals) == 1, finals
    return finals[0]


def user_texts(request: ProviderRequest) -> list[str]:
    return [m.content for m in request.messages if m.role == "user"]


def roles(messages: list[Message]) -> list[str]:
    return [m.role for m in messages]


def watch_prompts(actor: Any) -> asyncio.Event:
    """Set once a `Prompt` command reaches the actor's mailbox. The mailbox is FIFO, so
    anything sent to the actor afterwards is handled after that prompt was queued (there
    is no client-visible "queued" signal to wait for)."""
    arrived = asyncio.Event()
    send = actor.send

    def spy(command: Any) -> None:
        send(command)
        if isinstance(command, Prompt):
            arrived.set()

    actor.send = spy
    return arrived


# ---------------------------------------------------------------------------- preempted waits

BACKGROUND_SLEEP = {"name": "bash", "arguments": {"command": "sleep 30", "run_in_background": True}}


@pytest.mark.parametrize(
    ("wait_call", "expected_prefix"),
    [
        pytest.param(
            {"name": "wait", "arguments": {"timeout": 60}},
            f"{INTERRUPTED_TEXT}; ",
            id="wait",
        ),
        pytest.param(
            {"name": "task_output", "arguments": {"task_id": "bg-1", "wait": True, "timeout": 60}},
            f"{INTERRUPTED_TEXT}; output so far:",
            id="task_output",
        ),
    ],
)
async def test_interjection_preempts_a_waiting_tool_and_reaches_the_next_request(
    server_factory, workspace: Path, wait_call: dict[str, Any], expected_prefix: str
):
    steer = "Actually, look at the logs first."
    provider = scripted(
        {"text": "Starting the job.", "tool_calls": [{**BACKGROUND_SLEEP, "id": "call_bg"}]},
        {"tool_calls": [{**wait_call, "id": "call_wait"}]},
        {"text": "Understood, looking at the logs."},
    )
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        prompt = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "run the job")))
        started = await client.wait_notification(is_event(sid, "turn_started"))
        turn_id = started["params"]["event"]["turnId"]
        await client.wait_notification(
            is_update(sid, "tool_call_update", toolCallId="call_wait", status="in_progress")
        )

        reply = await client.call("_agentd/interject", interject_params(sid, steer))
        assert reply == {"status": "interjected", "turnId": turn_id}

        # The wait returns early (a 60 s wait on a 30 s sleep would otherwise hang the test).
        resp = await prompt
        assert "error" not in resp, resp
        assert resp["result"]["stopReason"] == "end_turn"
        assert resp["result"]["_meta"]["agentd"]["turnId"] == turn_id

        assert len(provider.requests) == 3
        waited = final_update(client, sid, "call_wait")
        assert waited["status"] == "completed"
        assert shown_text(waited).startswith(expected_prefix)
        # The request right after the interrupted wait carries its result and then the
        # user's input, as the newest message; the request before it does not.
        before, after = provider.requests[1], provider.requests[2]
        assert steer not in user_texts(before)
        assert roles(after.messages)[-3:] == ["assistant", "tool", "user"]
        assert after.messages[-2].tool_call_id == "call_wait"
        assert after.messages[-2].content.startswith(expected_prefix)
        assert after.messages[-1].content == steer

        # Like a prompt, the interjection is not echoed to the client that sent it (other
        # clients and a replay see it as a user message of this turn); one turn only.
        user_chunks = [u for u in client.updates(sid) if u["sessionUpdate"] == "user_message_chunk"]
        assert user_chunks == []
        assert [e["turnId"] for e in events(client, sid, "turn_started")] == [turn_id]
        assert [e["turnId"] for e in events(client, sid, "turn_ended")] == [turn_id]
        assert agent_text(client.updates(sid)) == "Starting the job.Understood, looking at the logs."
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- turn_not_active


async def test_expected_turn_id_of_a_finished_turn_fails_with_turn_not_active(
    server_factory, workspace: Path
):
    inner = scripted(
        {"text": "First answer."},
        {"text": "Second answer, streamed.", "chunk_size": 4},
        {"text": "Answer to the steer."},
    )
    provider = GatedProvider(inner, hold={1})
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        first = await client.call("session/prompt", text_prompt(sid, "first question"))
        finished = first["_meta"]["agentd"]["turnId"]

        # Idle session: the finished turn is not active; nothing is queued or run.
        with pytest.raises(RpcFailed) as err:
            await client.call("_agentd/interject", interject_params(sid, "too late", finished))
        assert err.value.code == ErrorCode.TURN_NOT_ACTIVE == -32016
        assert err.value.error["data"]["reason"] == "turn_not_active"
        assert "runningTurnId" not in err.value.error["data"]

        # Another turn running: still not the expected one; the error names the running turn.
        prompt = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "second question")))
        started = await client.wait_notification(
            lambda m: is_event(sid, "turn_started")(m) and m["params"]["event"]["turnId"] != finished
        )
        running = started["params"]["event"]["turnId"]
        await provider.held(1)
        with pytest.raises(RpcFailed) as err:
            await client.call("_agentd/interject", interject_params(sid, "too late again", finished))
        assert err.value.code == -32016
        assert err.value.error["data"] == {"reason": "turn_not_active", "runningTurnId": running}

        # Naming the running turn works.
        reply = await client.call("_agentd/interject", interject_params(sid, "steer it", running))
        assert reply == {"status": "interjected", "turnId": running}
        provider.release(1)
        resp = await prompt
        assert resp["result"]["stopReason"] == "end_turn"

        # The rejected inputs never reached the model; the accepted one did.
        seen = [text for r in provider.requests for text in user_texts(r)]
        assert "too late" not in seen and "too late again" not in seen
        assert user_texts(provider.requests[-1])[-1] == "steer it"
        assert len(provider.requests) == 3
        assert len(events(client, sid, "turn_started")) == 2


# ---------------------------------------------------------------------------- idle: queued


async def test_interjection_without_a_running_turn_is_queued_and_runs_as_a_prompt(
    server_factory, workspace: Path
):
    provider = scripted({"text": "Answer to the interjection."})
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        reply = await client.call("_agentd/interject", interject_params(sid, "are you there?"))
        assert reply["status"] == "queued"
        assert "turnId" not in reply
        prompt_id = reply["promptId"]

        ended = await client.wait_notification(is_event(sid, "turn_ended", promptId=prompt_id))
        assert ended["params"]["event"]["outcome"] == "completed"
        started = events(client, sid, "turn_started")
        assert [e["promptId"] for e in started] == [prompt_id]
        assert len(provider.requests) == 1
        assert [(m.role, m.content) for m in provider.requests[0].messages] == [("user", "are you there?")]
        assert agent_text(client.updates(sid)) == "Answer to the interjection."


# ---------------------------------------------------------------------------- final answer streaming


async def test_interjection_while_the_final_answer_streams_is_answered_in_the_same_turn(
    server_factory, workspace: Path
):
    final = "Here is my final answer, streamed slowly in small pieces."
    steer = "Also mention the caveats."
    inner = scripted(
        {"text": final, "chunk_size": 4, "chunk_delay": 0.01},
        {"text": "Caveats: none worth mentioning."},
        {"text": "never sampled"},
    )
    provider = GatedProvider(inner, hold={0})
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        prompt = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "answer me")))
        started = await client.wait_notification(is_event(sid, "turn_started"))
        turn_id = started["params"]["event"]["turnId"]
        await client.wait_notification(is_update(sid, "agent_message_chunk"))
        await provider.held(0)

        reply = await client.call("_agentd/interject", interject_params(sid, steer))
        assert reply == {"status": "interjected", "turnId": turn_id}
        provider.release(0)

        resp = await prompt
        assert resp["result"]["stopReason"] == "end_turn"
        assert resp["result"]["_meta"]["agentd"]["turnId"] == turn_id

        # The loop went on: one more provider request in the same turn, carrying the whole
        # first answer and then the interjection.
        assert len(provider.requests) == 2
        assert [(m.role, m.content) for m in provider.requests[1].messages] == [
            ("user", "answer me"),
            ("assistant", final),
            ("user", steer),
        ]
        assert len(events(client, sid, "turn_started")) == 1
        assert len(events(client, sid, "turn_ended")) == 1
        assert [e["text"] for e in events(client, sid, "agent_message")] == [
            final,
            "Caveats: none worth mentioning.",
        ]
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- missed: front of queue


async def test_interjection_that_misses_its_turn_runs_next_ahead_of_queued_prompts(
    server_factory, workspace: Path
):
    # The turn ends on a final cycle stop (A B A B A B: the 6th step's calls are skipped) right
    # after the call that is held: no drain happens after it, so the interjection misses this
    # turn. (A stationarity stop would not do: its last step runs, 001.)
    a = {"name": "list_dir", "arguments": {"path": "."}}
    b = {"name": "glob", "arguments": {"pattern": "*"}}
    inner = scripted(
        *({"tool_calls": [{**step, "id": f"call_c{i}"}]} for i, step in enumerate([a, b] * 3)),
        {"text": "Answer to the interjection."},
        {"text": "Answer to the queued prompt."},
    )
    provider = GatedProvider(inner, hold={5})
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        server,
        client,
        sid,
    ):
        actor = await server.app.state.agentd.manager.get(sid)

        first = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "keep checking")))
        started = await client.wait_notification(is_event(sid, "turn_started"))
        turn_id = started["params"]["event"]["turnId"]
        await provider.held(5)

        prompt_arrived = watch_prompts(actor)
        queued = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "queued prompt")))
        await asyncio.wait_for(prompt_arrived.wait(), 15)

        reply = await client.call("_agentd/interject", interject_params(sid, "urgent steer"))
        assert reply == {"status": "interjected", "turnId": turn_id}
        provider.release(5)

        first_resp, queued_resp = await asyncio.gather(first, queued)
        assert first_resp["result"]["stopReason"] == "end_turn"
        assert first_resp["result"]["_meta"]["agentd"]["reason"] == "tool_cycle"
        assert queued_resp["result"]["stopReason"] == "end_turn"

        # Never lost, and ahead of the prompt that was queued before it.
        assert len(provider.requests) == 8
        assert user_texts(provider.requests[6])[-1] == "urgent steer"
        assert user_texts(provider.requests[7])[-1] == "queued prompt"
        assert user_texts(provider.requests[7]).index("urgent steer") < user_texts(
            provider.requests[7]
        ).index("queued prompt")
        # Three turns: the original, the interjection's, then the queued prompt's.
        started = events(client, sid, "turn_started")
        assert len(started) == 3 and started[0]["turnId"] == turn_id
        assert started[2]["promptId"] == queued_resp["result"]["_meta"]["agentd"]["promptId"]
        texts = [e["text"] for e in events(client, sid, "agent_message")]
        assert texts == ["Answer to the interjection.", "Answer to the queued prompt."]


# ---------------------------------------------------------------------------- turn data


async def test_turn_ended_counts_the_interjections(server_factory, workspace: Path):
    inner = scripted({"text": "Streaming an answer.", "chunk_size": 4}, {"text": "And the follow-up."})
    provider = GatedProvider(inner, hold={0})
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        prompt = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "answer me")))
        await provider.held(0)
        await client.call("_agentd/interject", interject_params(sid, "one more thing"))
        provider.release(0)
        resp = await prompt
        assert resp["result"]["stopReason"] == "end_turn"

        ended = events(client, sid, "turn_ended")
        assert len(ended) == 1
        assert ended[0]["turn"]["interjections"] == 1
