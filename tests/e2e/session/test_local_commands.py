"""Local commands (R-S6): `/name` builtins run without sampling the model and end the
turn; clients learn them from `available_commands_update`."""

from __future__ import annotations

from pathlib import Path

from agentd.loop.reminders import system_reminder
from agentd.loop.turn_reminders import PLAN_MODE_TEXT
from tests.support.acp_schema import AcpValidator
from tests.support.client import agent_text, allow, text_prompt
from tests.support.server import scripted
from tests.support.session import served_session


async def _run(client, sid: str, text: str) -> tuple[dict, str]:
    before = len(agent_text(client.updates(sid)))
    result = await client.call("session/prompt", text_prompt(sid, text))
    return result, agent_text(client.updates(sid))[before:]


async def test_builtins_answer_locally_without_sampling(server_factory, workspace: Path):
    provider = scripted({"text": "the model answered"})
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        advertised = await client.wait_notification(
            lambda m: (
                m["method"] == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "available_commands_update"
            )
        )
        names = [c["name"] for c in advertised["params"]["update"]["availableCommands"]]
        assert names == [
            "help",
            "compact",
            "mode",
            "plan",
            "model",
            "goal",
            "queue",
            "usage",
            "clear",
            "rewind",
            "diff",
        ]

        result, text = await _run(client, sid, "/help")
        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["reason"] == "local_command:help"
        assert "/goal <objective | status | clear>" in text

        _, text = await _run(client, sid, "/mode plan")
        assert text == "Permission mode: plan"
        mode_updates = [u for u in client.updates(sid) if u["sessionUpdate"] == "current_mode_update"]
        assert mode_updates[-1]["currentModeId"] == "plan"
        _, text = await _run(client, sid, "/mode yolo")
        assert text.startswith("Unknown mode 'yolo'")

        _, text = await _run(client, sid, "/goal ship the release")
        assert text.startswith("Goal set: ship the release")
        assert (await client.call("_agentd/goal/get", {"sessionId": sid}))["goal"][
            "objective"
        ] == "ship the release"
        _, text = await _run(client, sid, "/goal status")
        assert text == "Goal (active): ship the release"
        _, text = await _run(client, sid, "/goal clear")
        assert text == "Goal cleared."
        assert await client.call("_agentd/goal/get", {"sessionId": sid}) == {}

        _, text = await _run(client, sid, "/model other-model")
        assert text == "Model: other-model"
        _, text = await _run(client, sid, "/usage")
        assert text.startswith("Tokens: 0 in, 0 out")
        _, text = await _run(client, sid, "/queue")
        assert text == "The queue is empty."
        _, text = await _run(client, sid, "/compact")
        assert text == "Nothing old enough to compact."

        # None of that reached the model; an ordinary prompt does, without the commands.
        assert provider.requests == []
        await client.call("session/prompt", text_prompt(sid, "hello"))
        assert len(provider.requests) == 1
        assert provider.requests[0].model == "other-model"
        # `/mode plan` above left the plan gate on: the turn opens with its reminder (issue 30
        # item 7, 001: "注入一批 reminder（…plan mode…）").
        assert [m.content for m in provider.requests[0].messages if m.role == "user"] == [
            system_reminder(PLAN_MODE_TEXT),
            "hello",
        ]

        _, text = await _run(client, sid, "/clear")
        assert text.startswith("Context cleared.")
        provider2_requests = len(provider.requests)
        assert provider2_requests == 1
        validator = AcpValidator.default()
        for frame in client.frames:
            validator.assert_valid_agent_frame(frame, client.sent_methods)


async def test_unknown_slash_text_is_an_ordinary_prompt(server_factory, workspace: Path):
    provider = scripted({"text": "ok"})
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "/etc/passwd is a file"))
        assert result["stopReason"] == "end_turn"
        assert "reason" not in result["_meta"]["agentd"]
        assert [m.content for m in provider.requests[0].messages if m.role == "user"] == [
            "/etc/passwd is a file"
        ]


async def test_clear_starts_a_fresh_context_but_keeps_the_log(server_factory, workspace: Path):
    provider = scripted({"text": "first answer"}, {"text": "second answer"})
    async with served_session(server_factory, workspace, provider) as (server, client, sid):
        await client.call("session/prompt", text_prompt(sid, "remember 42"))
        await client.call("session/prompt", text_prompt(sid, "/clear"))
        await client.call("session/prompt", text_prompt(sid, "what did I say?"))
        assert [m.content for m in provider.requests[1].messages] == ["what did I say?"]
        other = await server.client()
        await other.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        replayed = agent_text(other.updates(sid))
        assert "first answer" in replayed and "Context cleared." in replayed
        await client.close()
        await other.close()


async def test_skills_expand_into_ordinary_prompts(server_factory, workspace: Path, tmp_path: Path):
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "review.md").write_text("description: Review a file carefully\nReview $ARGUMENTS for bugs.")
    (skills / "explain.md").write_text("Explain the code in simple words.")
    provider = scripted({"text": "reviewed"}, {"text": "explained"})
    async with served_session(server_factory, workspace, provider, skills_dir=skills) as (_, client, sid):
        advertised = await client.wait_notification(
            lambda m: (
                m["method"] == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "available_commands_update"
            )
        )
        commands = {c["name"]: c for c in advertised["params"]["update"]["availableCommands"]}
        assert commands["review"]["description"] == "Review a file carefully"
        assert "explain" in commands and "help" in commands
        await client.call("session/prompt", text_prompt(sid, "/review app.py"))
        await client.call("session/prompt", text_prompt(sid, "/explain main()"))
        assert provider.requests[0].messages[-1].content == "Review app.py for bugs."
        assert provider.requests[1].messages[-1].content == "Explain the code in simple words.\n\nmain()"


async def test_bang_runs_the_shell_command_with_permission_rules(server_factory, workspace: Path):
    provider = scripted({"text": "I see the output"})
    async with server_factory(provider) as server:
        client = await server.client()
        client.on_request = allow()
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        result = await client.call("session/prompt", text_prompt(sid, "!echo hello-from-shell"))
        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["reason"] == "shell_command"
        # Default mode: running a command asks first, like any bash call.
        assert [r["method"] for r in client.server_requests] == ["session/request_permission"]
        final = [u for u in client.updates(sid) if u["sessionUpdate"] == "tool_call_update"][-1]
        assert final["status"] == "completed"
        assert provider.requests == []  # no sampling
        # The model sees the command and its output in the next turn.
        await client.call("session/prompt", text_prompt(sid, "what did it print?"))
        users = [m.content for m in provider.requests[0].messages if m.role == "user"]
        assert users[0].startswith("I ran `echo hello-from-shell` myself:") and "hello-from-shell" in users[0]
        await client.call("session/set_mode", {"sessionId": sid, "modeId": "plan"})
        refused = await client.call("session/prompt", text_prompt(sid, "!touch nope.txt"))
        assert refused["stopReason"] == "end_turn"
        assert not (workspace / "nope.txt").exists()  # plan mode refuses commands
        await client.close()
