"""Stop hooks (R-L2d) over a real WebSocket.

File-configured command hooks (`hooks_file`, `[[stop]] command = ...`) get one JSON object
on stdin — `event: "stop"`, `sessionId`, `cwd`, `turnId`, `lastMessage`, `reentries` — and
print a verdict. Each test hook logs what it received, then answers:

- allow → the turn ends;
- block with reason and context → both are appended as a user message and the turn goes
  on (another provider request in the same turn); several blocks are merged;
- prevent → the turn ends even when another hook blocks;
- at most 8 re-entries per turn: an always-blocking hook is asked 8 times, the turn runs 8
  extra rounds and then ends `end_turn` with `turn.stopReentries == 8`;
- a hook that exits non-zero, prints garbage or an unknown decision, or times out fails
  open: the turn ends normally and the verdict says `failedOpen`.

Client-registered hooks (`_agentd/hooks/register`): the server asks the client with an
`_agentd/hooks/stop` request; a block makes the turn continue once; a client that never
answers (short `client_hook_timeout_s`) fails open; after that client disconnects its hook
is no longer consulted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.client import text_prompt
from tests.support.polling import until
from tests.support.server import scripted
from tests.support.session import assert_valid_frames, events, served_session, the_turn_end
from tests.support.stop_hooks import CommandHook, answer, block_first

NEVER = {"text": "this step must never be sampled"}
PAYLOAD_KEYS = {"event", "sessionId", "cwd", "turnId", "lastMessage", "reentries"}

# ---------------------------------------------------------------------------- helpers


def hooks_file(tmp_path: Path, *hooks: CommandHook) -> Path:
    lines: list[str] = []
    for hook in hooks:
        lines += ["[[stop]]", f"command = {json.dumps(hook.command)}"]
        if hook.timeout is not None:
            lines.append(f"timeout = {hook.timeout}")
    path = tmp_path / "hooks.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def last_user(request: Any) -> str:
    return next(m.content for m in reversed(request.messages) if m.role == "user")


# ---------------------------------------------------------------------------- command hooks


async def test_allow_ends_the_turn_and_the_hook_gets_the_stop_payload(
    server_factory, workspace: Path, tmp_path: Path
):
    hook = CommandHook(tmp_path, "allow", answer({"decision": "allow"}))
    provider = scripted({"text": "All done."}, NEVER)
    async with served_session(server_factory, workspace, provider, hooks_file=hooks_file(tmp_path, hook)) as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "do it"))

        assert result["stopReason"] == "end_turn" and "reason" not in result["_meta"]["agentd"]
        assert len(provider.requests) == 1
        (payload,) = hook.calls()
        assert set(payload) == PAYLOAD_KEYS
        assert payload["event"] == "stop"
        assert payload["sessionId"] == sid
        assert payload["turnId"] == result["_meta"]["agentd"]["turnId"]
        assert payload["lastMessage"] == "All done."
        assert payload["reentries"] == 0
        assert Path(payload["cwd"]) == workspace
        (stop_event,) = events(client, sid, "stop_hooks")
        assert stop_event == {"reentries": 0, "verdicts": [{"hook": hook.command, "decision": "allow"}]}
        assert "stopReentries" not in the_turn_end(client, sid)["turn"]


async def test_block_appends_reason_and_context_and_the_turn_continues(
    server_factory, workspace: Path, tmp_path: Path
):
    reason, context = "the tests still fail", "FAILED tests/test_x.py::test_y - AssertionError"
    hook = CommandHook(
        tmp_path,
        "block_once",
        block_first({"decision": "block", "reason": reason, "context": context}),
    )
    provider = scripted(
        {"text": "First answer."},
        {"expect": reason, "text": "Second answer: fixed the test."},
        NEVER,
    )
    async with served_session(server_factory, workspace, provider, hooks_file=hooks_file(tmp_path, hook)) as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "fix it"))

        assert result["stopReason"] == "end_turn" and "reason" not in result["_meta"]["agentd"]
        # One more provider request, in the same turn.
        assert len(provider.requests) == 2
        feedback = provider.requests[1].messages[-1]
        assert feedback.role == "user"
        assert reason in feedback.content and context in feedback.content
        calls = hook.calls()
        assert [c["reentries"] for c in calls] == [0, 1]
        assert [c["lastMessage"] for c in calls] == ["First answer.", "Second answer: fixed the test."]
        assert {c["turnId"] for c in calls} == {result["_meta"]["agentd"]["turnId"]}
        stop_events = events(client, sid, "stop_hooks")
        assert [(e["reentries"], [v["decision"] for v in e["verdicts"]]) for e in stop_events] == [
            (0, ["block"]),
            (1, ["allow"]),
        ]
        assert stop_events[0]["verdicts"][0]["reason"] == reason
        ended = the_turn_end(client, sid)
        assert ended["turn"]["stopReentries"] == 1
        assert_valid_frames(client)


async def test_blocks_of_several_hooks_are_merged(server_factory, workspace: Path, tmp_path: Path):
    hooks = [
        CommandHook(
            tmp_path,
            f"block_{tag}",
            block_first({"decision": "block", "reason": f"reason {tag}", "context": f"context {tag}"}),
        )
        for tag in ("a", "b")
    ]
    provider = scripted({"text": "First."}, {"text": "Second."}, NEVER)
    async with served_session(
        server_factory, workspace, provider, hooks_file=hooks_file(tmp_path, *hooks)
    ) as (_, client, sid):
        await client.call("session/prompt", text_prompt(sid, "go"))

        assert len(provider.requests) == 2
        feedback = last_user(provider.requests[1])
        for part in ("reason a", "reason b", "context a", "context b"):
            assert part in feedback, feedback
        assert the_turn_end(client, sid)["turn"]["stopReentries"] == 1


async def test_prevent_ends_the_turn_even_when_another_hook_blocks(
    server_factory, workspace: Path, tmp_path: Path
):
    blocker = CommandHook(tmp_path, "blocker", answer({"decision": "block", "reason": "not yet"}))
    preventer = CommandHook(tmp_path, "preventer", answer({"decision": "prevent", "reason": "stop now"}))
    provider = scripted({"text": "Done."}, NEVER)
    async with served_session(
        server_factory, workspace, provider, hooks_file=hooks_file(tmp_path, blocker, preventer)
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        assert len(provider.requests) == 1
        assert len(blocker.calls()) == 1 and len(preventer.calls()) == 1
        (stop_event,) = events(client, sid, "stop_hooks")
        assert sorted(v["decision"] for v in stop_event["verdicts"]) == ["block", "prevent"]
        assert "stopReentries" not in the_turn_end(client, sid)["turn"]


async def test_at_most_eight_reentries_per_turn(server_factory, workspace: Path, tmp_path: Path):
    hook = CommandHook(tmp_path, "always_block", answer({"decision": "block", "reason": "never done"}))
    provider = scripted(*({"text": f"Round {i}."} for i in range(9)), NEVER)
    async with served_session(server_factory, workspace, provider, hooks_file=hooks_file(tmp_path, hook)) as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn" and "reason" not in result["_meta"]["agentd"]
        # The first round plus exactly 8 re-entries; after the 8th the turn ends unasked.
        assert len(provider.requests) == 9
        assert [c["reentries"] for c in hook.calls()] == list(range(8))
        assert [e["reentries"] for e in events(client, sid, "stop_hooks")] == list(range(8))
        ended = the_turn_end(client, sid)
        assert (ended["outcome"], ended["stopReason"]) == ("completed", "end_turn")
        assert ended["turn"]["stopReentries"] == 8


FAILING_HOOKS = {
    "exit_nonzero": ("print(json.dumps({'decision': 'block'}))\nsys.exit(3)", None, "exited with status 3"),
    "garbage": ("print('this is not json')", None, "not JSON"),
    "unknown_decision": (answer({"decision": "maybe"}), None, "unknown decision"),
    "timeout": ("time.sleep(30)", 0.5, "timed out after 0.5s"),
}


@pytest.mark.parametrize("case", list(FAILING_HOOKS))
async def test_a_failing_hook_fails_open(server_factory, workspace: Path, tmp_path: Path, case: str):
    body, timeout, why = FAILING_HOOKS[case]
    hook = CommandHook(tmp_path, case, body, timeout=timeout)
    provider = scripted({"text": "Done."}, NEVER)
    async with served_session(server_factory, workspace, provider, hooks_file=hooks_file(tmp_path, hook)) as (
        _,
        client,
        sid,
    ):
        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn" and "reason" not in result["_meta"]["agentd"]
        assert len(provider.requests) == 1
        if case == "timeout":
            assert len(hook.calls()) <= 1  # killed by its timeout, possibly before it logged
        else:
            assert len(hook.calls()) == 1  # it ran, and was ignored
        (stop_event,) = events(client, sid, "stop_hooks")
        (verdict,) = stop_event["verdicts"]
        assert verdict["decision"] == "allow" and verdict["failedOpen"] is True
        assert why in verdict["reason"], verdict
        assert "stopReentries" not in the_turn_end(client, sid)["turn"]


# ---------------------------------------------------------------------------- client-registered hooks


async def test_client_hook_block_once_continues_the_turn_once(server_factory, workspace: Path):
    provider = scripted(
        {"text": "First answer."},
        {"expect": "check the docs too", "text": "Second answer."},
        NEVER,
    )
    asked: list[dict[str, Any]] = []

    async def on_request(msg: dict[str, Any]) -> dict[str, Any]:
        assert msg["method"] == "_agentd/hooks/stop", msg
        asked.append(msg["params"])
        if len(asked) == 1:
            return {"decision": "block", "reason": "check the docs too", "context": "docs/ is outdated"}
        return {"decision": "allow"}

    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        client.on_request = on_request
        registered = await client.call("_agentd/hooks/register", {"sessionId": sid})
        assert registered == {"registered": ["stop"], "method": "_agentd/hooks/stop"}

        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        assert len(provider.requests) == 2
        feedback = last_user(provider.requests[1])
        assert "check the docs too" in feedback and "docs/ is outdated" in feedback
        assert [p["reentries"] for p in asked] == [0, 1]
        assert [p["lastMessage"] for p in asked] == ["First answer.", "Second answer."]
        for p in asked:
            assert PAYLOAD_KEYS <= set(p)
            assert (p["event"], p["sessionId"]) == ("stop", sid)
            assert p["turnId"] == result["_meta"]["agentd"]["turnId"]
        assert the_turn_end(client, sid)["turn"]["stopReentries"] == 1
        assert_valid_frames(client)


async def test_client_hook_that_never_answers_fails_open(server_factory, workspace: Path):
    provider = scripted({"text": "Done."}, NEVER)
    async with served_session(server_factory, workspace, provider, client_hook_timeout_s=0.5) as (
        _,
        client,
        sid,
    ):
        client.on_request = None  # requests stay unanswered
        await client.call("_agentd/hooks/register", {"sessionId": sid})

        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn" and "reason" not in result["_meta"]["agentd"]
        assert len(provider.requests) == 1
        assert [r["method"] for r in client.server_requests] == ["_agentd/hooks/stop"]
        (stop_event,) = events(client, sid, "stop_hooks")
        (verdict,) = stop_event["verdicts"]
        assert verdict["decision"] == "allow" and verdict["failedOpen"] is True
        assert verdict["hook"].startswith("client:")


async def test_client_hook_is_not_consulted_after_its_client_disconnects(server_factory, workspace: Path):
    provider = scripted({"expect": "one", "text": "First."}, {"expect": "two", "text": "Second."}, NEVER)
    asked: list[dict[str, Any]] = []

    async def on_request(msg: dict[str, Any]) -> dict[str, Any]:
        asked.append(msg["params"])
        return {"decision": "allow"}

    async with served_session(server_factory, workspace, provider) as (server, hooked, sid):
        hooked.on_request = on_request
        await hooked.call("_agentd/hooks/register", {"sessionId": sid})
        await hooked.call("session/prompt", text_prompt(sid, "one"))
        assert len(asked) == 1
        assert len(events(hooked, sid, "stop_hooks")) == 1

        await hooked.close()
        # Wait (bounded) until the server has processed the disconnect: the session has no
        # attached client left. Not a timing assertion — only the order of things matters.
        actor = await server.app.state.agentd.manager.get(sid)
        await until(lambda: len(actor.hub) == 0)

        other = await server.client()
        result = await other.call("session/prompt", text_prompt(sid, "two"))

        assert result["stopReason"] == "end_turn"
        assert len(provider.requests) == 2
        assert len(asked) == 1  # the gone client's hook was not asked again
        # No stop hook is left at all: the loop did not even run the stop-hook stage.
        assert events(other, sid, "stop_hooks") == []
        assert other.server_requests == []
        await other.close()
