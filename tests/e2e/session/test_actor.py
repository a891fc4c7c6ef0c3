"""The session actor over a real WebSocket (R-S1, R-S2).

- prompts on one session queue and run one turn at a time, in FIFO order, and each
  `session/prompt` is answered after its own turn ended, naming its own prompt and turn;
- turns of different sessions run concurrently;
- a provider error answers its prompt with a JSON-RPC error and the session goes on;
- an unknown tool, malformed arguments or arguments failing the schema become a failed
  tool call the model reads, and the loop continues.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentd.core.conversation import Message
from agentd.core.provider import ProviderRequest, StreamEvent
from agentd.infra.config import PermissionMode
from agentd.protocol.jsonrpc import ErrorCode
from agentd.providers.scripted import ScriptedProvider
from tests.support.client import WsClient, agent_text, allow, text_prompt
from tests.support.gated import GatedProvider
from tests.support.server import scripted
from tests.support.session import assert_valid_frames, is_event, new_session, queue_of_length, served_session

# ---------------------------------------------------------------------------- helpers


def turn_events(client: WsClient, session_id: str) -> list[tuple[int, str, dict[str, Any]]]:
    """(frame index, kind, payload) of every turn_started / turn_ended of the session."""
    out = []
    for i, f in enumerate(client.frames):
        if (
            isinstance(f, dict)
            and f.get("method") == "_agentd/event"
            and f["params"]["sessionId"] == session_id
            and f["params"]["kind"] in ("turn_started", "turn_ended")
        ):
            out.append((i, f["params"]["kind"], f["params"]["event"]))
    return out


def response_index(client: WsClient, request_id: Any) -> int:
    matches = [
        i
        for i, f in enumerate(client.frames)
        if isinstance(f, dict) and "method" not in f and f.get("id") == request_id
    ]
    assert len(matches) == 1, f"expected exactly one response to request {request_id}, got {matches}"
    return matches[0]


def last_user_text(request: ProviderRequest) -> str:
    return next(m.content for m in reversed(request.messages) if m.role == "user")


class RoutedProvider:
    """Routes each call to a scripted provider chosen by the session's first user message,
    so concurrent sessions each follow their own script whatever order they call in."""

    name = "routed"
    supports_native_schema = False

    def __init__(self, routes: dict[str, ScriptedProvider]) -> None:
        self.routes = routes

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        first = next(m.content for m in request.messages if m.role == "user")
        for key, provider in self.routes.items():
            if key in first:
                return provider.stream(request)
        raise AssertionError(f"no route for prompt {first!r}")


# ---------------------------------------------------------------------------- FIFO


async def test_prompts_on_one_session_run_one_turn_at_a_time_in_fifo_order(server_factory, workspace: Path):
    # The first turn is held until the other two prompts are queued behind it.
    provider = GatedProvider(
        scripted({"text": "answer one"}, {"text": "answer two"}, {"text": "answer three"}), hold={0}
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        # Tasks start (and send their frame) in creation order: the send order is 1, 2, 3.
        tasks = [
            asyncio.create_task(client.request("session/prompt", text_prompt(sid, f"prompt number {n}")))
            for n in (1, 2, 3)
        ]
        await provider.held(0)
        await client.wait_notification(queue_of_length(sid, 2))
        provider.release(0)
        responses = await asyncio.gather(*tasks)

        for resp in responses:
            assert "error" not in resp, resp
            assert resp["result"]["stopReason"] == "end_turn"

        # The provider saw the prompts one after the other, in the order they were sent.
        assert [last_user_text(r) for r in provider.requests] == [
            "prompt number 1",
            "prompt number 2",
            "prompt number 3",
        ]
        # Each later turn's request carries the earlier turns complete: no overlap.
        assert [m.role for m in provider.requests[2].messages] == [
            "user", "assistant", "user", "assistant", "user",
        ]  # fmt: skip

        # Turns never overlap: started/ended strictly alternate, each end matching its start.
        events = turn_events(client, sid)
        assert [kind for _, kind, _ in events] == ["turn_started", "turn_ended"] * 3
        turns = []
        for (i_start, _, started), (i_end, _, ended) in zip(events[::2], events[1::2], strict=True):
            assert ended["turnId"] == started["turnId"]
            assert ended["promptId"] == started["promptId"]
            assert ended["outcome"] == "completed" and ended["stopReason"] == "end_turn"
            turns.append((i_start, i_end, started))
        assert len({t[2]["turnId"] for t in turns}) == 3
        assert len({t[2]["promptId"] for t in turns}) == 3

        # Each response comes after its own turn ended and names its own prompt and turn.
        for resp, (_i_start, i_end, started) in zip(responses, turns, strict=True):
            meta = resp["result"]["_meta"]["agentd"]
            assert meta["promptId"] == started["promptId"]
            assert meta["turnId"] == started["turnId"]
            assert response_index(client, resp["id"]) > i_end

        # And each turn streamed its own answer.
        texts = [
            f["params"]["event"]["text"]
            for f in client.frames
            if isinstance(f, dict)
            and f.get("method") == "_agentd/event"
            and f["params"]["kind"] == "agent_message"
        ]
        assert texts == ["answer one", "answer two", "answer three"]
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- concurrency


async def test_turns_of_different_sessions_run_concurrently(server_factory, workspace: Path):
    slow = scripted({"text": "alpha finally answers", "delay": 60}, {"text": "alpha again"})
    fast = scripted({"text": "beta answers at once"})
    provider = RoutedProvider({"alpha": slow, "beta": fast})
    async with server_factory(provider) as server:
        client = await server.client()
        sid_a = await new_session(client, workspace)
        sid_b = await new_session(client, workspace)

        prompt_a = asyncio.create_task(client.request("session/prompt", text_prompt(sid_a, "alpha task")))
        await client.wait_notification(is_event(sid_a, "turn_started"))

        # A's turn is stuck in a 60 s model call; B's turn runs to its end meanwhile.
        result_b = await client.call("session/prompt", text_prompt(sid_b, "beta task"))
        assert result_b["stopReason"] == "end_turn"
        assert agent_text(client.updates(sid_b)) == "beta answers at once"
        assert not prompt_a.done()
        assert [k for _, k, _ in turn_events(client, sid_a)] == ["turn_started"]

        # End A's turn now (instead of waiting a minute); its turn_ended comes after B's.
        await client.notify("session/cancel", {"sessionId": sid_a})
        resp_a = await prompt_a
        assert resp_a["result"]["stopReason"] == "cancelled"
        ended_a = [i for i, k, _ in turn_events(client, sid_a) if k == "turn_ended"]
        ended_b = [i for i, k, _ in turn_events(client, sid_b) if k == "turn_ended"]
        assert len(ended_a) == 1 and len(ended_b) == 1
        assert ended_b[0] < ended_a[0]

        # Each session saw only its own conversation.
        assert [last_user_text(r) for r in slow.requests] == ["alpha task"]
        assert [last_user_text(r) for r in fast.requests] == ["beta task"]
        assert_valid_frames(client)
        await client.close()


# ---------------------------------------------------------------------------- provider error


async def test_provider_error_answers_the_prompt_with_an_error_and_the_session_goes_on(
    server_factory, workspace: Path
):
    provider = scripted(
        {"error": {"kind": "invalid_request", "message": "invalid tool schema", "status": 400}},
        {"text": "working again"},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        resp = await client.request("session/prompt", text_prompt(sid, "first try"))
        assert "result" not in resp
        err = resp["error"]
        assert err["code"] == ErrorCode.TURN_FAILED
        assert "invalid tool schema" in err["message"]
        assert err["data"]["kind"] == "invalid_request"
        failed_turn = [e for _, k, e in turn_events(client, sid) if k == "turn_ended"]
        assert len(failed_turn) == 1
        assert failed_turn[0]["outcome"] == "failed"
        assert failed_turn[0]["error"]["kind"] == "invalid_request"
        assert err["data"]["promptId"] == failed_turn[0]["promptId"]
        assert err["data"]["turnId"] == failed_turn[0]["turnId"]
        assert response_index(client, resp["id"]) > [i for i, k, _ in turn_events(client, sid)][-1]

        # Not retried (an invalid request fails the same way again), and the next prompt works.
        assert len(provider.requests) == 1
        result = await client.call("session/prompt", text_prompt(sid, "second try"))
        assert result["stopReason"] == "end_turn"
        assert agent_text(client.updates(sid)) == "working again"
        assert len(provider.requests) == 2
        assert [(m.role, m.content) for m in provider.requests[1].messages] == [
            ("user", "first try"),
            ("user", "second try"),
        ]
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- bad tool calls


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        pytest.param(
            {"name": "launch_rocket", "arguments": {"target": "moon"}},
            ["Unknown tool 'launch_rocket'", "read_file", "write_file", "bash"],
            id="unknown-tool",
        ),
        pytest.param(
            {"name": "read_file", "arguments": '{"path": "notes.txt'},
            ["Arguments are not valid JSON"],
            id="invalid-json",
        ),
        pytest.param(
            {"name": "write_file", "arguments": {"path": "notes.txt"}},
            ["Invalid arguments for write_file", "'content' is a required property"],
            id="schema-missing-field",
        ),
        pytest.param(
            {"name": "read_file", "arguments": {"path": 42}},
            ["Invalid arguments for read_file (path)", "42 is not of type 'string'"],
            id="schema-wrong-type",
        ),
    ],
)
async def test_bad_tool_call_fails_readably_and_the_loop_continues(
    server_factory, workspace: Path, call: dict[str, Any], expected: list[str]
):
    provider = scripted(
        {"text": "Let me try.", "tool_calls": [{**call, "id": "call_bad"}]},
        {"text": "That did not work; here is my answer anyway."},
    )
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        client = await server.client()
        client.on_request = allow()
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "do the thing"))

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["outcome"] == "completed"
        assert client.server_requests == []  # nothing to approve: the call never got that far
        updates = client.updates(sid)
        announced = [u for u in updates if u["sessionUpdate"] == "tool_call"]
        assert [u["toolCallId"] for u in announced] == ["call_bad"]
        finals = [u for u in updates if u["sessionUpdate"] == "tool_call_update"]
        assert [u["status"] for u in finals] == ["failed"]  # no in_progress: it never ran
        shown = " ".join(c["content"]["text"] for c in finals[0]["content"] if c["type"] == "content")
        for fragment in expected:
            assert fragment in shown
        assert not (workspace / "notes.txt").exists()

        # The model got the error as the tool result and answered in its next step.
        assert len(provider.requests) == 2
        tool_msgs: list[Message] = [m for m in provider.requests[1].messages if m.role == "tool"]
        assert len(tool_msgs) == 1
        assert tool_msgs[0].tool_call_id == "call_bad" and tool_msgs[0].is_error
        for fragment in expected:
            assert fragment in tool_msgs[0].content
        assert agent_text(updates) == "Let me try.That did not work; here is my answer anyway."
        assert_valid_frames(client)
        await client.close()
