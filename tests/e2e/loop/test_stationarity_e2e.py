"""Stationarity and degeneration detection over the real server (R-L3b).

Driven by scripted model steps over a real WebSocket:

- 8 identical consecutive steps (same tool call, same raw arguments): a "stop polling"
  nudge is written after the 8th step's tool results, so the 9th request carries it; each
  new streak earns its own nudge;
- 16 identical steps: the 16th step runs, then the turn ends at the head of the next pass
  (stopReason `end_turn`, `_meta.agentd.reason == "identical_steps"`) before sampling again —
  16 requests, 16 runs; the stop is final;
- true no-op steps (`bash` running exactly `true`, whatever its other arguments) share one
  signature and stop at 4 (`noop_steps`): the 4th runs, the next pass's head stops;
- a different step in between resets the count, and so does a step without tool calls;
- the count belongs to one L3 run: a stop-hook, goal or completion-recovery re-entry starts
  at 0 (7 + 9 identical steps across a re-entry never stop);
- no progress: the same call returning the same result 3 times in a row gets a
  "[no progress]" note on the 3rd result the model sees;
- repetitive text: a stream whose 20-char tail keeps occurring is cut and goes back to
  the call retry ladder (a `retry` event in the `degenerate_output` bucket): its text is
  replaced and kept out of the conversation, and the call is sampled again; when the
  bucket is exhausted the answer is accepted as it is;
- what the turn went through (nudges, stops) is data on the `turn_ended` event.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentd.core.conversation import Message
from agentd.core.provider import ProviderRequest
from agentd.infra.config import PermissionMode
from agentd.loop.detection.degeneration import NO_PROGRESS_NOTE, NUDGE_TEXT
from agentd.loop.react.recovery import DEGENERATE_TEXT
from tests.support.client import WsClient, agent_text, text_prompt
from tests.support.server import scripted
from tests.support.session import assert_valid_frames, events, new_session, served_session

# ---------------------------------------------------------------------------- helpers


def tool_updates(client: WsClient, session_id: str, call_id: str) -> list[dict[str, Any]]:
    """Every `tool_call` / `tool_call_update` of one call, in order."""
    return [
        u
        for u in client.updates(session_id)
        if u["sessionUpdate"] in ("tool_call", "tool_call_update") and u["toolCallId"] == call_id
    ]


def statuses(client: WsClient, session_id: str, call_id: str) -> list[str]:
    return [u["status"] for u in tool_updates(client, session_id, call_id) if "status" in u]


def nudges_in(request: ProviderRequest) -> list[int]:
    """Indices of the stationarity nudge among the request's messages."""
    return [i for i, m in enumerate(request.messages) if m.role == "user" and m.content == NUDGE_TEXT]


def tool_result(request: ProviderRequest, call_id: str) -> Message:
    found = [m for m in request.messages if m.role == "tool" and m.tool_call_id == call_id]
    assert len(found) == 1, f"expected one tool result for {call_id}, got {found}"
    return found[0]


def last_user_text(request: ProviderRequest) -> str:
    return next(m.content for m in reversed(request.messages) if m.role == "user")


def step(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    """One model step with a single tool call."""
    return {"tool_calls": [{"name": name, "arguments": arguments, "id": call_id}]}


def list_steps(n: int, *, first: int = 1, prefix: str = "call_ls") -> list[dict[str, Any]]:
    """`n` identical steps (same tool, same raw arguments); only the call ids differ."""
    return [step("list_dir", {"path": "."}, f"{prefix}_{i}") for i in range(first, first + n)]


NOOP_A = {"command": "true", "timeout": 5}
NOOP_B = {"command": "true"}


# ---------------------------------------------------------------------------- nudge at 8


async def test_eight_identical_steps_get_one_nudge_after_the_eighth_steps_results(
    server_factory, workspace: Path
):
    (workspace / "notes.txt").write_text("hello\n")
    provider = scripted(*list_steps(8), {"text": "I will stop polling and change my approach."})
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "watch the directory"))

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["outcome"] == "completed"
        assert len(provider.requests) == 9
        # Requests 1..8 carry no nudge; the 9th (after the 8th step) carries exactly one.
        for request in provider.requests[:8]:
            assert nudges_in(request) == []
        request = provider.requests[8]
        assert len(nudges_in(request)) == 1
        assert "stop polling" in NUDGE_TEXT
        # It comes after the 8th step's tool result, as the last message before sampling.
        nudge_at = nudges_in(request)[0]
        result_at = request.messages.index(tool_result(request, "call_ls_8"))
        assert result_at < nudge_at == len(request.messages) - 1
        # Every one of the 8 calls really ran (a nudge never skips calls).
        for i in range(1, 9):
            assert statuses(client, sid, f"call_ls_{i}") == ["pending", "in_progress", "completed"]
            assert not tool_result(request, f"call_ls_{i}").is_error
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- stop at 16


async def test_sixteen_identical_steps_run_and_the_turn_stops_at_the_next_pass_head(
    server_factory, workspace: Path
):
    """001: "每一圈大致顺序 {1. 动作停滞硬停检查 …}", "圈头：若同一 tool+参数已连打满 16 次 → … 整
    turn 停", and on the tool path "做 动作停滞 统计 … 执行工具" — the 16th identical call runs;
    the turn stops at the head of the next pass, before sampling again (16 requests, 16 runs)."""
    provider = scripted(*list_steps(16), {"text": "answer to the next prompt"})
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "poll until it changes"))

        assert result["stopReason"] == "end_turn"
        meta = result["_meta"]["agentd"]
        assert meta["reason"] == "identical_steps"
        assert meta["outcome"] == "stationarity_ended"
        ended = events(client, sid, "turn_ended")
        assert len(ended) == 1
        assert ended[0]["outcome"] == "stationarity_ended" and ended[0]["reason"] == "identical_steps"
        assert ended[0]["toolsCalled"] == 16
        assert ended[0]["turn"]["nudges"][-1] == {"action": "stop", "reason": "identical_steps", "count": 16}

        # The stop is taken before sampling again: exactly 16 model requests, never a 17th.
        assert len(provider.requests) == 16
        assert len(nudges_in(provider.requests[8])) == 1
        assert len(nudges_in(provider.requests[15])) == 1

        # All 16 steps ran, the 16th included.
        for i in range(1, 17):
            assert statuses(client, sid, f"call_ls_{i}") == ["pending", "in_progress", "completed"]

        # Nothing reopens it later: the next prompt is the very next provider call, and the
        # conversation it carries holds the 16th call's real result.
        second = await client.call("session/prompt", text_prompt(sid, "what now?"))
        assert second["stopReason"] == "end_turn"
        assert len(provider.requests) == 17
        follow_up = provider.requests[16]
        assert last_user_text(follow_up) == "what now?"
        assert not tool_result(follow_up, "call_ls_16").is_error
        assert len(events(client, sid, "turn_started")) == 2
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- no-op steps


async def test_alternating_true_commands_are_noop_steps_and_stop_at_four(server_factory, workspace: Path):
    """001: "做 动作停滞 统计 … 执行工具" then "圈头 … 整 turn 停" — the 4th consecutive no-op
    call runs; the turn stops at the next pass's head without a 5th request."""
    provider = scripted(
        step("bash", NOOP_A, "call_noop_1"),
        step("bash", NOOP_B, "call_noop_2"),
        step("bash", NOOP_A, "call_noop_3"),
        step("bash", NOOP_B, "call_noop_4"),
        {"text": "never sampled in this turn"},
    )
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "keep checking"))

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["reason"] == "noop_steps"
        assert result["_meta"]["agentd"]["outcome"] == "stationarity_ended"
        assert len(provider.requests) == 4
        for i in (1, 2, 3, 4):
            assert statuses(client, sid, f"call_noop_{i}") == ["pending", "in_progress", "completed"]
        assert events(client, sid, "turn_ended")[0]["toolsCalled"] == 4
        # No nudge before a no-op stop (the nudge threshold is 8).
        assert all(nudges_in(r) == [] for r in provider.requests)
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- reset


async def test_a_different_step_in_between_resets_the_noop_count(server_factory, workspace: Path):
    provider = scripted(
        step("bash", NOOP_A, "call_t1"),
        step("bash", NOOP_B, "call_t2"),
        step("bash", NOOP_A, "call_t3"),
        step("bash", {"command": "echo something else"}, "call_other"),
        step("bash", NOOP_B, "call_t4"),
        step("bash", NOOP_A, "call_t5"),
        step("bash", NOOP_B, "call_t6"),
        {"text": "All checks done."},
    )
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "check a few times"))

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["outcome"] == "completed"
        assert "reason" not in result["_meta"]["agentd"]
        assert len(provider.requests) == 8
        for call_id in ("call_t1", "call_t2", "call_t3", "call_other", "call_t4", "call_t5", "call_t6"):
            assert statuses(client, sid, call_id) == ["pending", "in_progress", "completed"], call_id
        assert agent_text(client.updates(sid)) == "All checks done."


async def test_a_different_step_in_between_resets_the_identical_count(server_factory, workspace: Path):
    # 7 + 1 + 7: neither streak reaches the nudge at 8.
    provider = scripted(
        *list_steps(7, prefix="call_a"),
        step("glob", {"pattern": "*.txt"}, "call_glob"),
        *list_steps(7, prefix="call_b"),
        {"text": "Done watching."},
    )
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "watch it"))

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["outcome"] == "completed"
        assert len(provider.requests) == 16
        assert all(nudges_in(r) == [] for r in provider.requests)


# ---------------------------------------------------------------------------- no progress


async def test_same_call_same_result_three_times_gets_a_no_progress_note(server_factory, workspace: Path):
    provider = scripted(
        step("bash", {"command": "echo still waiting"}, "call_p1"),
        step("bash", {"command": "echo still waiting"}, "call_p2"),
        step("bash", {"command": "echo still waiting"}, "call_p3"),
        {"text": "Nothing changes; giving up on polling."},
    )
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "wait for the job"))

        assert result["stopReason"] == "end_turn"
        assert len(provider.requests) == 4
        first = tool_result(provider.requests[1], "call_p1")
        second = tool_result(provider.requests[2], "call_p2")
        third = tool_result(provider.requests[3], "call_p3")
        assert first.content == second.content == "still waiting"
        assert "[no progress]" not in first.content and "[no progress]" not in second.content
        assert third.content.startswith("still waiting")
        assert third.content.endswith(NO_PROGRESS_NOTE)
        assert NO_PROGRESS_NOTE.startswith("[no progress]")
        # A hint, not a stop: the call ran and the loop went on.
        assert not third.is_error
        assert statuses(client, sid, "call_p3") == ["pending", "in_progress", "completed"]


# ---------------------------------------------------------------------------- repetitive text

PATTERN = "abcdefghij0123456789"  # 20 chars, all distinct
DEGENERATE = PATTERN * 30  # 600 chars


FAST_RETRY = {"retry": {"backoff_base_s": 0.01, "jitter": 0.0}}
# A loop that is not back-to-back copies: the same line behind a changing counter. The seed
# counts the trailing pattern's occurrences in the window, so this is degenerate too.
COUNTER_LOOP = "Let me check the build.\n" + "".join(
    f"[{n}] still waiting for the build to finish, checking again.\n" for n in range(12)
)


@pytest.mark.parametrize("degenerate", [DEGENERATE, COUNTER_LOOP], ids=["back-to-back", "counter-loop"])
async def test_repetitive_text_is_cut_and_the_call_is_retried(
    server_factory, workspace: Path, degenerate: str
):
    """003: "is_repetitive_output（L111，重复文本检测）… 检测命中后的动作都已类型化：响应层回到
    调用重试梯" — a repetitive response does not end the turn: as in octos, its content is
    replaced and the call goes back to the retry ladder; the next (clean) answer completes
    the turn. Its tool calls go with it: the cut response is never acted on."""
    assert len(PATTERN) == 20 and len(degenerate) > 200
    provider = scripted(
        {
            "text": degenerate,
            "tool_calls": [{"name": "write_file", "arguments": {"path": "x", "content": "x"}}],
        },
        {"text": "A clean answer."},
    )
    async with served_session(
        server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS, limits=FAST_RETRY
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "say something"))

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["outcome"] == "completed"
        assert "reason" not in result["_meta"]["agentd"]
        assert len(provider.requests) == 2
        # The same call again: the degenerate attempt is not in the conversation.
        assert provider.requests[1].messages == provider.requests[0].messages
        assert not (workspace / "x").exists()  # the cut response's tool call never ran
        assert not [u for u in client.updates(sid) if u["sessionUpdate"] == "tool_call"]

        retries = events(client, sid, "retry")
        assert [(r["decision"], r["bucket"], r["attempt"]) for r in retries] == [
            ("continue", "degenerate_output", 1)
        ]
        assert retries[0]["degenerate"]["reason"] == "repetitive_text"
        assert retries[0]["degenerate"]["repeats"] >= 4
        # The stored text of the discarded attempt is the replacement, not the loop.
        stored = events(client, sid, "agent_message")
        assert [(e["text"], e.get("discarded", False)) for e in stored] == [
            (DEGENERATE_TEXT, True),
            ("A clean answer.", False),
        ]
        ended = events(client, sid, "turn_ended")
        assert ended[0]["turn"]["nudges"][0]["reason"] == "repetitive_text"

        # The next prompt's conversation holds the clean answer only.
        second = await client.call("session/prompt", text_prompt(sid, "and again"))
        assert second["stopReason"] == "end_turn"
        assert [(m.role, m.content) for m in provider.requests[2].messages] == [
            ("user", "say something"),
            ("assistant", "A clean answer."),
            ("user", "and again"),
        ]
        assert_valid_frames(client)


async def test_repetitive_text_is_accepted_as_is_once_its_own_budget_is_spent(
    server_factory, workspace: Path
):
    """000: "采样器内的 doom-loop…检出循环即"毒化"该次尝试重新采样，预算耗尽则原样接受；各预算互不串账"
    — a repetitive response is resampled within the `degenerate_output` budget (octos'
    three retries); when that budget is spent the answer is accepted as it is and the turn
    completes with it, instead of ending. No other bucket is charged."""
    provider = scripted({"text": DEGENERATE}, loop=True)
    async with served_session(
        server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS, limits=FAST_RETRY
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "say something"))

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["outcome"] == "completed"
        assert "reason" not in result["_meta"]["agentd"]
        assert len(provider.requests) == 4
        retries = events(client, sid, "retry")
        assert [(r["decision"], r["attempt"], r["limit"]) for r in retries] == [
            ("continue", 1, 3),
            ("continue", 2, 3),
            ("continue", 3, 3),
            ("exhausted", 4, 3),
        ]
        assert {r["bucket"] for r in retries} == {"degenerate_output"}
        assert retries[-1]["degenerate"]["accepted"] is True
        stored = events(client, sid, "agent_message")
        assert [e.get("discarded", False) for e in stored] == [True, True, True, False]
        assert [e["text"] for e in stored[:3]] == [DEGENERATE_TEXT] * 3
        accepted = stored[3]["text"]
        assert accepted.startswith(PATTERN * 10) and accepted != DEGENERATE_TEXT

        # The accepted answer is in the conversation the next prompt carries, as it was.
        provider.script.steps[0] = provider.script.steps[0].model_copy(update={"text": "Fine now."})
        second = await client.call("session/prompt", text_prompt(sid, "try again"))
        assert second["stopReason"] == "end_turn"
        assert [(m.role, m.content) for m in provider.requests[-1].messages] == [
            ("user", "say something"),
            ("assistant", accepted),
            ("user", "try again"),
        ]
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- turn data


async def test_turn_ended_records_the_nudge_and_the_stop(server_factory, workspace: Path):
    provider = scripted(
        *list_steps(8),
        {"text": "Changing approach."},
        step("bash", NOOP_A, "call_n1"),
        step("bash", NOOP_B, "call_n2"),
        step("bash", NOOP_A, "call_n3"),
        step("bash", NOOP_B, "call_n4"),
    )
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        first = await client.call("session/prompt", text_prompt(sid, "watch the directory"))
        assert first["stopReason"] == "end_turn"
        second = await client.call("session/prompt", text_prompt(sid, "keep checking"))
        assert second["_meta"]["agentd"]["reason"] == "noop_steps"

        ended = events(client, sid, "turn_ended")
        assert len(ended) == 2
        assert ended[0]["turn"]["nudges"] == [{"action": "nudge", "reason": "identical_steps", "count": 8}]
        assert ended[1]["turn"]["nudges"] == [{"action": "stop", "reason": "noop_steps", "count": 4}]


# ---------------------------------------------------------------------------- per streak, per run


async def test_a_second_streak_of_eight_gets_its_own_nudge(server_factory, workspace: Path):
    """Seed 001 (动作停滞): "连续相同 tool call | 约 8 次 | 注入 nudge reminder，提示停止空转轮询"
    — every streak of 8 identical steps is nudged, not only the first one of the turn."""
    provider = scripted(
        *list_steps(8, prefix="call_a"),
        step("glob", {"pattern": "*.txt"}, "call_glob"),
        *list_steps(8, prefix="call_b"),
        {"text": "Changing approach now."},
    )
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "watch it"))

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["outcome"] == "completed"
        assert len(provider.requests) == 18
        # After the 8th step of each streak the next request carries one more nudge.
        assert [len(nudges_in(r)) for r in provider.requests] == [0] * 8 + [1] * 9 + [2]
        last = provider.requests[17]
        assert nudges_in(last)[-1] == len(last.messages) - 1
        nudge = {"action": "nudge", "reason": "identical_steps", "count": 8}
        assert events(client, sid, "turn_ended")[0]["turn"]["nudges"] == [nudge, nudge]


async def test_a_text_step_between_two_streaks_resets_the_count(server_factory, workspace: Path):
    """Seed 001: "连续相同 tool call | 16 次 | 硬停" counts *consecutive* identical calls; a step
    that answers in text (here a cut-off answer the loop continues) breaks the run, as the
    unit test `test_a_step_without_tool_calls_resets_the_count` says: 15 + text + 15 never stops."""
    provider = scripted(
        *list_steps(15, prefix="call_a"),
        {"text": "Still checking, let me", "stop": "max_tokens"},
        *list_steps(15, prefix="call_b"),
        {"text": "It never changed; stopping."},
    )
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "watch it"))

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["outcome"] == "completed"
        assert len(provider.requests) == 32
        assert statuses(client, sid, "call_b_15") == ["pending", "in_progress", "completed"]
        nudge = {"action": "nudge", "reason": "identical_steps", "count": 8}
        assert events(client, sid, "turn_ended")[0]["turn"]["nudges"] == [nudge, nudge]


async def test_a_stop_hook_reentry_starts_a_new_count(server_factory, workspace: Path):
    """Seed 001: the stationarity count belongs to one L3 run ("做动作停滞统计" among "本段"
    tool calls; "圈头：若同一 tool+参数已连打满 16 次 → … 整 turn 停"); a stop hook that keeps
    the agent working re-enters L3 ("塞 feedback 再跑"), so 7 + 9 identical steps do not stop."""
    provider = scripted(
        *list_steps(7, prefix="call_a"),
        {"text": "First answer."},
        *list_steps(9, prefix="call_b"),
        {"text": "Second answer."},
    )
    asked: list[dict[str, Any]] = []

    async def on_request(msg: dict[str, Any]) -> dict[str, Any]:
        asked.append(msg["params"])
        if len(asked) == 1:
            return {"decision": "block", "reason": "check again"}
        return {"decision": "allow"}

    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        client.on_request = on_request
        await client.call("_agentd/hooks/register", {"sessionId": sid})

        result = await client.call("session/prompt", text_prompt(sid, "watch it"))

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["outcome"] == "completed"
        assert len(asked) == 2
        assert len(provider.requests) == 18
        assert statuses(client, sid, "call_b_9") == ["pending", "in_progress", "completed"]
        # The second run's 8th step is a streak of 8 of its own: nudged.
        ended = events(client, sid, "turn_ended")[0]
        assert ended["turn"]["nudges"] == [{"action": "nudge", "reason": "identical_steps", "count": 8}]
        assert ended["turn"]["stopReentries"] == 1


async def test_a_goal_reentry_starts_a_new_count(server_factory, workspace: Path):
    """Seed 001: "goal 还 Active 且要 Continue → 塞 continuation → 再开 L2" — a new L3 run, whose
    stationarity count ("连续相同 tool call … 16 次 硬停") starts at 0: 7 + 9 steps do not stop."""

    def verdict(decision: str) -> dict[str, Any]:
        return {"text": json.dumps({"decision": decision, "evidence": "seen", "next_step": "go on"})}

    provider = scripted(
        *list_steps(7, prefix="call_a"),
        {"text": "First round."},
        verdict("continue"),
        *list_steps(9, prefix="call_b"),
        {"text": "Second round."},
        verdict("candidate_complete"),
    )
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        await client.call("_agentd/goal/set", {"sessionId": sid, "objective": "Watch the directory"})

        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["outcome"] == "completed"
        assert statuses(client, sid, "call_b_9") == ["pending", "in_progress", "completed"]
        goal = (await client.call("_agentd/goal/get", {"sessionId": sid}))["goal"]
        assert goal["status"] == "complete"


async def test_a_completion_recovery_reentry_starts_a_new_count(
    server_factory, workspace: Path, tmp_path: Path
):
    """Seed 001: completion recovery "塞 reminder、退避、再跑整段 L2" — a new L3 run whose
    stationarity count ("连续相同 tool call … 16 次 硬停") starts at 0: 7 + 9 steps do not stop."""
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "planner.toml").write_text(
        'name = "planner"\ndescription = "Plans"\ntools = ["list_dir", "todo_write"]\n'
        '[completion]\ntool = "todo_write"\nmax_retries = 2\nbase_delay_ms = 10\nmax_delay_ms = 20\n'
    )
    todos = [{"content": "watch", "status": "completed"}]
    provider = scripted(
        *list_steps(7, prefix="call_a"),
        {"text": "Forgot the plan."},
        *list_steps(9, prefix="call_b"),
        step("todo_write", {"todos": todos}, "call_plan"),
        {"text": "Planned."},
    )
    async with server_factory(provider, agents_dir=agents, permission_mode=PermissionMode.BYPASS) as server:
        client = await server.client()
        sid = await new_session(client, workspace, agent="planner")

        result = await client.call("session/prompt", text_prompt(sid, "watch it"))

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["outcome"] == "completed"
        assert statuses(client, sid, "call_b_9") == ["pending", "in_progress", "completed"]
        assert events(client, sid, "turn_ended")[0]["turn"]["completionRecoveries"] == 1
        await client.close()
