"""The session actor's shortcuts (issue 32, session_actor.py `SHORTCUTS`): while the actor is
parked on an empty mailbox, a prompt for the idle session is queued and its turn started in
the sender's own step, and a turn that ends is ended (answered, the next prompt started) in
the turn's own task — each a hop through the actor's task less. Both run in the actor's
context, and anything sent while the actor is busy still goes through its mailbox, in order.
With the shortcuts off, the same prompts take the mailbox and the actor's step."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentd.core.log_context import current_log_context
from agentd.protocol import TextContent
from agentd.session.actor import session_actor
from agentd.session.commands import Prompt
from tests.support.client import text_prompt
from tests.support.gated import GatedProvider
from tests.support.server import scripted
from tests.support.session import served_session

MODES = pytest.mark.parametrize("shortcuts", [True, False], ids=["shortcuts", "mailbox-only"])


@MODES
async def test_a_prompt_to_an_idle_session_starts_its_turn_in_the_senders_step(
    server_factory, workspace: Path, monkeypatch: pytest.MonkeyPatch, shortcuts: bool
):
    monkeypatch.setattr(session_actor, "SHORTCUTS", shortcuts)
    provider = GatedProvider(scripted({"text": "zero"}, {"text": "one"}), hold={1})
    async with served_session(server_factory, workspace, provider) as (server, client, sid):
        actor = server.app.state.agentd.manager.live_actor(sid)
        assert actor is not None
        await client.request("session/prompt", text_prompt(sid, "zero"))  # answered: idle now
        assert actor.mailbox.parked and actor.running is None
        seen: list[dict[str, str]] = []
        submit = actor.desk.submit

        def recorded(cmd: Prompt) -> None:
            seen.append(current_log_context())  # whose context queues it
            submit(cmd)

        actor.desk.submit = recorded  # type: ignore[method-assign]
        reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        actor.send(Prompt([TextContent(text="hi")], reply))

        if shortcuts:  # queued and started before `send` returned, in the actor's context
            assert actor.running is not None and len(actor.mailbox.items) == 0
            assert seen == [{"session_id": sid}]
        else:  # in the mailbox, for the actor's next step
            assert actor.running is None and len(actor.mailbox.items) == 1 and seen == []
        await provider.held(1)
        assert seen == [{"session_id": sid}]  # (the actor's own step: its context too)
        provider.release(1)
        done = await asyncio.wait_for(reply, 30)
        assert done.outcome.kind.value == "completed"


@MODES
async def test_a_turn_ends_in_its_own_task_while_the_actor_is_parked(
    server_factory, workspace: Path, monkeypatch: pytest.MonkeyPatch, shortcuts: bool
):
    monkeypatch.setattr(session_actor, "SHORTCUTS", shortcuts)
    provider = scripted({"text": "one"}, {"text": "two"})
    async with served_session(server_factory, workspace, provider) as (server, client, sid):
        actor = server.app.state.agentd.manager.live_actor(sid)
        assert actor is not None
        enders: list[str] = []
        finish = actor.finish_turn

        def recorded(turn_id: str) -> None:
            task = asyncio.current_task()
            enders.append(task.get_name().split("-")[0] if task else "?")
            finish(turn_id)

        actor.finish_turn = recorded  # type: ignore[method-assign]
        first = await client.request("session/prompt", text_prompt(sid, "one"))
        second = await client.request("session/prompt", text_prompt(sid, "two"))

        assert [r["result"]["stopReason"] for r in (first, second)] == ["end_turn", "end_turn"]
        # Ended by the turn's task ("turn-…"), or by the actor's ("session-…") woken by it.
        assert enders == (["turn", "turn"] if shortcuts else ["session", "session"])
        assert actor.running is None and actor.mailbox.parked


async def test_a_prompt_sent_while_the_actor_is_busy_takes_the_mailbox(server_factory, workspace: Path):
    provider = GatedProvider(scripted({"text": "one"}, {"text": "two"}), hold={0})
    async with served_session(server_factory, workspace, provider) as (server, client, sid):
        actor = server.app.state.agentd.manager.live_actor(sid)
        assert actor is not None
        first = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "one")))
        await provider.held(0)
        # A turn runs: the prompt waits in the mailbox for the actor, never jumps ahead of it.
        reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        actor.send(Prompt([TextContent(text="two")], reply))
        assert len(actor.mailbox.items) == 1
        provider.release(0)
        assert (await first)["result"]["stopReason"] == "end_turn"
        done = await asyncio.wait_for(reply, 30)
        assert done.outcome.kind.value == "completed"
