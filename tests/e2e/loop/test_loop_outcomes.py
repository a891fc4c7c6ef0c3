"""Terminal outcomes of the sampling/tool loop (R-L3a) and the output limit (R-L3g), over
a real WebSocket.

Each outcome leaves the loop by its own exit path and shows up three ways: the
`turn_ended` event (`outcome`, `stopReason`, `reason`), the ACP `stopReason` of the
`session/prompt` response (with the precise reason in `_meta.agentd.reason`), or — for
`Failed` — a JSON-RPC error instead of a result:

- Completed → `end_turn`; Completed with a refusal → `refusal`;
- Cancelled → `cancelled`;
- MaxTurnsReached → `max_turn_requests`, reason `max_turns_reached`, ended after the Nth
  tool round without another model request, reported (metric, turn data) as Cancelled with
  reason max_turns_reached;
- StationarityEnded (16 identical steps) → `end_turn`, reason `identical_steps`;
- Failed (a provider error) → JSON-RPC error;
- max tokens: a cut-off answer *with* text is continued twice, then the turn completes with
  `max_tokens`; an *empty* cut-off answer is nudged and retried twice, then the prompt gets
  a readable JSON-RPC error, never an empty success.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentd.core.conversation import Message
from agentd.core.provider import ProviderRequest
from agentd.loop.detection.degeneration import NUDGE_TEXT
from agentd.loop.max_tokens import CONTINUE_TEXT, EMPTY_NUDGE_TEXT
from agentd.protocol.jsonrpc import ErrorCode
from tests.support.client import WsClient, agent_text, text_prompt
from tests.support.server import scripted
from tests.support.session import (
    assert_valid_frames,
    is_update,
    new_session,
    served_session,
    the_turn_end,
)

# ---------------------------------------------------------------------------- helpers


def tool_updates(client: WsClient, session_id: str) -> list[dict[str, Any]]:
    return [u for u in client.updates(session_id) if u["sessionUpdate"] == "tool_call_update"]


def final_tool_updates(client: WsClient, session_id: str) -> dict[str, dict[str, Any]]:
    """The last completed/failed tool_call_update per tool call id (insertion = call order)."""
    out: dict[str, dict[str, Any]] = {}
    for u in tool_updates(client, session_id):
        if u.get("status") in ("completed", "failed"):
            out[u["toolCallId"]] = u
    return out


def started_tool_calls(client: WsClient, session_id: str) -> list[str]:
    """Tool call ids that actually started running (got an `in_progress` update)."""
    return [u["toolCallId"] for u in tool_updates(client, session_id) if u.get("status") == "in_progress"]


def assert_well_formed(messages: list[Message]) -> None:
    """Every assistant tool call is answered right after its message; no orphan results."""
    i = 0
    while i < len(messages):
        m = messages[i]
        assert m.role != "tool", f"tool result {m.tool_call_id} without a preceding tool call"
        i += 1
        if m.role == "assistant" and m.tool_calls:
            results = []
            while i < len(messages) and messages[i].role == "tool":
                results.append(messages[i].tool_call_id)
                i += 1
            assert results == [c.id for c in m.tool_calls], (m.tool_calls, results)


def assert_all_requests_well_formed(requests: list[ProviderRequest]) -> None:
    for request in requests:
        assert_well_formed(request.messages)


def list_dir_call(call_id: str | None = None, path: str = ".") -> dict[str, Any]:
    call: dict[str, Any] = {"name": "list_dir", "arguments": {"path": path}}
    if call_id is not None:
        call["id"] = call_id
    return call


# ---------------------------------------------------------------------------- Completed


async def test_completed_ends_with_end_turn(server_factory, workspace: Path):
    (workspace / "notes.txt").write_text("x\n")
    provider = scripted(
        {"text": "Looking around.", "tool_calls": [list_dir_call("call_ls")]},
        {"text": "There is one file, notes.txt."},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "what is here?"))

        assert result["stopReason"] == "end_turn"
        meta = result["_meta"]["agentd"]
        assert meta["outcome"] == "completed"
        assert "reason" not in meta
        ended = the_turn_end(client, sid)
        assert (ended["outcome"], ended["stopReason"], ended.get("reason")) == ("completed", "end_turn", None)
        assert ended["toolsCalled"] == 1
        assert ended["turnId"] == meta["turnId"] and ended["promptId"] == meta["promptId"]
        assert final_tool_updates(client, sid)["call_ls"]["status"] == "completed"
        assert agent_text(client.updates(sid)) == "Looking around.There is one file, notes.txt."
        assert len(provider.requests) == 2
        assert_all_requests_well_formed(provider.requests)
        assert_valid_frames(client)


async def test_refusal_completes_with_stop_reason_refusal(server_factory, workspace: Path):
    provider = scripted(
        {"text": "I can't help with that request.", "stop": "refusal"},
        {"text": "should never be sampled"},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "do something bad"))

        assert result["stopReason"] == "refusal"
        assert result["_meta"]["agentd"]["outcome"] == "completed"
        assert "reason" not in result["_meta"]["agentd"]
        ended = the_turn_end(client, sid)
        assert (ended["outcome"], ended["stopReason"], ended.get("reason")) == ("completed", "refusal", None)
        # The refusal text reached the client and the model was not asked again.
        assert agent_text(client.updates(sid)) == "I can't help with that request."
        assert len(provider.requests) == 1
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- Cancelled


async def test_cancelled_ends_with_stop_reason_cancelled(server_factory, workspace: Path):
    provider = scripted(
        # The first chunk arrives at once, the second would come 30 s later.
        {"text": "Let me think about thi", "chunk_size": 11, "chunk_delay": 30},
        {"text": "should never be sampled"},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        prompt = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "think")))
        await client.wait_notification(is_update(sid, "agent_message_chunk"))
        await client.notify("session/cancel", {"sessionId": sid})
        resp = await prompt

        assert "error" not in resp, resp
        result = resp["result"]
        assert result["stopReason"] == "cancelled"
        assert result["_meta"]["agentd"]["outcome"] == "cancelled"
        assert result["_meta"]["agentd"]["reason"] == "user_cancelled"
        ended = the_turn_end(client, sid)
        assert (ended["outcome"], ended["stopReason"], ended["reason"]) == (
            "cancelled",
            "cancelled",
            "user_cancelled",
        )
        assert agent_text(client.updates(sid)) == "Let me thin"  # the first chunk only
        assert len(provider.requests) == 1
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- MaxTurnsReached


async def test_max_turns_reached_stops_after_the_nth_round_without_sampling_again(
    server_factory, workspace: Path
):
    """001: "若配置了 max_turns，工具轮次将超过上限 → MaxTurnsReached，结束 L3，不再采样" — with
    max_turns 2 the model is asked exactly twice. 000: "MaxTurnsReached 上报时归类为 Cancelled 加
    reason:max_turns_reached 标签" — the turns metric and the turn data classify it so."""
    provider = scripted(
        {"text": "Round one.", "tool_calls": [list_dir_call("call_1")]},
        {"text": "Round two.", "tool_calls": [list_dir_call("call_2"), list_dir_call("call_2b")]},
        {"text": "I stopped at the limit."},  # the next prompt's answer
    )
    async with served_session(server_factory, workspace, provider, max_turns=2) as (server, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "keep listing"))

        assert result["stopReason"] == "max_turn_requests"
        assert result["_meta"]["agentd"]["reason"] == "max_turns_reached"
        assert result["_meta"]["agentd"]["outcome"] == "max_turns_reached"
        ended = the_turn_end(client, sid)
        assert (ended["outcome"], ended["stopReason"], ended["reason"]) == (
            "max_turns_reached",
            "max_turn_requests",
            "max_turns_reached",
        )
        assert ended["turn"]["reportedAs"] == {"outcome": "cancelled", "reason": "max_turns_reached"}
        # Exactly two tool rounds ran, and no third sample was taken.
        assert len(provider.requests) == 2
        assert ended["toolsCalled"] == 3
        assert started_tool_calls(client, sid) == ["call_1", "call_2", "call_2b"]
        finals = final_tool_updates(client, sid)
        assert [finals[c]["status"] for c in finals] == ["completed", "completed", "completed"]

        async with httpx.AsyncClient(base_url=server.base_url, timeout=10) as http:
            text = (await http.get("/metrics")).text
        turns = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        assert turns[("agentd_turns_total", (("outcome", "cancelled"),))] == 1
        assert ("agentd_turns_total", (("outcome", "max_turns_reached"),)) not in turns
        labels = (("outcome", "cancelled"), ("reason", "max_turns_reached"))
        reported = ("agentd_turns_reported_total", labels)
        assert turns[reported] == 1

        # The conversation stays well formed: the next request carries every result.
        assert (await client.call("session/prompt", text_prompt(sid, "ok")))["stopReason"] == "end_turn"
        assert len(provider.requests) == 3
        last = provider.requests[-1].messages
        assert_well_formed(last)
        assert [(m.tool_call_id, m.is_error) for m in last if m.role == "tool"] == [
            ("call_1", False),
            ("call_2", False),
            ("call_2b", False),
        ]
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- StationarityEnded


async def test_sixteen_identical_steps_end_with_stationarity(server_factory, workspace: Path):
    # One step, replayed forever: the model polls `list_dir .` and never changes approach.
    provider = scripted({"tool_calls": [list_dir_call(path=".")]}, loop=True)
    async with server_factory(provider) as server:  # max_turns unset
        assert server.settings.max_turns is None
        client = await server.client()
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "poll the directory"))

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["reason"] == "identical_steps"
        assert result["_meta"]["agentd"]["outcome"] == "stationarity_ended"
        ended = the_turn_end(client, sid)
        assert (ended["outcome"], ended["stopReason"], ended["reason"]) == (
            "stationarity_ended",
            "end_turn",
            "identical_steps",
        )
        # 16 steps were sampled and ran; the next pass's head stopped before a 17th sample.
        assert len(provider.requests) == 16
        assert ended["toolsCalled"] == 16
        finals = final_tool_updates(client, sid)
        assert len(finals) == 16
        statuses = [u["status"] for u in finals.values()]
        assert statuses == ["completed"] * 16
        assert len(started_tool_calls(client, sid)) == 16
        # The one-time nudge came after the 8th identical step, before the 9th request.
        nudges = [
            i
            for i, request in enumerate(provider.requests)
            if request.messages[-1].role == "user" and request.messages[-1].content == NUDGE_TEXT
        ]
        assert nudges == [8]
        assert_all_requests_well_formed(provider.requests)
        assert_valid_frames(client)
        await client.close()


# ---------------------------------------------------------------------------- Failed


async def test_failed_turn_answers_the_prompt_with_a_json_rpc_error(server_factory, workspace: Path):
    provider = scripted(
        {"error": {"kind": "invalid_request", "message": "invalid tool schema", "status": 400}},
        {"text": "back again"},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        resp = await client.request("session/prompt", text_prompt(sid, "hello"))

        assert "result" not in resp, resp
        err = resp["error"]
        assert err["code"] == ErrorCode.TURN_FAILED
        assert "invalid tool schema" in err["message"]
        assert err["data"]["kind"] == "invalid_request"
        assert err["data"]["outcome"] == "failed"
        assert err["data"]["reason"] == "invalid_request"
        ended = the_turn_end(client, sid)
        assert ended["outcome"] == "failed"
        assert ended["reason"] == "invalid_request"
        assert ended["error"] == {"kind": "invalid_request", "message": "invalid tool schema"}
        assert ended["turnId"] == err["data"]["turnId"]
        assert len(provider.requests) == 1

        # The session is still usable.
        assert (await client.call("session/prompt", text_prompt(sid, "again")))["stopReason"] == "end_turn"
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- max tokens (R-L3g)


async def test_cut_off_answer_is_continued_twice_then_completes_with_max_tokens(
    server_factory, workspace: Path
):
    provider = scripted(
        {"text": "Part one, ", "stop": "max_tokens"},
        {"text": "part two, ", "stop": "max_tokens"},
        {"text": "part three", "stop": "max_tokens"},
        {"text": "should never be sampled"},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "write a long essay"))

        assert result["stopReason"] == "max_tokens"
        assert result["_meta"]["agentd"]["outcome"] == "completed"
        ended = the_turn_end(client, sid)
        assert (ended["outcome"], ended["stopReason"], ended.get("reason")) == (
            "completed",
            "max_tokens",
            None,
        )
        assert agent_text(client.updates(sid)) == "Part one, part two, part three"

        # Two continuations, each visible to the model as a user message after its cut-off text.
        assert len(provider.requests) == 3
        assert "Continue exactly where you stopped" in CONTINUE_TEXT
        for request, cut_text in zip(provider.requests[1:], ["Part one, ", "part two, "], strict=True):
            assert [(m.role, m.content) for m in request.messages[-2:]] == [
                ("assistant", cut_text),
                ("user", CONTINUE_TEXT),
            ]
        assert [m.content for m in provider.requests[2].messages if m.role == "user"] == [
            "write a long essay",
            CONTINUE_TEXT,
            CONTINUE_TEXT,
        ]
        assert_valid_frames(client)


async def test_empty_cut_off_answer_is_retried_twice_then_fails_readably(server_factory, workspace: Path):
    empty = {"reasoning": "Let me think about this very carefully...", "stop": "max_tokens"}
    provider = scripted(empty, empty, empty, {"text": "should never be sampled"}, {"text": "recovered"})
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        resp = await client.request("session/prompt", text_prompt(sid, "answer briefly"))

        # Never an empty success: a JSON-RPC error with a message a person can act on.
        assert "result" not in resp, resp
        err = resp["error"]
        assert err["code"] == ErrorCode.TURN_FAILED
        assert "output limit" in err["message"]
        assert "3 times in a row" in err["message"]
        assert err["data"]["reason"] == "empty_max_tokens"
        assert err["data"]["outcome"] == "failed"
        ended = the_turn_end(client, sid)
        assert ended["outcome"] == "failed"
        assert ended["reason"] == "empty_max_tokens"
        assert "output limit" in ended["error"]["message"]
        assert agent_text(client.updates(sid)) == ""

        # One try plus two nudged retries; each retry's request ends with the nudge.
        assert len(provider.requests) == 3
        for request in provider.requests[1:]:
            assert request.messages[-1].role == "user"
            assert request.messages[-1].content == EMPTY_NUDGE_TEXT
        assert [m.content for m in provider.requests[2].messages if m.role == "user"] == [
            "answer briefly",
            EMPTY_NUDGE_TEXT,
            EMPTY_NUDGE_TEXT,
        ]
        assert_valid_frames(client)


@pytest.mark.parametrize(
    ("steps", "key"),
    [
        (
            [{"text": "cut ", "stop": "max_tokens"}] * 3,
            "maxTokenContinuations",
        ),
        (
            [{"reasoning": "thinking...", "stop": "max_tokens"}] * 3,
            "emptyRetries",
        ),
    ],
    ids=["continuations", "empty_retries"],
)
async def test_turn_ended_event_records_max_tokens_counters(
    server_factory, workspace: Path, steps: list[dict[str, Any]], key: str
):
    provider = scripted(*steps)
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        await client.request("session/prompt", text_prompt(sid, "go"))

        assert len(provider.requests) == 3
        ended = the_turn_end(client, sid)
        assert "turn" in ended, ended
        assert ended["turn"][key] == 2
        assert ended["turn"]["iterations"] == 3
