"""Goals (R-L2c) over a real WebSocket, plus the evaluator's timeout at the unit level.

A goal is set with `_agentd/goal/set`; after every normal L3 completion a *hidden*
evaluator call (no tools, the evaluator's system prompt, OBJECTIVE / PLAN / a bounded
newest-first TRANSCRIPT) returns a JSON verdict, and the turn loop acts on it:

- `continue` → a continuation user message (objective, progress, next step) is injected
  and the turn goes on; only the newest continuation stays in the conversation;
- `candidate_complete` → the optional `verify` command decides: exit 0 → `complete`,
  otherwise the gap (its output) is recorded and the work continues;
- `blocked` with the same key 3 times in a row → `paused` with the user action;
- a malformed verdict is a failed attempt; small model first, then the session model;
  both failing → `paused` (`infra`), never complete;
- token budget spent → `budget_limited` and exactly one wrap-up round;
- a refusal pauses the goal; the goal survives a server restart (SQLite and Postgres).

The scripted provider answers agent requests and evaluator requests from one step list,
in call order, so every script below interleaves agent steps and verdict steps.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentd.core import GoalState, GoalStatus
from agentd.core.conversation import Message
from agentd.core.provider import ProviderRequest
from agentd.infra.config import PermissionMode
from agentd.loop.goals.decide import CONTINUATION_TAG, GoalLimits, after_evaluation
from agentd.loop.goals.evaluator import EVALUATOR_SYSTEM, evaluate, parse_verdict
from agentd.protocol.jsonrpc import ErrorCode
from tests.support.client import RpcFailed, WsClient, agent_text, text_prompt
from tests.support.server import scripted
from tests.support.session import events, served_session, the_turn_end

SESSION_MODEL = "gpt-4o-mini"  # Settings.model's default
SMALL_MODEL = "tiny-judge"

# ---------------------------------------------------------------------------- helpers


def verdict_events(client: WsClient, session_id: str) -> list[dict[str, Any]]:
    return [e["verdictEvent"] for e in events(client, session_id, "goal") if "verdictEvent" in e]


def is_goal_event(session_id: str) -> Any:
    def predicate(msg: dict[str, Any]) -> bool:
        return (
            msg.get("method") == "_agentd/event"
            and msg["params"]["sessionId"] == session_id
            and msg["params"]["kind"] == "goal"
        )

    return predicate


def is_evaluator(request: ProviderRequest) -> bool:
    return request.system == EVALUATOR_SYSTEM


def evaluator_requests(requests: list[ProviderRequest]) -> list[ProviderRequest]:
    return [r for r in requests if is_evaluator(r)]


def agent_requests(requests: list[ProviderRequest]) -> list[ProviderRequest]:
    return [r for r in requests if not is_evaluator(r)]


def kinds(requests: list[ProviderRequest]) -> list[str]:
    """The call sequence as `agent` / `eval`, to check the interleaving."""
    return ["eval" if is_evaluator(r) else "agent" for r in requests]


def verdict(decision: str, evidence: str, next_step: str, blocker_key: str | None = None) -> dict[str, Any]:
    """A scripted evaluator step answering with a verdict."""
    data: dict[str, Any] = {"decision": decision, "evidence": evidence, "next_step": next_step}
    if blocker_key is not None:
        data["blocker_key"] = blocker_key
    return {"text": json.dumps(data)}


def continuations(request: ProviderRequest) -> list[Message]:
    return [m for m in request.messages if m.tag == CONTINUATION_TAG]


def last_user(request: ProviderRequest) -> str:
    return next(m.content for m in reversed(request.messages) if m.role == "user")


def evaluator_body(request: ProviderRequest) -> str:
    assert len(request.messages) == 1 and request.messages[0].role == "user"
    return request.messages[0].content


def transcript_of(body: str) -> str:
    head = "TRANSCRIPT (newest first, untrusted):\n<<<\n"
    assert head in body and body.endswith("\n>>>"), body[-300:]
    return body.split(head, 1)[1].removesuffix("\n>>>")


async def set_goal(client: WsClient, session_id: str, objective: str, **extra: Any) -> dict[str, Any]:
    result = await client.call("_agentd/goal/set", {"sessionId": session_id, "objective": objective, **extra})
    return result["goal"]


async def get_goal(client: WsClient, session_id: str) -> dict[str, Any]:
    return await client.call("_agentd/goal/get", {"sessionId": session_id})


def write_call(path: str, content: str, call_id: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": path, "content": content}, "id": call_id}


# ---------------------------------------------------------------------------- set / get / clear


async def test_set_get_clear_over_rpc_with_goal_events(server_factory, workspace: Path):
    async with served_session(server_factory, workspace, scripted()) as (_, client, sid):
        assert await get_goal(client, sid) == {}  # no goal yet

        goal = await set_goal(client, sid, "Ship the parser", tokenBudget=5000, verify="make test")
        assert goal == {
            "objective": "Ship the parser",
            "status": "active",
            "tokensUsed": 0,
            "rounds": 0,
            "blockedCount": 0,
            "gaps": [],
            "verifyFailures": 0,
            "tokenBudget": 5000,
            "verify": "make test",
        }
        event = await client.wait_notification(is_goal_event(sid))
        assert event["params"]["event"] == goal
        assert await get_goal(client, sid) == {"goal": goal}

        # A new set replaces the goal (optional fields are optional).
        replaced = await set_goal(client, sid, "Only the lexer")
        assert replaced["objective"] == "Only the lexer" and replaced["status"] == "active"
        assert "tokenBudget" not in replaced and "verify" not in replaced
        assert (await client.wait_notification(is_goal_event(sid)))["params"]["event"] == replaced

        cleared = await client.call("_agentd/goal/clear", {"sessionId": sid})
        assert cleared == {"cleared": replaced}
        event = await client.wait_notification(is_goal_event(sid))
        assert event["params"]["event"] == {"status": "cleared"}
        assert await get_goal(client, sid) == {}
        # Clearing nothing is fine and says so.
        assert await client.call("_agentd/goal/clear", {"sessionId": sid}) == {}


@pytest.mark.parametrize(
    "params",
    [
        {"objective": ""},
        {"objective": "x", "tokenBudget": 0},
        {"objective": "x", "tokenBudget": -5},
        {"objective": "x", "verify": ""},
        {},
    ],
    ids=["empty-objective", "budget-zero", "budget-negative", "empty-verify", "no-objective"],
)
async def test_goal_set_rejects_bad_params(server_factory, workspace: Path, params: dict[str, Any]):
    async with served_session(server_factory, workspace, scripted()) as (_, client, sid):
        with pytest.raises(RpcFailed) as err:
            await client.call("_agentd/goal/set", {"sessionId": sid, **params})

        assert err.value.code == ErrorCode.INVALID_PARAMS == -32602
        assert await get_goal(client, sid) == {}  # nothing was set
        assert events(client, sid, "goal") == []


async def test_goal_methods_on_an_unknown_session_are_not_found(server_factory):
    async with server_factory(scripted()) as server:
        client = await server.client()
        for method, extra in (
            ("_agentd/goal/set", {"objective": "x"}),
            ("_agentd/goal/get", {}),
            ("_agentd/goal/clear", {}),
        ):
            with pytest.raises(RpcFailed) as err:
                await client.call(method, {"sessionId": "sess_nope", **extra})
            assert err.value.code == ErrorCode.RESOURCE_NOT_FOUND, method
        await client.close()


# ---------------------------------------------------------------------------- the hidden evaluator


async def test_evaluator_call_is_hidden_tool_less_and_sees_objective_plan_and_bounded_transcript(
    server_factory, workspace: Path
):
    # A 6 KiB file, read 10 times in one step: 10 tool results over the 4 KiB item limit,
    # together over the 32 KiB transcript limit.
    (workspace / "big.txt").write_text("".join(f"line {i:04d} " + "z" * 50 + "\n" for i in range(100)))
    reads = [{"name": "read_file", "arguments": {"path": "big.txt"}, "id": f"call_r{i}"} for i in range(10)]
    provider = scripted(
        {"text": "PROMPT-ECHO reading the file ten times.", "tool_calls": reads},
        {"text": "FINAL-MARKER all read."},
        verdict("candidate_complete", "SECRET-EVIDENCE the file was read", "nothing left"),
        {"text": "should never be sampled"},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        await set_goal(client, sid, "Read big.txt thoroughly")

        result = await client.call("session/prompt", text_prompt(sid, "OLDEST-PROMPT please read big.txt"))

        assert result["stopReason"] == "end_turn"
        assert kinds(provider.requests) == ["agent", "agent", "eval"]
        agent_tools = {t.name for t in provider.requests[0].tools}
        assert "read_file" in agent_tools

        (request,) = evaluator_requests(provider.requests)
        assert request.tools == []
        assert request.system == EVALUATOR_SYSTEM
        assert request.model == SESSION_MODEL  # no small model configured
        body = evaluator_body(request)
        assert body.startswith("OBJECTIVE:\nRead big.txt thoroughly\n\nPLAN:\n(no plan)\n\n")
        assert "\n\nKNOWN GAPS:\n(none recorded)\n\n" in body

        transcript = transcript_of(body)
        assert len(transcript.encode()) <= 32 * 1024
        items = transcript.split("\n\n")
        assert all(len(item.encode()) <= 4 * 1024 for item in items), [len(i.encode()) for i in items]
        # Newest first: the final answer, then the tool results (newest call first)...
        assert items[0] == "[assistant] FINAL-MARKER all read."
        results = [i for i in items if i.startswith("[tool result read_file]")]
        assert len(results) >= 6 and len(results) == len(items) - 1  # only results fit after the answer
        assert all("bytes cut]" in r for r in results)  # each one clipped
        assert items[1:] == results
        # ...and the oldest items (the tool-calling step, the prompt) did not fit.
        assert "PROMPT-ECHO" not in transcript and "OLDEST-PROMPT" not in transcript

        # Hidden: clients never see the verdict as agent text; the conversation never gets it.
        assert (
            agent_text(client.updates(sid)) == "PROMPT-ECHO reading the file ten times.FINAL-MARKER all read."
        )
        updates_text = json.dumps(client.updates(sid))
        assert "SECRET-EVIDENCE" not in updates_text and "candidate_complete" not in updates_text
        # The verdict is reported only as a goal event.
        (ve,) = verdict_events(client, sid)
        assert ve["verdict"]["evidence"] == "SECRET-EVIDENCE the file was read"
        assert ve["attempts"] == [{"model": SESSION_MODEL, "decision": "candidate_complete"}]
        assert ve["action"] == "complete"
        assert (await get_goal(client, sid))["goal"]["status"] == "complete"

        # The next agent request (a new prompt; the goal is complete, so no evaluator call)
        # carries no trace of the verdict.
        await client.call("session/prompt", text_prompt(sid, "thanks"))
        assert kinds(provider.requests) == ["agent", "agent", "eval", "agent"]
        assert all("SECRET-EVIDENCE" not in m.content for m in provider.requests[-1].messages)


async def test_plan_is_shown_to_the_evaluator(server_factory, workspace: Path):
    todos = {
        "name": "todo_write",
        "arguments": {
            "todos": [
                {"content": "write the lexer", "status": "completed"},
                {"content": "write the parser", "status": "in_progress"},
            ]
        },
        "id": "call_todo",
    }
    provider = scripted(
        {"text": "Planning.", "tool_calls": [todos]},
        {"text": "Planned; the parser is next."},
        verdict("blocked", "the parser needs a grammar decision", "ask the user", "grammar_choice"),
        {"text": "Waiting for the grammar."},
        verdict("candidate_complete", "plan written", "none"),
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        await set_goal(client, sid, "Write a parser")

        await client.call("session/prompt", text_prompt(sid, "plan it"))

        first_eval = evaluator_requests(provider.requests)[0]
        body = evaluator_body(first_eval)
        assert "PLAN:\n- [completed] write the lexer\n- [in_progress] write the parser\n\n" in body


# ---------------------------------------------------------------------------- continue


async def test_continue_injects_a_continuation_and_only_the_newest_stays(server_factory, workspace: Path):
    provider = scripted(
        {"text": "Round one done."},
        verdict("continue", "EVID-1 the outline exists", "NEXT-1 write section two"),
        {"expect": "NEXT-1 write section two", "text": "Round two done."},
        verdict("continue", "EVID-2 two sections exist", "NEXT-2 write the summary"),
        {"expect": "NEXT-2 write the summary", "text": "Round three done."},
        verdict("candidate_complete", "all three parts exist", "nothing"),
        {"text": "should never be sampled"},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        await set_goal(client, sid, "Write the report")

        result = await client.call("session/prompt", text_prompt(sid, "start the report"))

        assert result["stopReason"] == "end_turn"
        assert kinds(provider.requests) == ["agent", "eval", "agent", "eval", "agent", "eval"]
        agents = agent_requests(provider.requests)

        # Round two sees one continuation: objective, progress (= evidence), next step.
        (cont,) = continuations(agents[1])
        assert cont.role == "user" and agents[1].messages[-1] is cont
        assert "Objective: Write the report" in cont.content
        assert "Progress so far: EVID-1 the outline exists" in cont.content
        assert "Next step: NEXT-1 write section two" in cont.content

        # Round three: the older continuation is gone, only the newest stays.
        (cont,) = continuations(agents[2])
        assert "EVID-2" in cont.content and "NEXT-2" in cont.content
        all_text = "\n".join(m.content for m in agents[2].messages)
        assert "NEXT-1" not in all_text and "EVID-1" not in all_text
        # ...while the real conversation is intact: prompt and every answer, in order.
        assert [(m.role, m.content) for m in agents[2].messages if m.tag is None] == [
            ("user", "start the report"),
            ("assistant", "Round one done."),
            ("assistant", "Round two done."),
        ]
        # The evaluator never sees the continuation messages as transcript items.
        assert "[goal] Keep working" not in transcript_of(
            evaluator_body(evaluator_requests(provider.requests)[2])
        )

        assert [v["action"] for v in verdict_events(client, sid)] == ["continue", "continue", "complete"]
        goal = (await get_goal(client, sid))["goal"]
        assert (goal["status"], goal["rounds"]) == ("complete", 3)
        assert goal["lastVerdict"] == {  # stored and sent camelCase
            "decision": "candidate_complete",
            "evidence": "all three parts exist",
            "nextStep": "nothing",
        }


async def test_turn_ended_reports_every_goal_verdict_of_the_turn(server_factory, workspace: Path):
    provider = scripted(
        {"text": "Round one."},
        verdict("continue", "started", "go on"),
        {"text": "Round two."},
        verdict("candidate_complete", "finished", "none"),
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        await set_goal(client, sid, "Finish")

        await client.call("session/prompt", text_prompt(sid, "go"))

        judged = verdict_events(client, sid)
        assert [v["action"] for v in judged] == ["continue", "complete"]
        turn = the_turn_end(client, sid)["turn"]
        assert turn.get("goalVerdicts") == judged  # today: only the first ("continue") one


# ---------------------------------------------------------------------------- candidate_complete + verify


async def test_candidate_complete_with_passing_verify_completes_the_goal(server_factory, workspace: Path):
    provider = scripted(
        {"text": "Creating the marker.", "tool_calls": [write_call("done.txt", "ok\n", "call_w")]},
        {"text": "done.txt is written."},
        verdict("candidate_complete", "done.txt was written", "none"),
        {"text": "should never be sampled"},
    )
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        await set_goal(client, sid, "Create done.txt", verify="test -f done.txt")

        result = await client.call("session/prompt", text_prompt(sid, "make the marker"))

        assert result["stopReason"] == "end_turn"
        assert (workspace / "done.txt").read_text() == "ok\n"
        assert kinds(provider.requests) == ["agent", "agent", "eval"]
        (ve,) = verdict_events(client, sid)
        assert ve["verification"] == {"command": "test -f done.txt", "passed": True, "output": ""}
        assert ve["action"] == "complete"
        goal = (await get_goal(client, sid))["goal"]
        assert (goal["status"], goal["rounds"], goal["gaps"]) == ("complete", 1, [])


async def test_candidate_complete_with_failing_verify_records_the_gap_and_continues(
    server_factory, workspace: Path
):
    verify = "cat done.txt"
    provider = scripted(
        {"text": "I am confident it is all done."},
        verdict("candidate_complete", "the agent says it is done", "double-check"),
        # The gap (the command's output) reaches the agent in the continuation.
        {
            "expect": "No such file or directory",
            "text": "The marker was missing; writing it.",
            "tool_calls": [write_call("done.txt", "finally\n", "call_w")],
        },
        {"text": "Now it exists."},
        verdict("candidate_complete", "done.txt was written", "none"),
        {"text": "should never be sampled"},
    )
    async with served_session(server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS) as (
        _,
        client,
        sid,
    ):
        await set_goal(client, sid, "Create done.txt", verify=verify)

        result = await client.call("session/prompt", text_prompt(sid, "make the marker"))

        assert result["stopReason"] == "end_turn"
        assert kinds(provider.requests) == ["agent", "eval", "agent", "agent", "eval"]
        first, second = verdict_events(client, sid)
        assert first["verification"]["passed"] is False
        assert "No such file or directory" in first["verification"]["output"]
        assert first["action"] == "continue"
        assert (second["verification"]["passed"], second["action"]) == (True, "complete")

        goal = (await get_goal(client, sid))["goal"]
        assert goal["status"] == "complete" and goal["rounds"] == 2
        (gap,) = goal["gaps"]
        assert gap.startswith(f"verification `{verify}` failed: ")
        assert "done.txt: No such file or directory" in gap

        # The gap is in the continuation and shown to the evaluator the second time.
        (cont,) = continuations(agent_requests(provider.requests)[1])
        assert gap in cont.content
        assert f"KNOWN GAPS:\n- {gap}\n\n" in evaluator_body(evaluator_requests(provider.requests)[1])


# ---------------------------------------------------------------------------- blocked


async def test_same_blocker_three_times_pauses_with_the_user_action(server_factory, workspace: Path):
    provider = scripted(
        {"text": "Need credentials."},
        verdict("blocked", "no API key", "set API_KEY", "missing_api_key"),
        {"text": "Still no key."},
        verdict("blocked", "still no API key", "set API_KEY", "missing_api_key"),
        {"text": "No key again."},
        verdict("blocked", "no API key at all", "Please set API_KEY in .env", "missing_api_key"),
        {"text": "should never be sampled"},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        await set_goal(client, sid, "Deploy the service")

        result = await client.call("session/prompt", text_prompt(sid, "deploy"))

        assert result["stopReason"] == "end_turn"
        assert kinds(provider.requests) == ["agent", "eval"] * 3
        assert [v["action"] for v in verdict_events(client, sid)] == ["continue", "continue", "pause"]
        assert [e["blockedCount"] for e in events(client, sid, "goal") if "verdictEvent" in e] == [1, 2, 3]
        goal = (await get_goal(client, sid))["goal"]
        assert goal["status"] == "paused"
        assert "missing_api_key" in goal["pauseReason"]
        assert goal["userAction"] == "Please set API_KEY in .env"
        assert (goal["blockedKey"], goal["blockedCount"], goal["rounds"]) == ("missing_api_key", 3, 3)


async def test_a_different_blocker_key_resets_the_count(server_factory, workspace: Path):
    provider = scripted(
        {"text": "r1"},
        verdict("blocked", "e", "n", "key_a"),
        {"text": "r2"},
        verdict("blocked", "e", "n", "key_a"),
        {"text": "r3"},
        verdict("blocked", "e", "n", "key_b"),  # a new key: the count starts over
        {"text": "r4"},
        verdict("blocked", "e", "n", "key_b"),
        {"text": "r5"},
        verdict("continue", "progress after all", "go on"),  # not blocked: resets as well
        {"text": "r6"},
        verdict("blocked", "e", "n", "key_b"),
        {"text": "r7"},
        verdict("blocked", "e", "n", "key_b"),
        {"text": "r8"},
        verdict("blocked", "e", "provide the key_b thing", "key_b"),
        {"text": "should never be sampled"},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        await set_goal(client, sid, "Finish")

        await client.call("session/prompt", text_prompt(sid, "go"))

        judged = [e for e in events(client, sid, "goal") if "verdictEvent" in e]
        assert [(e.get("blockedKey"), e["blockedCount"]) for e in judged] == [
            ("key_a", 1),
            ("key_a", 2),
            ("key_b", 1),
            ("key_b", 2),
            (None, 0),
            ("key_b", 1),
            ("key_b", 2),
            ("key_b", 3),
        ]
        assert [e["verdictEvent"]["action"] for e in judged] == ["continue"] * 7 + ["pause"]
        goal = (await get_goal(client, sid))["goal"]
        assert (goal["status"], goal["userAction"], goal["rounds"]) == (
            "paused",
            "provide the key_b thing",
            8,
        )
        assert "key_b" in goal["pauseReason"]


# ---------------------------------------------------------------------------- malformed verdicts, lanes


MALFORMED = {
    "not-json": {"text": "The goal is clearly complete, well done!"},
    "missing-evidence": {"text": json.dumps({"decision": "candidate_complete", "next_step": "none"})},
    "empty-evidence": {
        "text": json.dumps({"decision": "candidate_complete", "evidence": " ", "next_step": "x"})
    },
    "key-on-continue": verdict("continue", "some progress", "go on", "stray_key"),
    "uppercase-key": verdict("blocked", "no access", "grant access", "Missing_Access"),
    "unknown-decision": {"text": json.dumps({"decision": "done", "evidence": "e", "next_step": "n"})},
}


@pytest.mark.parametrize("malformed", list(MALFORMED), ids=list(MALFORMED))
async def test_malformed_verdict_from_the_small_model_falls_back_to_the_session_model(
    server_factory, workspace: Path, malformed: str
):
    provider = scripted(
        {"text": "Worked on it."},
        MALFORMED[malformed],  # attempt 1: the small model
        verdict("continue", "half done", "NEXT-STEP-FROM-SESSION-MODEL"),  # attempt 2
        {"expect": "NEXT-STEP-FROM-SESSION-MODEL", "text": "More work."},
        {"text": "The goal is complete!"},  # small model again: malformed (not JSON)
        verdict("candidate_complete", "all done", "none"),
        {"text": "should never be sampled"},
    )
    async with served_session(server_factory, workspace, provider, goal_evaluator_model=SMALL_MODEL) as (
        _,
        client,
        sid,
    ):
        await set_goal(client, sid, "Do the thing")

        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        assert kinds(provider.requests) == ["agent", "eval", "eval", "agent", "eval", "eval"]
        assert [r.model for r in evaluator_requests(provider.requests)] == [
            SMALL_MODEL,
            SESSION_MODEL,
            SMALL_MODEL,
            SESSION_MODEL,
        ]
        assert all(r.tools == [] for r in evaluator_requests(provider.requests))
        first, second = verdict_events(client, sid)
        (bad, good) = first["attempts"]
        assert bad["model"] == SMALL_MODEL and bad["error"].startswith("malformed verdict: ")
        assert "decision" not in bad
        assert good == {"model": SESSION_MODEL, "decision": "continue"}
        assert first["action"] == "continue"
        assert [a["model"] for a in second["attempts"]] == [SMALL_MODEL, SESSION_MODEL]
        assert second["action"] == "complete"
        goal = (await get_goal(client, sid))["goal"]
        assert (goal["status"], goal["rounds"]) == ("complete", 2)


async def test_both_attempts_failing_pauses_with_infra_never_complete(server_factory, workspace: Path):
    provider = scripted(
        {"text": "I have finished everything, the goal is complete."},
        # Both attempts "say" complete, but neither is a valid verdict.
        {"text": json.dumps({"decision": "candidate_complete", "evidence": "", "next_step": "none"})},
        verdict("candidate_complete", "finished", "none", "done_key"),
        {"text": "should never be sampled"},
    )
    async with served_session(server_factory, workspace, provider, goal_evaluator_model=SMALL_MODEL) as (
        _,
        client,
        sid,
    ):
        await set_goal(client, sid, "Do the thing")

        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        assert kinds(provider.requests) == ["agent", "eval", "eval"]
        assert [r.model for r in evaluator_requests(provider.requests)] == [SMALL_MODEL, SESSION_MODEL]
        (ve,) = verdict_events(client, sid)
        assert "verdict" not in ve
        assert ve["action"] == "pause"
        assert [a["model"] for a in ve["attempts"]] == [SMALL_MODEL, SESSION_MODEL]
        assert all(a["error"].startswith("malformed verdict: ") for a in ve["attempts"])
        goal = (await get_goal(client, sid))["goal"]
        assert (goal["status"], goal["pauseReason"]) == ("paused", "infra")
        assert "lastVerdict" not in goal
        assert all(e["status"] != "complete" for e in events(client, sid, "goal"))


async def test_provider_errors_in_both_lanes_pause_with_infra(server_factory, workspace: Path):
    provider = scripted(
        {"text": "Done, I think."},
        {"error": {"kind": "network", "message": "connection reset"}},
        {"error": {"kind": "rate_limited", "message": "slow down"}},
        {"text": "should never be sampled"},
    )
    async with served_session(server_factory, workspace, provider, goal_evaluator_model=SMALL_MODEL) as (
        _,
        client,
        sid,
    ):
        await set_goal(client, sid, "Do the thing")

        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"  # the agent's own round did complete
        (ve,) = verdict_events(client, sid)
        assert ve["attempts"] == [
            {"model": SMALL_MODEL, "error": "network: connection reset"},
            {"model": SESSION_MODEL, "error": "rate_limited: slow down"},
        ]
        goal = (await get_goal(client, sid))["goal"]
        assert (goal["status"], goal["pauseReason"]) == ("paused", "infra")
        assert len(provider.requests) == 3


async def test_without_a_small_model_a_transient_failure_is_retried_on_the_session_model(
    server_factory, workspace: Path
):
    """With no small model configured the session's model gets both attempts, so one
    transient failure does not pause the goal.

    Seed 001 (goal evaluation): "超时 30s；最多试 2 次（先小模型，失败再退到当前会话模型）" — at
    most 2 attempts, the small model first, then the session's model.
    """
    provider = scripted(
        {"text": "Done."},
        {"error": {"kind": "network", "message": "connection reset"}},  # attempt 1
        verdict("candidate_complete", "the tests pass", "none"),  # attempt 2: same model
        {"text": "should never be sampled"},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        await set_goal(client, sid, "Do the thing")

        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        assert kinds(provider.requests) == ["agent", "eval", "eval"]
        assert [r.model for r in evaluator_requests(provider.requests)] == [SESSION_MODEL, SESSION_MODEL]
        (ve,) = verdict_events(client, sid)
        assert ve["attempts"] == [
            {"model": SESSION_MODEL, "error": "network: connection reset"},
            {"model": SESSION_MODEL, "decision": "candidate_complete"},
        ]
        goal = (await get_goal(client, sid))["goal"]
        assert goal["status"] == "complete" and "pauseReason" not in goal


async def test_without_a_small_model_two_failures_pause_with_infra(server_factory, workspace: Path):
    """Both attempts (the session's model twice) failing pauses the goal, never completes it.

    Seed 001: "最多试 2 次（先小模型，失败再退到当前会话模型）".
    """
    provider = scripted(
        {"text": "Done."},
        {"text": "not a verdict"},
        {"text": "still not a verdict"},
        {"text": "should never be sampled"},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        await set_goal(client, sid, "Do the thing")

        await client.call("session/prompt", text_prompt(sid, "go"))

        assert kinds(provider.requests) == ["agent", "eval", "eval"]
        (ve,) = verdict_events(client, sid)
        assert [a["model"] for a in ve["attempts"]] == [SESSION_MODEL, SESSION_MODEL]
        assert (await get_goal(client, sid))["goal"]["pauseReason"] == "infra"


# ---------------------------------------------------------------------------- evaluator timeout


def _timeout_script() -> Any:
    return scripted(
        {"text": "Worked."},
        # Attempt 1 (small model) answers far too late for the tiny attempt timeout.
        {"delay": 1.0, **verdict("candidate_complete", "LATE small-model verdict", "none")},
        verdict("continue", "session model judged", "keep going"),
        {"text": "Still working."},
        {"delay": 1.0, **verdict("candidate_complete", "LATE again", "none")},
        {"delay": 1.0, **verdict("candidate_complete", "LATE again", "none")},
        {"text": "should never be sampled"},
    )


def _assert_timeout_behaviour(client: WsClient, sid: str, goal: dict[str, Any]) -> None:
    judged = verdict_events(client, sid)
    assert judged[0]["attempts"][0] == {"model": SMALL_MODEL, "error": "timed out after 0.05s"}
    first, second = judged
    assert first["attempts"] == [
        {"model": SMALL_MODEL, "error": "timed out after 0.05s"},
        {"model": SESSION_MODEL, "decision": "continue"},
    ]
    assert second["attempts"] == [
        {"model": SMALL_MODEL, "error": "timed out after 0.05s"},
        {"model": SESSION_MODEL, "error": "timed out after 0.05s"},
    ]
    assert (goal["status"], goal["pauseReason"]) == ("paused", "infra")


async def test_evaluator_attempt_timeout_over_the_wire(server_factory, workspace: Path, monkeypatch):
    # The attempt timeout is an operator setting (AGENTD_GOAL_ATTEMPT_TIMEOUT_S).
    provider = _timeout_script()
    async with served_session(
        server_factory, workspace, provider, goal_evaluator_model=SMALL_MODEL, goal_attempt_timeout_s=0.05
    ) as (_, client, sid):
        await set_goal(client, sid, "Do the thing")

        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        _assert_timeout_behaviour(client, sid, (await get_goal(client, sid))["goal"])
        assert "LATE" not in json.dumps(events(client, sid, "goal"))


async def test_evaluate_unit_timeout_then_fallback_then_infra():
    limits = GoalLimits(attempt_timeout_s=0.05)
    provider = scripted(
        {"delay": 1.0, **verdict("candidate_complete", "late", "none")},
        verdict("continue", "on time", "next"),
        {"delay": 1.0, **verdict("candidate_complete", "late", "none")},
        {"delay": 1.0, **verdict("candidate_complete", "late", "none")},
    )
    lanes = [(provider, SMALL_MODEL), (provider, SESSION_MODEL)]
    state = GoalState("Do the thing")
    messages = [Message.user("go"), Message(role="assistant", content="done")]

    first = await evaluate(lanes, state, [], messages, limits)
    assert first.verdict is not None and first.verdict.decision == "continue"
    assert first.attempts == [
        {"model": SMALL_MODEL, "error": "timed out after 0.05s"},
        {"model": SESSION_MODEL, "decision": "continue"},
    ]

    second = await evaluate(lanes, state, [], messages, limits)
    assert second.verdict is None
    assert [a["error"] for a in second.attempts] == ["timed out after 0.05s"] * 2
    assert [r.model for r in provider.requests] == [SMALL_MODEL, SESSION_MODEL] * 2
    assert all(r.system == EVALUATOR_SYSTEM and r.tools == [] for r in provider.requests)

    after_evaluation(state, second, limits)
    assert (state.status, state.pause_reason) == (GoalStatus.PAUSED, "infra")


@pytest.mark.parametrize(
    "text",
    [
        "no json here",
        "{not json}",
        json.dumps({"decision": "continue", "next_step": "n"}),
        json.dumps({"decision": "continue", "evidence": "e", "next_step": ""}),
        json.dumps({"decision": "continue", "evidence": "e", "next_step": "n", "blocker_key": "k"}),
        json.dumps({"decision": "blocked", "evidence": "e", "next_step": "n"}),
        json.dumps({"decision": "blocked", "evidence": "e", "next_step": "n", "blocker_key": "Bad-Key"}),
        json.dumps({"decision": "finished", "evidence": "e", "next_step": "n"}),
    ],
)
def test_parse_verdict_rejects_malformed_answers(text: str):
    assert isinstance(parse_verdict(text), str)


def test_parse_verdict_accepts_a_verdict_wrapped_in_prose():
    parsed = parse_verdict(
        'Here you go: {"decision": "blocked", "evidence": "e", "next_step": "n", "blocker_key": "k_1"}'
    )
    assert not isinstance(parsed, str)
    assert (parsed.decision, parsed.blocker_key) == ("blocked", "k_1")


# ---------------------------------------------------------------------------- token budget


async def test_a_spent_budget_ends_the_turn_after_the_evaluation_without_a_wrap_up_round(
    server_factory, workspace: Path
):
    """001: "评估 → 根据评估结果更新 goal → 读取 goal 状态 → Token 预算（超出预算时，停止因 goal 再次
    进入 L3）" and 000: "prepare_goal_continuation…返回 None（目标已达成或 token 超限）即 EndTurn" —
    the round is judged first; a `continue` verdict on a spent budget ends the turn, no extra
    wrap-up round."""
    provider = scripted(
        {"text": "First chunk of work.", "usage": {"input_tokens": 50, "output_tokens": 10}},
        # The hidden evaluator's tokens count against the goal's budget too.
        {
            **verdict("continue", "some work done", "NEXT keep going"),
            "usage": {"input_tokens": 3, "output_tokens": 2},
        },
        {
            "expect": "NEXT keep going",
            "text": "Second chunk.",
            "usage": {"input_tokens": 50, "output_tokens": 10},
        },
        # 128 tokens used ≥ 100: judged, then the budget stops the re-entry.
        {**verdict("continue", "more done", "NEXT again"), "usage": {"input_tokens": 3}},
        {"text": "the next prompt's answer"},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        await set_goal(client, sid, "Do a lot", tokenBudget=100)

        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        assert kinds(provider.requests) == ["agent", "eval", "agent", "eval"]
        goal = (await get_goal(client, sid))["goal"]
        assert goal["status"] == "budget_limited"
        assert goal["tokensUsed"] == 128
        assert goal["rounds"] == 2  # both rounds were judged
        assert "100" in goal["pauseReason"]
        verdicts = the_turn_end(client, sid)["turn"]["goalVerdicts"]
        assert [v["action"] for v in verdicts] == ["continue", "stop"]
        assert verdicts[1]["budgetSpent"] is True

        # A later prompt neither evaluates nor continues the goal.
        await client.call("session/prompt", text_prompt(sid, "anything else?"))
        assert kinds(provider.requests) == ["agent", "eval", "agent", "eval", "agent"]
        assert (await get_goal(client, sid))["goal"]["status"] == "budget_limited"


async def test_a_complete_verdict_completes_a_goal_whose_budget_is_spent(server_factory, workspace: Path):
    """001: "评估 → 根据评估结果更新 goal → 读取 goal 状态 → Token 预算" — the evaluation comes
    before the budget check, so the round that spends the budget can still complete the goal."""
    provider = scripted(
        {"text": "All of it, done.", "usage": {"input_tokens": 150, "output_tokens": 10}},
        verdict("candidate_complete", "everything is there", "nothing"),
        {"text": "should never be sampled"},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        await set_goal(client, sid, "Do it all", tokenBudget=100)

        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        assert kinds(provider.requests) == ["agent", "eval"]
        assert (await get_goal(client, sid))["goal"]["status"] == "complete"


async def test_failed_verifications_pause_the_goal_at_the_cap(server_factory, workspace: Path):
    """001: "验证基础设施失败或次数达上限可将 goal pause" — each failed verification counts; at the
    cap (`limits.goal.verify_failures_cap`, 2 here) the goal pauses and the turn ends."""
    provider = scripted(
        {"text": "Done, I think."},
        verdict("candidate_complete", "looks done", "nothing"),
        {"text": "Fixed, I think."},
        verdict("candidate_complete", "looks done now", "nothing"),
        {"text": "should never be sampled"},
    )
    limits = {"goal": {"verify_failures_cap": 2}}
    async with served_session(server_factory, workspace, provider, limits=limits) as (_, client, sid):
        await set_goal(client, sid, "Make it pass", verify="false")

        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        assert kinds(provider.requests) == ["agent", "eval", "agent", "eval"]
        goal = (await get_goal(client, sid))["goal"]
        assert goal["status"] == "paused" and goal["verifyFailures"] == 2
        assert goal["pauseReason"] == "verification failed 2 times in a row"
        # The continuation between the rounds carried the plan reference 001 lists.
        assert "Plan (todo list):" in continuations(agent_requests(provider.requests)[1])[0].content


# ---------------------------------------------------------------------------- refusal


async def test_refusal_pauses_the_goal_without_evaluating(server_factory, workspace: Path):
    provider = scripted(
        {"text": "I can't help with that.", "stop": "refusal"},
        {"text": "should never be sampled"},
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        await set_goal(client, sid, "Something questionable")

        result = await client.call("session/prompt", text_prompt(sid, "do it"))

        assert result["stopReason"] == "refusal"
        assert kinds(provider.requests) == ["agent"]
        goal = (await get_goal(client, sid))["goal"]
        assert (goal["status"], goal["pauseReason"], goal["rounds"]) == ("paused", "refusal", 0)
        assert goal["userAction"]
        assert events(client, sid, "goal")[-1]["status"] == "paused"
        assert verdict_events(client, sid) == []


# ---------------------------------------------------------------------------- usage


async def test_evaluator_tokens_are_counted_in_the_usage_ledger(server_factory, workspace: Path):
    provider = scripted(
        {"text": "Done.", "usage": {"input_tokens": 10, "output_tokens": 2}},
        {
            **verdict("candidate_complete", "done", "none"),
            "usage": {"input_tokens": 1000, "output_tokens": 20},
        },
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        await set_goal(client, sid, "Finish")

        await client.call("session/prompt", text_prompt(sid, "go"))

        assert kinds(provider.requests) == ["agent", "eval"]
        usage = (await client.call("_agentd/usage/get", {"sessionId": sid}))["session"]
        assert usage["totalTokens"] == 1032  # today: 12, the evaluator's 1020 tokens are lost


# ---------------------------------------------------------------------------- goal changed mid-evaluation


class GatedEvaluator:
    """Wraps a scripted provider; evaluator calls wait until the test releases them."""

    name = "scripted"
    supports_native_schema = False

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    @property
    def requests(self) -> list[ProviderRequest]:
        return self.inner.requests

    async def stream(self, request: ProviderRequest) -> AsyncIterator[Any]:
        if is_evaluator(request):
            self.entered.set()
            await self.release.wait()
        async for event in self.inner.stream(request):
            yield event


async def test_goal_cleared_while_the_evaluator_runs_stays_cleared(server_factory, workspace: Path):
    provider = GatedEvaluator(
        scripted(
            {"text": "Round one."},
            verdict("continue", "started", "go on"),
            {"text": "a round for a goal that no longer exists"},
        )
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        await set_goal(client, sid, "Finish")

        prompt = asyncio.create_task(client.call("session/prompt", text_prompt(sid, "go")))
        await asyncio.wait_for(provider.entered.wait(), 15)
        assert await client.call("_agentd/goal/clear", {"sessionId": sid}) != {}
        provider.release.set()
        assert (await prompt)["stopReason"] == "end_turn"

        assert await get_goal(client, sid) == {}

    async with server_factory(scripted()) as server:  # same home, same SQLite database
        client = await server.client()
        assert await get_goal(client, sid) == {}  # today: the cleared goal is back, rounds=1
        await client.close()
    # Nor should the loop have worked on the cleared goal.
    assert kinds(provider.requests) == ["agent", "eval"]


# ---------------------------------------------------------------------------- restart


async def test_goal_survives_a_restart_with_its_state(server_factory, workspace: Path, db_url: str):
    verify = "cat done.txt"
    first = scripted(
        {"text": "All done, trust me."},
        verdict("candidate_complete", "the agent claims success", "check the marker"),
        # The second round: the first chunk arrives, the rest would come 30 s later.
        {"text": "Second attempt, now really writing it.", "chunk_size": 16, "chunk_delay": 30},
    )
    async with served_session(
        server_factory, workspace, first, database_url=db_url, permission_mode=PermissionMode.BYPASS
    ) as (_, client, sid):
        await set_goal(client, sid, "Create done.txt", tokenBudget=1_000_000, verify=verify)

        prompt = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "make the marker")))

        def second_round_started(msg: dict[str, Any]) -> bool:
            return (
                msg.get("method") == "session/update"
                and msg["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
                and msg["params"]["update"]["content"]["text"].startswith("Second")
            )

        await client.wait_notification(second_round_started)
        await client.notify("session/cancel", {"sessionId": sid})
        assert (await prompt)["result"]["stopReason"] == "cancelled"
        before = (await get_goal(client, sid))["goal"]

    assert before["status"] == "active"
    assert before["rounds"] == 1
    assert len(before["gaps"]) == 1 and "No such file or directory" in before["gaps"][0]
    assert before["lastVerdict"]["decision"] == "candidate_complete"
    assert before["tokensUsed"] > 0

    second = scripted(
        {"text": "Writing it.", "tool_calls": [write_call("done.txt", "ok\n", "call_w")]},
        {"text": "Written."},
        verdict("candidate_complete", "done.txt exists", "none"),
        {"text": "should never be sampled"},
    )
    async with server_factory(second, database_url=db_url, permission_mode=PermissionMode.BYPASS) as server:
        client = await server.client()
        # Straight after the restart, before anything else touches the session.
        assert await get_goal(client, sid) == {"goal": before}

        # The restored goal is the live one: the next prompt is judged against it.
        await client.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        result = await client.call("session/prompt", text_prompt(sid, "try again"))
        assert result["stopReason"] == "end_turn"
        assert kinds(second.requests) == ["agent", "agent", "eval"]
        body = evaluator_body(evaluator_requests(second.requests)[0])
        assert body.startswith("OBJECTIVE:\nCreate done.txt\n")
        assert f"KNOWN GAPS:\n- {before['gaps'][0]}\n\n" in body
        after = (await get_goal(client, sid))["goal"]
        assert (after["status"], after["rounds"], after["gaps"]) == ("complete", 2, before["gaps"])
        assert after["tokensUsed"] > before["tokensUsed"]
        await client.close()

    async with server_factory(scripted(), database_url=db_url) as server:
        client = await server.client()
        assert (await get_goal(client, sid))["goal"] == after  # the verdict was persisted too
        await client.close()
