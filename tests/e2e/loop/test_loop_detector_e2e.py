"""Loop detection beyond stationarity over the real server (seed 003 `LoopDetector`, R-L3b).

Scripted model steps over a real WebSocket:

- an A-B-A-B-A-B cycle of steps stops the turn before the sixth step's tools run
  (`tool_cycle`);
- a file rewritten back and forth is nudged at 2 reverts and stops the turn at 4
  (`file_churn`);
- 4 failing shell commands in a row are a shell spiral: counted in the `shell_spiral` retry
  bucket (escalate the first time, exhausted the next), the turn stops and surfaces the last
  output (`shell_spiral`);
- 3 steps in a row of nothing but malformed tool calls stop the turn
  (`malformed_tool_calls`);
- an empty or filtered answer goes back to the call retry ladder (`degenerate_output`)
  instead of completing silently; exhausted, it ends readably.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentd.core.provider import ProviderRequest
from agentd.infra.config import PermissionMode
from agentd.loop.detection.sequence import CHURN_NUDGE_TEXT
from agentd.providers.openai.chat import OpenAIProvider
from tests.support.client import WsClient, agent_text, text_prompt
from tests.support.fakes import openai_server as oai
from tests.support.server import scripted
from tests.support.session import assert_valid_frames, events, served_session, shown_text

FAST_RETRY = {"retry": {"backoff_base_s": 0.01, "jitter": 0.0}}


def step(*calls: tuple[str, Any, str]) -> dict[str, Any]:
    return {"tool_calls": [{"name": n, "arguments": a, "id": i} for n, a, i in calls]}


def statuses(client: WsClient, session_id: str, call_id: str) -> list[str]:
    return [
        u["status"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] in ("tool_call", "tool_call_update")
        and u["toolCallId"] == call_id
        and "status" in u
    ]


def last_update(client: WsClient, session_id: str, call_id: str) -> dict[str, Any]:
    return [
        u
        for u in client.updates(session_id)
        if u["sessionUpdate"] in ("tool_call", "tool_call_update") and u["toolCallId"] == call_id
    ][-1]


def user_texts(request: ProviderRequest) -> list[str]:
    return [m.content for m in request.messages if m.role == "user"]


# ---------------------------------------------------------------------------- A-B-A-B cycles


async def test_an_a_b_cycle_stops_the_turn_before_the_sixth_step_runs(server_factory, workspace: Path):
    """003: "工具序列层面的 LoopDetector（窗口 12）… 序列层停住本轮工具执行并上抛最近输出" — two
    steps alternating (A-B-A-B-A-B) never trip stationarity (no two consecutive steps are
    alike) but are a loop all the same: at the third repeat the step's tools are not run and
    the turn stops (`tool_cycle`), surfacing the most recent output (the 5th step's listing)."""
    (workspace / "cycle-marker.txt").write_text("x\n")
    a = ("list_dir", {"path": "."}, "")
    b = ("glob", {"pattern": "*.txt"}, "")
    steps = [step((*(a if i % 2 else b)[:2], f"call_{i}")) for i in range(1, 7)]
    provider = scripted(*steps, {"text": "never sampled in this turn"})
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "look around"))

        assert result["stopReason"] == "end_turn"
        meta = result["_meta"]["agentd"]
        assert (meta["outcome"], meta["reason"]) == ("stationarity_ended", "tool_cycle")
        assert len(provider.requests) == 6
        for i in range(1, 6):
            assert statuses(client, sid, f"call_{i}") == ["pending", "in_progress", "completed"]
        assert statuses(client, sid, "call_6") == ["pending", "failed"]
        shown = shown_text(last_update(client, sid, "call_6"))
        assert "repeat a cycle of 2 steps" in shown
        assert "The last output was:" in shown and "cycle-marker.txt" in shown
        notices = events(client, sid, "notice")
        assert len(notices) == 1 and "cycle-marker.txt" in json.dumps(notices[0])
        ended = events(client, sid, "turn_ended")[0]
        assert ended["turn"]["nudges"] == [
            {"action": "stop", "reason": "tool_cycle", "count": 6, "cycleLength": 2}
        ]
        assert_valid_frames(client)


# ---------------------------------------------------------------------------- file churn


async def test_a_file_rewritten_back_and_forth_is_nudged_then_stopped(server_factory, workspace: Path):
    """Seed 003 is silent on file churn; octos' `LoopDetector` counts it ("FILE CHURN … Stop
    patching blindly"). Here a file whose content goes back to an earlier state is a revert:
    at 2 reverts the model is nudged, at 4 the turn stops (`file_churn`). Each step also
    globs a different pattern, so no step signature repeats (no cycle, no stationarity)."""
    contents = ["A\n", "B\n", "A\n", "B\n", "A\n", "B\n"]
    steps = [
        step(
            ("write_file", {"path": "x.txt", "content": c}, f"call_w{i}"),
            ("glob", {"pattern": f"*.{i}"}, f"call_g{i}"),
        )
        for i, c in enumerate(contents, 1)
    ]
    provider = scripted(*steps, {"text": "never sampled in this turn"})
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "fix x.txt"))

        assert result["stopReason"] == "end_turn"
        meta = result["_meta"]["agentd"]
        assert (meta["outcome"], meta["reason"]) == ("stationarity_ended", "file_churn")
        assert len(provider.requests) == 6
        # Every write ran (the stop comes after the round); the file holds the last one.
        assert (workspace / "x.txt").read_text() == "B\n"
        churn = [t for t in user_texts(provider.requests[5]) if t.startswith("[file churn]")]
        assert len(churn) == 2  # after the 4th step (2 reverts) and the 5th (3)
        assert all(t.startswith("[file churn]") for t in user_texts(provider.requests[4])[1:])
        assert "x.txt" in churn[0] and "2 times" in churn[0] and "3 times" in churn[1]
        assert CHURN_NUDGE_TEXT.startswith("[file churn]")
        assert not [t for t in user_texts(provider.requests[3]) if t.startswith("[file churn]")]
        nudges = events(client, sid, "turn_ended")[0]["turn"]["nudges"]
        assert [(n["action"], n["reason"], n["count"]) for n in nudges] == [
            ("nudge", "file_churn", 2),
            ("nudge", "file_churn", 3),
            ("stop", "file_churn", 4),
        ]
        assert nudges[-1]["path"].endswith("x.txt")
        assert any("back and forth" in n["title"] for n in events(client, sid, "notice"))


# ---------------------------------------------------------------------------- shell spirals


def failing_shell(prefix: str, n: int) -> list[dict[str, Any]]:
    return [
        step(("bash", {"command": f"echo 'build failed: attempt {i}' >&2; exit 2"}, f"{prefix}_{i}"))
        for i in range(1, n + 1)
    ]


async def test_a_shell_spiral_feeds_the_shell_spiral_bucket_and_stops_the_turn(
    server_factory, workspace: Path
):
    """003: "shell 重试的退化走专用入口 observe_shell_spiral（L284），第一次螺旋就 Escalate（停住
    shell 重试、上抛最近输出），超限则 Exhausted，计数由状态机持有" and "shell_spiral 只有 1" —
    4 failing commands in a row are a spiral: a `retry` event in the `shell_spiral` bucket
    (escalate), the turn stops (`shell_spiral`) and a notice surfaces the last output. The
    bucket is the session's: the next spiral (next prompt) is `exhausted`."""
    provider = scripted(*failing_shell("call_a", 4), *failing_shell("call_b", 4), {"text": "unused"})
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        first = await client.call("session/prompt", text_prompt(sid, "build it"))

        assert first["stopReason"] == "end_turn"
        meta = first["_meta"]["agentd"]
        assert (meta["outcome"], meta["reason"]) == ("stationarity_ended", "shell_spiral")
        assert len(provider.requests) == 4
        for i in range(1, 5):  # the commands all ran: the spiral is judged on their results
            assert statuses(client, sid, f"call_a_{i}") == ["pending", "in_progress", "completed"]
        retries = events(client, sid, "retry")
        assert [(r["bucket"], r["decision"], r["attempt"], r["limit"]) for r in retries] == [
            ("shell_spiral", "escalate", 1, 1)
        ]
        notices = [n["title"] for n in events(client, sid, "notice")]
        assert len(notices) == 1 and "build failed: attempt 4" in notices[0]

        second = await client.call("session/prompt", text_prompt(sid, "try again"))

        assert second["_meta"]["agentd"]["reason"] == "shell_spiral"
        assert len(provider.requests) == 8
        retries = events(client, sid, "retry")
        assert [(r["decision"], r["attempt"]) for r in retries] == [("escalate", 1), ("exhausted", 2)]
        assert_valid_frames(client)  # (before usage/get: its bucket names are snake_case keys)
        usage = await client.call("_agentd/usage/get", {"sessionId": sid})
        assert usage["retry"]["buckets"]["shell_spiral"]["count"] == 2


async def test_a_successful_command_breaks_the_spiral(server_factory, workspace: Path):
    provider = scripted(
        *failing_shell("call_a", 3),
        step(("bash", {"command": "echo fixed"}, "call_ok")),
        *failing_shell("call_b", 3),
        {"text": "Done."},
    )
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "build it"))

        assert result["_meta"]["agentd"]["outcome"] == "completed"
        assert agent_text(client.updates(sid)) == "Done."
        assert events(client, sid, "retry") == []


# ---------------------------------------------------------------------------- malformed calls


async def test_three_steps_of_malformed_tool_calls_stop_the_turn(server_factory, workspace: Path):
    """Seed 003 is silent on a limit (octos sends a malformed call back to the model:
    "`MalformedArgs` … non-retryable so the model can self-correct on its next turn"); here
    each malformed call still gets its error result, but 3 steps in a row of nothing else end
    the turn (`malformed_tool_calls`) instead of spinning to the iteration cap."""
    provider = scripted(
        step(("no_such_tool", {}, "call_m1")),
        step(("list_dir", "{not json", "call_m2")),
        step(("read_file", {"path": 5}, "call_m3")),
        {"text": "never sampled in this turn"},
    )
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "list files"))

        assert result["stopReason"] == "end_turn"
        meta = result["_meta"]["agentd"]
        assert (meta["outcome"], meta["reason"]) == ("stationarity_ended", "malformed_tool_calls")
        assert len(provider.requests) == 3
        for call_id in ("call_m1", "call_m2", "call_m3"):
            assert statuses(client, sid, call_id)[-1] == "failed"
        nudges = events(client, sid, "turn_ended")[0]["turn"]["nudges"]
        assert nudges == [{"action": "stop", "reason": "malformed_tool_calls", "count": 3}]
        assert any("malformed" in n["title"] for n in events(client, sid, "notice"))


# ---------------------------------------------------------------------------- empty / filtered


async def test_an_empty_answer_goes_back_to_the_retry_ladder(server_factory, workspace: Path):
    """003: "is_retriable_response（…空响应等可在调用层重试的形态）… 响应层回到调用重试梯" — an
    answer with no text, no tool call and no reasoning is not a silent empty success: the
    call is made again (a `retry` event in the `degenerate_output` bucket)."""
    provider = scripted({"text": ""}, {"text": "The real answer."})
    async with served_session(
        server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS, limits=FAST_RETRY
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "answer me"))

        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["outcome"] == "completed"
        assert len(provider.requests) == 2
        assert provider.requests[1].messages == provider.requests[0].messages
        assert agent_text(client.updates(sid)) == "The real answer."
        retries = events(client, sid, "retry")
        assert [(r["bucket"], r["decision"], r["degenerate"]["reason"]) for r in retries] == [
            ("degenerate_output", "continue", "empty_response")
        ]


async def test_a_filtered_empty_answer_is_retried_and_then_ends_as_a_refusal(server_factory, workspace: Path):
    """003 `is_retriable_response` counts a content-filtered response among the retriable
    ones: retried through the ladder; still filtered once the bucket is exhausted, the turn
    ends as a refusal with a notice — never an empty `end_turn`."""
    provider = scripted({"text": "", "stop": "refusal"}, loop=True)
    async with served_session(
        server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS, limits=FAST_RETRY
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "answer me"))

        assert result["stopReason"] == "refusal"
        assert len(provider.requests) == 4  # the first call and 3 retries
        retries = events(client, sid, "retry")
        assert [(r["decision"], r["degenerate"]["reason"]) for r in retries] == [
            ("continue", "filtered_response")
        ] * 3 + [("exhausted", "filtered_response")]
        assert any("answering nothing" in n["title"] for n in events(client, sid, "notice"))


async def test_empty_answers_end_readably_when_the_bucket_is_exhausted(server_factory, workspace: Path):
    provider = scripted({"text": ""}, loop=True)
    async with served_session(
        server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS, limits=FAST_RETRY
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "answer me"))

        meta = result["_meta"]["agentd"]
        assert (meta["outcome"], meta["reason"]) == ("stationarity_ended", "empty_response")
        assert len(provider.requests) == 4
        assert len(events(client, sid, "notice")) == 1


async def test_an_openai_content_filter_with_nothing_in_it_is_retried(server_factory, workspace: Path):
    """003 `is_retriable_response` (空响应 … content filter) over real HTTP: the OpenAI provider
    against the local fake; `finish_reason: content_filter` with no content is retried, and
    the next completion's answer completes the turn (not a silent empty refusal)."""
    async with oai.FakeOpenAI() as fake:
        fake.enqueue(
            oai.Completion(finish_reason="content_filter"), oai.Completion.from_text("Clean answer.")
        )
        provider = OpenAIProvider(base_url=fake.base_url, api_key="sk-test", model="test-model")
        async with served_session(
            server_factory, workspace, provider, model="test-model", limits=FAST_RETRY
        ) as (_, client, sid):
            result = await client.call("session/prompt", text_prompt(sid, "answer me"))

            assert result["stopReason"] == "end_turn"
            assert len(fake.requests) == 2
            assert agent_text(client.updates(sid)) == "Clean answer."
            retries = events(client, sid, "retry")
            assert [(r["bucket"], r["degenerate"]["reason"]) for r in retries] == [
                ("degenerate_output", "filtered_response")
            ]
