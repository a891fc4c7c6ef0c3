"""A turn's end is its task completing, which the actor awaits beside its mailbox (issue 27,
item 3): no message goes to the actor's mailbox when a turn ends, yet its prompt is answered
after its `turn_ended` and the queue's next prompt starts; a runner that raises still ends
its turn `failed`, recorded and answered, and the session goes on."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentd.protocol.jsonrpc import ErrorCode
from agentd.session import turn_launch
from agentd.session.actor import session_actor
from tests.support.client import WsClient, text_prompt
from tests.support.gated import GatedProvider
from tests.support.server import scripted
from tests.support.session import events, queue_of_length, served_session


def turn_marks(client: WsClient, session_id: str) -> list[tuple[int, str]]:
    """(frame index, kind) of the session's turn_started / turn_ended events."""
    return [
        (i, f["params"]["kind"])
        for i, f in enumerate(client.frames)
        if isinstance(f, dict)
        and f.get("method") == "_agentd/event"
        and f["params"]["sessionId"] == session_id
        and f["params"]["kind"] in ("turn_started", "turn_ended")
    ]


def response_index(client: WsClient, request_id: Any) -> int:
    return next(i for i, f in enumerate(client.frames) if isinstance(f, dict) and f.get("id") == request_id)


@pytest.mark.parametrize("shortcuts", [True, False], ids=["shortcuts", "mailbox-only"])
async def test_a_turns_end_is_no_mailbox_message_and_the_next_prompt_starts(
    server_factory, workspace: Path, monkeypatch: pytest.MonkeyPatch, shortcuts: bool
):
    monkeypatch.setattr(session_actor, "SHORTCUTS", shortcuts)
    provider = GatedProvider(scripted({"text": "answer one"}, {"text": "answer two"}), hold={0})
    async with served_session(server_factory, workspace, provider) as (server, client, sid):
        actor = server.app.state.agentd.manager.live_actor(sid)
        assert actor is not None
        mailed: list[str] = []
        put = actor.mailbox.put_nowait

        def recorded(command: Any) -> None:
            mailed.append(type(command).__name__)
            put(command)

        actor.mailbox.put_nowait = recorded  # type: ignore[method-assign]
        first = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "one")))
        await provider.held(0)
        second = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "two")))
        await client.wait_notification(queue_of_length(sid, 1))  # it waits behind the first turn
        provider.release(0)
        responses = await asyncio.gather(first, second)

        assert [r["result"]["stopReason"] for r in responses] == ["end_turn", "end_turn"]
        # Only the prompts went through the mailbox: both turns' ends were awaited directly.
        # With the shortcuts the first one (to an idle actor) was queued in its sender's step.
        assert mailed == (["Prompt"] if shortcuts else ["Prompt", "Prompt"])
        marks = turn_marks(client, sid)
        assert [kind for _, kind in marks] == ["turn_started", "turn_ended"] * 2
        # Each answer comes after its own turn_ended, the second turn after the first ended.
        assert response_index(client, responses[0]["id"]) > marks[1][0]
        assert response_index(client, responses[1]["id"]) > marks[3][0]


async def test_a_runner_that_raises_still_ends_its_turn_failed(
    server_factory, workspace: Path, monkeypatch: pytest.MonkeyPatch
):
    async def broken(ctx: Any, command: str, call_id: str) -> Any:
        raise RuntimeError("the shell runner broke")

    monkeypatch.setattr(turn_launch, "run_bang", broken)
    provider = scripted({"text": "still here"})
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        resp = await client.request("session/prompt", text_prompt(sid, "!ls"))

        assert resp["error"]["code"] == ErrorCode.TURN_FAILED
        assert "the shell runner broke" in resp["error"]["message"]
        [ended] = events(client, sid, "turn_ended")
        assert ended["outcome"] == "failed" and ended["error"]["kind"] == "internal"
        assert response_index(client, resp["id"]) > turn_marks(client, sid)[-1][0]

        # The session goes on: the next prompt runs a turn of its own.
        result = await client.call("session/prompt", text_prompt(sid, "hello"))
        assert result["stopReason"] == "end_turn"
        assert [e["outcome"] for e in events(client, sid, "turn_ended")] == ["failed", "completed"]
