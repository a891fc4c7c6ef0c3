"""Issue 30 item 7: where the L2 opening reminders, the L3 tool-set reminder and the
`user_prompt_submit` hook's context land in the request the model sees — a real `agentd
serve` process, the real OpenAI provider, the local fake OpenAI server recording each body.

001, L2: "注入一批 reminder（MCP、plan mode、任务恢复、workflow 状态、中断提示等）… 把用户消息写进
ChatState … 跑 UserPromptSubmit hook"; "<system-reminder> 标签会作为某条 user content 里的文本".
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentd.infra.config import PermissionMode
from tests.support.client import WsClient, agent_text, text_prompt
from tests.support.fakes import openai_server as oai
from tests.support.mcp import calc_stdio
from tests.support.polling import until
from tests.support.proc import AgentdProcess, agentd_serve
from tests.support.server import scripted
from tests.support.session import events, tool_call

MODEL = "test-model"

HOOK = """\
import json, sys
p = json.load(sys.stdin)
if "secret" in p["prompt"]:
    print(json.dumps({"decision": "block", "reason": "prompts must not carry secrets"}))
else:
    print(json.dumps({"decision": "allow", "context": "The user's branch is main."}))
"""


@pytest.fixture
async def fake() -> AsyncIterator[oai.FakeOpenAI]:
    async with oai.FakeOpenAI() as server:
        yield server


def serve(tmp_path: Path, fake: oai.FakeOpenAI, **settings: str) -> Any:
    return agentd_serve(
        tmp_path / "home",
        provider="openai",
        openai_base_url=fake.base_url,
        openai_api_key="sk-test",
        model=MODEL,
        **settings,
    )


async def new_session(server: AgentdProcess, workspace: Path) -> tuple[WsClient, str]:
    client = await WsClient.connect(server.base_url)
    sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
    return client, sid


def messages(request: Any) -> list[tuple[str, str]]:
    """(role, text) of the request's conversation, system prompt left out."""
    out = []
    for m in request.body["messages"]:
        content = m.get("content") or ""
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content)
        if m["role"] != "system":
            out.append((m["role"], content))
    return out


def reminder(text: str) -> bool:
    return text.startswith("<system-reminder>") and text.endswith("</system-reminder>")


async def test_plan_mode_and_an_interrupted_turn_open_the_next_turn_before_the_prompt(
    tmp_path: Path, workspace: Path, fake: oai.FakeOpenAI
) -> None:
    """001: "注入一批 reminder（MCP、plan mode、任务恢复、workflow 状态、中断提示等）" then "把用户
    消息写进 ChatState": the reminders are `<system-reminder>` text in a user message right
    before the turn's prompt; the interruption note comes once, in the turn after a cancel."""
    gate = threading.Event()
    fake.enqueue(
        oai.Completion.from_text("Here is my plan."),
        oai.Completion.from_text("I will start by reading every file", gate_after=2, gate=gate),
        oai.Completion.from_text("Fine."),
        oai.Completion.from_text("Done."),
    )
    try:
        async with serve(tmp_path, fake) as server:
            client, sid = await new_session(server, workspace)
            await client.call("session/set_mode", {"sessionId": sid, "modeId": "plan"})

            await client.call("session/prompt", text_prompt(sid, "plan the refactor"))
            first = messages(fake.requests[0])
            assert [role for role, _ in first] == ["user", "user"]
            (_, opening), (_, prompt) = first
            assert reminder(opening) and "Plan mode is on" in opening
            assert prompt == "plan the refactor"

            running = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "start")))
            # The stream is held mid-way (the gate): its first words reached the client.
            await until(lambda: "I wi" in agent_text(client.updates(sid)), what="the second turn streaming")
            await client.call("session/cancel", {"sessionId": sid})
            assert (await running)["result"]["stopReason"] == "cancelled"

            await client.call("session/prompt", text_prompt(sid, "what now?"))
            third = messages(fake.requests[2])
            index = third.index(("user", "what now?"))
            role, note = third[index - 1]
            assert role == "user" and note.count("<system-reminder>") == 2
            # 001's order: plan mode before the interruption note.
            assert 0 <= note.index("Plan mode is on") < note.index("The user interrupted your previous turn")

            await client.call("session/prompt", text_prompt(sid, "and then?"))
            fourth = messages(fake.requests[3])
            assert fourth[-1] == ("user", "and then?")
            assert sum("interrupted your previous turn" in text for _, text in fourth) == 1  # told once
            assert sum("Plan mode is on" in text for _, text in fourth) == 4  # every turn while on
            ended = events(client, sid, "turn_ended")
            assert [r["kind"] for r in ended[2]["turn"]["reminders"]] == ["plan_mode", "interruption"]
            assert [r["kind"] for r in ended[3]["turn"]["reminders"]] == ["plan_mode"]
            await client.close()
    finally:
        gate.set()


async def test_a_prompt_hook_adds_context_after_the_prompt_or_blocks_it(
    tmp_path: Path, workspace: Path, fake: oai.FakeOpenAI
) -> None:
    """001: "把用户消息写进 ChatState … 跑 UserPromptSubmit hook" — a `[[user_prompt_submit]]`
    command hook reads the prompt; its context follows the prompt as a system reminder, its
    block takes the prompt out of the conversation and ends the turn with no model request."""
    script = tmp_path / "hook.py"
    script.write_text(HOOK)
    hooks = tmp_path / "hooks.toml"
    hooks.write_text(f"[[user_prompt_submit]]\ncommand = {json.dumps(f'{sys.executable} {script}')}\n")
    fake.enqueue(oai.Completion.from_text("Hello."), oai.Completion.from_text("Still here."))
    async with serve(tmp_path, fake, hooks_file=str(hooks)) as server:
        client, sid = await new_session(server, workspace)

        await client.call("session/prompt", text_prompt(sid, "hello"))
        assert messages(fake.requests[0]) == [
            ("user", "hello"),
            ("user", "<system-reminder>\nThe user's branch is main.\n</system-reminder>"),
        ]

        blocked = await client.call("session/prompt", text_prompt(sid, "my secret is 42"))
        assert blocked["stopReason"] == "end_turn"
        assert blocked["_meta"]["agentd"]["reason"] == "prompt_blocked"
        assert len(fake.requests) == 1  # never sampled
        notices = [u for u in events(client, sid, "notice")]
        assert any("prompts must not carry secrets" in json.dumps(n) for n in notices)
        [verdicts, blocked_verdicts] = [e["verdicts"] for e in events(client, sid, "prompt_hooks")]
        assert [v["decision"] for v in verdicts] == ["allow"]
        assert [v["decision"] for v in blocked_verdicts] == ["block"]

        await client.call("session/prompt", text_prompt(sid, "next"))
        seen = messages(fake.requests[1])
        assert not any("secret" in text for _, text in seen)  # the blocked prompt left the conversation
        assert seen[-2:] == [
            ("user", "next"),
            ("user", "<system-reminder>\nThe user's branch is main.\n</system-reminder>"),
        ]
        await client.close()


async def test_a_client_registered_prompt_hook_is_asked(
    tmp_path: Path, workspace: Path, fake: oai.FakeOpenAI
) -> None:
    """The hook's second source (as for stop hooks): a client registers for
    `user_prompt_submit` and is asked with `_agentd/hooks/stop`, the payload's event saying
    which; its context lands after the prompt."""
    fake.enqueue(oai.Completion.from_text("Hello."))
    asked: list[dict[str, Any]] = []

    async def on_request(msg: dict[str, Any]) -> dict[str, Any]:
        asked.append(msg["params"])
        return {"decision": "allow", "context": "Answer in French."}

    async with serve(tmp_path, fake) as server:
        client, sid = await new_session(server, workspace)
        client.on_request = on_request
        registered = await client.call(
            "_agentd/hooks/register", {"sessionId": sid, "events": ["user_prompt_submit"]}
        )
        assert registered["registered"] == ["user_prompt_submit"]

        await client.call("session/prompt", text_prompt(sid, "hello"))

        [payload] = asked
        assert (payload["event"], payload["prompt"], payload["sessionId"]) == (
            "user_prompt_submit",
            "hello",
            sid,
        )
        assert messages(fake.requests[0])[-1] == (
            "user",
            "<system-reminder>\nAnswer in French.\n</system-reminder>",
        )
        await client.close()


def user_texts(request: Any) -> list[str]:
    return [m.content for m in request.messages if m.role == "user"]


async def test_mcp_servers_are_announced_and_a_tool_set_changed_mid_turn_is_told_before_sampling(
    server_factory, workspace: Path
) -> None:
    """001, L2: "注入一批 reminder（MCP、…）" — the first turn with MCP servers opens with their
    tools; L3 step 2: "如有必要，告诉模型当前 MCP 服务器/工具集合发生了什么变化的 system-reminder" —
    a `session/load` replacing the servers while the turn waits on a permission question makes
    the next sampling of the same turn offer the new tools, after a reminder naming the change."""
    provider = scripted(
        {"tool_calls": [tool_call("write_file", "w1", path="notes.txt", content="hi")]},
        {"text": "noted"},
        {"text": "second turn"},
    )
    calc2 = {**calc_stdio(), "name": "calc2"}
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        client = await server.client()
        other = await server.client()
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": [calc_stdio()]}))[
            "sessionId"
        ]

        async def swap_servers_then_allow(msg: dict[str, Any]) -> dict[str, Any]:
            load = {"sessionId": sid, "cwd": str(workspace), "mcpServers": [calc2]}
            await other.call("session/load", load)
            return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

        client.on_request = swap_servers_then_allow
        result = await client.call("session/prompt", text_prompt(sid, "take a note"))
        assert result["stopReason"] == "end_turn"

        first, second = provider.requests[:2]
        opening, prompt = user_texts(first)
        assert reminder(opening) and "MCP servers connected to this session" in opening
        assert "- calc: mcp__calc__add, mcp__calc__boom" in opening
        assert prompt == "take a note"
        assert "mcp__calc__add" in {t.name for t in first.tools}
        # Same turn, next sampling: the new set, and the reminder right before it is sampled.
        offered = {t.name for t in second.tools}
        assert "mcp__calc2__add" in offered and "mcp__calc__add" not in offered
        change = second.messages[-1]
        assert change.role == "user" and reminder(change.content)
        assert "The tools available to you changed" in change.content
        assert "New: mcp__calc2__add" in change.content
        assert "No longer available (do not call them): mcp__calc__add" in change.content
        assert second.messages[-2].role == "tool"  # it follows the step's results

        # The next turn: the servers were told (the change reminder), nothing is said again.
        await client.call("session/prompt", text_prompt(sid, "again"))
        assert user_texts(provider.requests[2])[-1] == "again"
        assert sum("changed since your last step" in t for t in user_texts(provider.requests[2])) == 1
        assert sum("MCP servers connected" in t for t in user_texts(provider.requests[2])) == 1
        ended = events(client, sid, "turn_ended")
        assert [r["kind"] for r in ended[0]["turn"]["reminders"]] == ["mcp", "toolset_changed"]
        await other.close()
        await client.close()
