"""Frames the session gets rendered at the edge (agentd/transport/render.py)."""

from __future__ import annotations

from agentd.core.events import Event, EventKind
from agentd.session.command_syntax import BUILTINS, Skill, available_commands
from agentd.transport.render import ACP_RENDERER, live_frames


def test_available_commands_update() -> None:
    skills = {"review": Skill("review", "Review code", "body")}
    method, params = ACP_RENDERER.available_commands("s1", available_commands(skills), 7)
    assert method == "session/update"
    assert params["sessionId"] == "s1"
    assert params["_meta"] == {"agentd": {"seq": 7, "transient": True}}
    update = params["update"]
    assert update["sessionUpdate"] == "available_commands_update"
    commands = update["availableCommands"]
    # Skills first, then every builtin; a hint only where the command takes an argument.
    assert commands[0] == {
        "name": "review",
        "description": "Review code",
        "input": {"hint": "what to apply it to"},
    }
    assert [c["name"] for c in commands[1:]] == list(BUILTINS)
    assert {"name": "help", "description": "List the available commands"} in commands
    mode = next(c for c in commands if c["name"] == "mode")
    assert mode["input"] == {"hint": "default | accept_edits | bypass | plan"}


def test_resync_and_snapshot_frames() -> None:
    assert ACP_RENDERER.resync("s1", 4, "client_too_slow") == (
        "_agentd/resync_required",
        {"sessionId": "s1", "lastSeq": 4, "reason": "client_too_slow"},
    )
    assert ACP_RENDERER.snapshot({"sessionId": "s1"}) == ("_agentd/session/snapshot", {"sessionId": "s1"})


def test_permission_request() -> None:
    call = {"toolCallId": "c1", "title": "bash"}
    options = [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}]
    assert ACP_RENDERER.permission_request("s1", "perm_1", call, options) == (
        "session/request_permission",
        {
            "sessionId": "s1",
            "toolCall": call,
            "options": options,
            "_meta": {"agentd": {"requestId": "perm_1"}},
        },
    )


def test_usage_update_carries_the_turns_tokens_in_meta() -> None:
    ledger = {"inputTokens": 10, "outputTokens": 2, "totalTokens": 12, "cost": 0.5, "calls": 1, "byLane": {}}
    payload = {"used": 12, "size": 100, "prompt": ledger, "cost": {"amount": 0.5, "currency": "USD"}}
    [(method, params)] = live_frames(Event.stored("s1", EventKind.USAGE, payload, seq=3), 3)
    assert method == "session/update"
    update = {"sessionUpdate": "usage_update", "used": 12, "size": 100, "cost": payload["cost"]}
    assert params["update"] == update
    turn = {k: v for k, v in ledger.items() if k != "byLane"}
    assert params["_meta"] == {"agentd": {"seq": 3, "turnUsage": turn}}
