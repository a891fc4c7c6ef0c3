"""The turn loop, L2 (R-L2a and the fixed order of R-L2), over a real WebSocket.

- Without a goal and without stop hooks a prompt runs L3 exactly once: the provider gets
  exactly as many requests as the scripted steps of that prompt, never a hidden evaluator
  call, and no goal / stop-hook / completion-recovery event is emitted.
- The order is fixed, goal first: with a goal whose evaluator says `continue` once and then
  `candidate_complete`, a (client-registered) stop hook is asked exactly once, only after
  the second evaluation — never while the goal still continues.
- Outcomes that are not Completed (cancelled, failed, max turns, stationarity) and
  refusals skip both: no evaluator request, the stop hook is never run (it would block and
  so show up as another provider request), and no `stop_hooks` event.

Provider requests are told apart by their system prompt: the hidden goal evaluator uses
`EVALUATOR_SYSTEM`, the agent's own rounds never do.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from agentd.core.provider import ProviderRequest
from agentd.loop.goals.evaluator import EVALUATOR_SYSTEM
from tests.support.client import WsClient, text_prompt
from tests.support.server import scripted
from tests.support.session import events, is_update, served_session

NEVER = {"text": "this step must never be sampled"}

# ---------------------------------------------------------------------------- helpers


def all_events(client: WsClient, session_id: str) -> list[tuple[str, dict[str, Any]]]:
    """(kind, payload) of every `_agentd/event` for the session, in order."""
    return [
        (f["params"]["kind"], f["params"]["event"])
        for f in client.frames
        if isinstance(f, dict)
        and f.get("method") == "_agentd/event"
        and f["params"]["sessionId"] == session_id
    ]


def is_evaluator(request: ProviderRequest) -> bool:
    return request.system == EVALUATOR_SYSTEM


def evaluator_requests(requests: list[ProviderRequest]) -> list[ProviderRequest]:
    return [r for r in requests if is_evaluator(r)]


def verdict(decision: str, evidence: str, next_step: str) -> dict[str, Any]:
    """A scripted step answering the hidden goal evaluator."""
    return {"text": json.dumps({"decision": decision, "evidence": evidence, "next_step": next_step})}


def list_dir_call(call_id: str) -> dict[str, Any]:
    return {"name": "list_dir", "arguments": {"path": "."}, "id": call_id}


def blocking_stop_hook_file(tmp_path: Path) -> tuple[Path, Path]:
    """A hooks file with one command stop hook that logs every call and always blocks.
    Returns (hooks file, log file). If it were ever consulted the turn would go on."""
    log = tmp_path / "stop_hook.log"
    script = tmp_path / "stop_hook.py"
    script.write_text(
        "import json, sys\n"
        "payload = json.load(sys.stdin)\n"
        f"with open({str(log)!r}, 'a') as f:\n"
        "    f.write(json.dumps(payload) + '\\n')\n"
        "print(json.dumps({'decision': 'block', 'reason': 'keep going'}))\n"
    )
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    hooks = tmp_path / "hooks.toml"
    hooks.write_text(f"[[stop]]\ncommand = {json.dumps(command)}\n")
    return hooks, log


# ---------------------------------------------------------------------------- R-L2a


async def test_without_goal_or_stop_hooks_each_prompt_runs_l3_exactly_once(server_factory, workspace: Path):
    (workspace / "a.txt").write_text("a\n")
    provider = scripted(
        # prompt 1: one tool round, then an answer (2 requests)
        {"text": "Looking.", "tool_calls": [list_dir_call("call_ls")]},
        {"text": "There is a.txt."},
        # prompt 2: a plain answer (1 request)
        {"expect": "thanks", "text": "You're welcome."},
        NEVER,
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        first = await client.call("session/prompt", text_prompt(sid, "what is here?"))
        assert first["stopReason"] == "end_turn"
        assert len(provider.requests) == 2

        second = await client.call("session/prompt", text_prompt(sid, "thanks"))
        assert second["stopReason"] == "end_turn"
        assert len(provider.requests) == 3

        assert evaluator_requests(provider.requests) == []
        ended = events(client, sid, "turn_ended")
        assert [e["turn"]["iterations"] for e in ended] == [2, 1]
        for e in ended:
            assert e["outcome"] == "completed" and "reason" not in e
            for key in ("stopReentries", "completionRecoveries", "autoRecoveryExhausted", "goalVerdicts"):
                assert key not in e["turn"], (key, e["turn"])
        kinds = [kind for kind, _ in all_events(client, sid)]
        assert "stop_hooks" not in kinds and "completion_recovery" not in kinds and "goal" not in kinds


# ---------------------------------------------------------------------------- order: goal → stop hooks


async def test_goal_is_judged_first_and_stop_hooks_run_only_when_the_goal_stops_continuing(
    server_factory, workspace: Path
):
    provider = scripted(
        {"text": "Round one: wrote half of it."},
        verdict("continue", "half of the work is done", "write the other half"),
        {"expect": "[goal] Keep working", "text": "Round two: wrote the rest."},
        verdict("candidate_complete", "everything is written", "nothing left"),
        NEVER,
    )
    hook_calls: list[dict[str, Any]] = []

    async with served_session(server_factory, workspace, provider) as (_, client, sid):

        async def on_request(msg: dict[str, Any]) -> dict[str, Any]:
            assert msg["method"] == "_agentd/hooks/stop", msg
            # Snapshot what the provider had been asked when the hook was consulted.
            hook_calls.append(
                {"payload": msg["params"], "seen": [is_evaluator(r) for r in provider.requests]}
            )
            return {"decision": "allow"}

        client.on_request = on_request
        await client.call("_agentd/goal/set", {"sessionId": sid, "objective": "write the whole file"})
        registered = await client.call("_agentd/hooks/register", {"sessionId": sid})
        assert registered["method"] == "_agentd/hooks/stop"

        result = await client.call("session/prompt", text_prompt(sid, "start"))

        assert result["stopReason"] == "end_turn"
        # agent, evaluator (continue), agent, evaluator (candidate_complete); nothing more.
        assert [is_evaluator(r) for r in provider.requests] == [False, True, False, True]
        # The stop hook was asked once, after both evaluations, about the last round.
        assert len(hook_calls) == 1, hook_calls
        assert hook_calls[0]["seen"] == [False, True, False, True]
        payload = hook_calls[0]["payload"]
        assert payload["event"] == "stop" and payload["reentries"] == 0
        assert payload["lastMessage"] == "Round two: wrote the rest."
        assert payload["turnId"] == result["_meta"]["agentd"]["turnId"]

        # The events tell the same order: continue, complete, then the stop hooks.
        judged = [
            (kind, ev)
            for kind, ev in all_events(client, sid)
            if (kind == "goal" and "verdictEvent" in ev) or kind == "stop_hooks"
        ]
        assert [(k, ev.get("verdictEvent", {}).get("action")) for k, ev in judged] == [
            ("goal", "continue"),
            ("goal", "complete"),
            ("stop_hooks", None),
        ]
        ended = events(client, sid, "turn_ended")
        assert len(ended) == 1
        assert "stopReentries" not in ended[0]["turn"]
        goal = (await client.call("_agentd/goal/get", {"sessionId": sid}))["goal"]
        assert goal["status"] == "complete"


async def test_turn_ended_lists_every_goal_verdict_of_the_turn(server_factory, workspace: Path):
    provider = scripted(
        {"text": "Round one."},
        verdict("continue", "half of the work is done", "write the other half"),
        {"text": "Round two."},
        verdict("candidate_complete", "everything is written", "nothing left"),
        NEVER,
    )
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        await client.call("_agentd/goal/set", {"sessionId": sid, "objective": "write the whole file"})

        result = await client.call("session/prompt", text_prompt(sid, "start"))

        assert result["stopReason"] == "end_turn"
        assert len(provider.requests) == 4
        judged = [ev["verdictEvent"]["action"] for ev in events(client, sid, "goal") if "verdictEvent" in ev]
        assert judged == ["continue", "complete"]
        ended = events(client, sid, "turn_ended")
        assert len(ended) == 1
        # The turn summary should agree with the goal events.
        assert [v["action"] for v in ended[0]["turn"]["goalVerdicts"]] == judged


# ---------------------------------------------------------------------------- non-Completed skip both

CASES: dict[str, dict[str, Any]] = {
    "cancelled": {
        # The first chunk arrives at once, the second would come 30 s later.
        "steps": [{"text": "Let me think about thi", "chunk_size": 11, "chunk_delay": 30}],
        "requests": 1,
        "stop": "cancelled",
        "reason": "user_cancelled",
    },
    "failed": {
        "steps": [{"error": {"kind": "invalid_request", "message": "invalid tool schema", "status": 400}}],
        "requests": 1,
        "stop": None,  # a JSON-RPC error instead of a result
        "reason": "invalid_request",
    },
    "max_turns": {
        "steps": [
            {"tool_calls": [list_dir_call("call_1")]},
        ],
        "requests": 1,  # the first round reaches max_turns 1: no second sample
        "stop": "max_turn_requests",
        "reason": "max_turns_reached",
        "settings": {"max_turns": 1},
    },
    "stationarity": {
        "steps": [{"tool_calls": [list_dir_call(f"call_{i}")]} for i in range(16)],
        "requests": 16,
        "stop": "end_turn",
        "reason": "identical_steps",
    },
    "refusal": {
        "steps": [{"text": "I can't help with that request.", "stop": "refusal"}],
        "requests": 1,
        "stop": "refusal",
        "reason": None,
    },
}


@pytest.mark.parametrize("case", list(CASES))
async def test_non_completed_outcomes_and_refusals_skip_goal_and_stop_hooks(
    server_factory, workspace: Path, tmp_path: Path, case: str
):
    spec = CASES[case]
    hooks, hook_log = blocking_stop_hook_file(tmp_path)
    provider = scripted(
        *spec["steps"],
        # If the goal or a stop hook were consulted, these would be sampled.
        verdict("continue", "not done", "keep going"),
        NEVER,
        NEVER,
    )
    async with served_session(
        server_factory, workspace, provider, hooks_file=hooks, **spec.get("settings", {})
    ) as (_, client, sid):
        await client.call("_agentd/goal/set", {"sessionId": sid, "objective": "finish the task"})

        params = text_prompt(sid, "go")
        if case == "cancelled":
            prompt = asyncio.create_task(client.request("session/prompt", params))
            await client.wait_notification(is_update(sid, "agent_message_chunk"))
            await client.notify("session/cancel", {"sessionId": sid})
            resp = await prompt
        else:
            resp = await client.request("session/prompt", params)

        if spec["stop"] is None:
            assert "error" in resp, resp
            assert resp["error"]["data"]["outcome"] == "failed"
        else:
            assert "error" not in resp, resp
            assert resp["result"]["stopReason"] == spec["stop"]
            assert resp["result"]["_meta"]["agentd"].get("reason") == spec["reason"]

        # L3 ran once and nothing after it: no evaluator request, no hook run.
        assert len(provider.requests) == spec["requests"]
        assert evaluator_requests(provider.requests) == []
        assert not hook_log.exists(), hook_log.read_text()
        assert events(client, sid, "stop_hooks") == []
        assert [e for e in events(client, sid, "goal") if "verdictEvent" in e] == []
        ended = events(client, sid, "turn_ended")
        assert len(ended) == 1 and ended[0].get("reason") == spec["reason"]
        turn = ended[0].get("turn", {})
        assert "goalVerdicts" not in turn and "stopReentries" not in turn

        goal = (await client.call("_agentd/goal/get", {"sessionId": sid}))["goal"]
        if case == "refusal":
            # A refusal pauses the goal instead of judging it.
            assert (goal["status"], goal.get("pauseReason")) == ("paused", "refusal"), goal
        else:
            assert goal["status"] == "active", goal
