"""The approval phase's circuit breaker (R-T1) for each failure of the user's will, over a
real WebSocket with the scripted provider.

One model step asks for three writes (`a`, `b`, `c`); each needs permission. `a` is
allowed; at `b` the user's will breaks the step — a permission rejection, a cancel of the
permission dialog, or an interjection (new user input sent while `a` was being asked).
In all three cases `a` (approved before the break point) still runs and its result is
written back, `b` and `c` never run and say why, and the turn ends `Cancelled` with the
reason of the breaker; no further sampling happens in that turn.

The seed (000, the serial approval phase): "一旦出现权限拒绝、用户取消或插话（interjection——
用户在 agent 运行中追加的新指令），后续调用不再执行，只回填"因先前取消而取消"的 tool_result
…其二，熔断只斩"后续"，拒绝点之前已批准的调用仍会进入并行阶段执行完毕并回填结果，turn 才以
Cancelled 收尾。"
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.core.conversation import Message
from agentd.infra.config import PermissionMode
from agentd.loop.react.approval import INTERJECTED_TEXT
from agentd.providers.scripted import ScriptedProvider
from tests.support.client import RequestHandler, WsClient, text_prompt
from tests.support.polling import until
from tests.support.server import scripted
from tests.support.session import (
    assert_valid_frames,
    events,
    final_tool_updates,
    new_session,
    shown_text,
    tool_call,
)

INTERJECTION = "Stop: use d.txt instead of b.txt."


def three_writes() -> ScriptedProvider:
    return scripted(
        {
            "tool_calls": [
                tool_call("write_file", "call_a", path="a.txt", content="a"),
                tool_call("write_file", "call_b", path="b.txt", content="b"),
                tool_call("write_file", "call_c", path="c.txt", content="c"),
            ]
        },
        {"text": "Next turn's answer."},
    )


def asked(client: WsClient) -> list[str]:
    return [r["params"]["toolCall"]["toolCallId"] for r in client.server_requests]


def selected(option: str) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option}}


def tool_results(messages: list[Message]) -> dict[str, Message]:
    return {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id is not None}


def assert_broken_at_b(client: WsClient, sid: str, workspace: Path, later_text: str) -> dict[str, Any]:
    """`a` ran to completion; `b` and `c` never ran; returns the final updates per call."""
    assert asked(client) == ["call_a", "call_b"]  # serial approval: c was never asked about
    assert (workspace / "a.txt").read_text() == "a"
    assert not (workspace / "b.txt").exists()
    assert not (workspace / "c.txt").exists()
    finals = final_tool_updates(client, sid)
    assert [finals[c]["status"] for c in ("call_a", "call_b", "call_c")] == ["completed", "failed", "failed"]
    assert later_text in shown_text(finals["call_c"])
    ended = events(client, sid, "turn_ended")
    assert ended[0]["toolsCalled"] == 1
    return finals


def assert_results_written_back(messages: list[Message], later_text: str) -> None:
    """The next request carries every call's result: `a`'s success, the others' refusal."""
    results = tool_results(messages)
    assert list(results) == ["call_a", "call_b", "call_c"]
    assert not results["call_a"].is_error
    assert results["call_b"].is_error and results["call_c"].is_error
    assert later_text in results["call_c"].content


async def test_a_permission_rejection_breaks_the_step_and_ends_the_turn_cancelled(
    server_factory, workspace: Path
):
    """000: "一旦出现权限拒绝…后续调用不再执行…拒绝点之前已批准的调用仍会进入并行阶段执行完毕并
    回填结果，turn 才以 Cancelled 收尾" — the breaker for a permission rejection."""
    provider = three_writes()
    answers = {"call_a": selected("allow_once"), "call_b": selected("reject_once")}
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        client = await server.client()
        client.on_request = by_call(answers)
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "write a, b and c"))

        assert result["stopReason"] == "cancelled"
        assert result["_meta"]["agentd"]["reason"] == "permission_rejected"
        later = "cancelled because an earlier tool call in this step was rejected"
        finals = assert_broken_at_b(client, sid, workspace, later)
        assert "rejected by the user" in shown_text(finals["call_b"])
        assert len(provider.requests) == 1  # no sampling after the break in that turn

        follow_up = await client.call("session/prompt", text_prompt(sid, "go on"))
        assert follow_up["stopReason"] == "end_turn"
        assert_results_written_back(provider.requests[1].messages, later)
        assert_valid_frames(client)
        await client.close()


async def test_a_cancelled_permission_dialog_breaks_the_step_and_ends_the_turn_cancelled(
    server_factory, workspace: Path
):
    """000: "一旦出现…用户取消…后续调用不再执行…拒绝点之前已批准的调用仍会进入并行阶段执行完毕并
    回填结果，turn 才以 Cancelled 收尾" — the user cancels the dialog of `b` (outcome
    `cancelled`, no `session/cancel`): `a`, approved before, still runs to completion."""
    provider = three_writes()
    answers = {"call_a": selected("allow_once"), "call_b": {"outcome": {"outcome": "cancelled"}}}
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        client = await server.client()
        client.on_request = by_call(answers)
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "write a, b and c"))

        assert result["stopReason"] == "cancelled"
        assert result["_meta"]["agentd"]["reason"] == "user_cancelled"
        later = "cancelled because an earlier tool call in this step was cancelled"
        finals = assert_broken_at_b(client, sid, workspace, later)
        assert "Cancelled by the user while waiting for permission" in shown_text(finals["call_b"])
        assert len(provider.requests) == 1

        follow_up = await client.call("session/prompt", text_prompt(sid, "go on"))
        assert follow_up["stopReason"] == "end_turn"
        assert_results_written_back(provider.requests[1].messages, later)
        assert_valid_frames(client)
        await client.close()


async def test_an_interjection_during_approval_breaks_the_step_and_ends_the_turn_cancelled(
    server_factory, workspace: Path
):
    """000: "一旦出现权限拒绝、用户取消或插话（interjection——用户在 agent 运行中追加的新指令），
    后续调用不再执行…拒绝点之前已批准的调用仍会进入并行阶段执行完毕并回填结果，turn 才以
    Cancelled 收尾" — new user input arriving during the approval phase is a breaker too: the
    turn ends `Cancelled` (reason `interjected`) instead of sampling on, and the input is not
    lost: it runs next, as the following prompt (R-S4)."""
    provider = three_writes()

    async def interject_then_allow(msg: dict[str, Any]) -> dict[str, Any]:
        if msg["params"]["toolCall"]["toolCallId"] == "call_a":
            # The user types new instructions while `a` is being asked about; the server has
            # taken the interjection (its answer came back) before `a` is allowed.
            params = {
                "sessionId": msg["params"]["sessionId"],
                "prompt": [{"type": "text", "text": INTERJECTION}],
            }
            answer = await client.call("_agentd/interject", params)
            assert answer["status"] == "interjected"
            return selected("allow_once")
        return selected("allow_once")  # never reached: the breaker stops approval at b

    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        client = await server.client()
        client.on_request = interject_then_allow
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "write a, b and c"))

        assert result["stopReason"] == "cancelled"
        assert result["_meta"]["agentd"]["outcome"] == "cancelled"
        assert result["_meta"]["agentd"]["reason"] == "interjected"
        assert asked(client) == ["call_a"]  # b was never asked about: the input came first
        assert (workspace / "a.txt").read_text() == "a"
        assert not (workspace / "b.txt").exists()
        assert not (workspace / "c.txt").exists()
        finals = final_tool_updates(client, sid)
        assert [finals[c]["status"] for c in ("call_a", "call_b", "call_c")] == [
            "completed",
            "failed",
            "failed",
        ]
        assert INTERJECTED_TEXT in shown_text(finals["call_b"])
        assert INTERJECTED_TEXT in shown_text(finals["call_c"])

        # The interjection missed its turn, so it runs as the next prompt: a second turn
        # whose request carries every result of the broken step, then the new input.
        await until(lambda: len(events(client, sid, "turn_ended")) == 2)
        ended = events(client, sid, "turn_ended")
        assert [(e["outcome"], e.get("reason")) for e in ended] == [
            ("cancelled", "interjected"),
            ("completed", None),
        ]
        assert ended[0]["toolsCalled"] == 1
        assert len(provider.requests) == 2
        second = provider.requests[1].messages
        assert_results_written_back(second, INTERJECTED_TEXT)
        assert (second[-1].role, second[-1].content) == ("user", INTERJECTION)
        assert_valid_frames(client)
        await client.close()


def by_call(answers: dict[str, dict[str, Any]]) -> RequestHandler:
    async def handler(msg: dict[str, Any]) -> dict[str, Any]:
        return answers[msg["params"]["toolCall"]["toolCallId"]]

    return handler
