"""Sub-agents (R-T11, issue 16 item 11) over a real WebSocket: the `task` tool runs a child
agent — an agent definition from the server's `agents_dir` — with its own L3 loop and budget.

The provider routes each request by the system prompt that asks (`RoutedProvider`): the
session's agent and each child agent play their own script, so a background child's
requests never steal the parent's steps. Gated providers hold a child mid-stream when a
test needs "while the child still runs" as a fact.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.support.client import WsClient, allow, text_prompt
from tests.support.gated import GatedProvider
from tests.support.polling import until
from tests.support.routed import RoutedProvider
from tests.support.server import scripted
from tests.support.session import (
    assert_valid_frames,
    cancel,
    events,
    final_tool_updates,
    new_session,
    served_session,
    tool_call,
)
from tests.support.stop_hooks import CommandHook, answer, block_first
from tests.support.subagents import task

NEVER = {"text": "this step must never be sampled"}


def nested(client: WsClient, session_id: str, call_id: str) -> list[dict[str, Any]]:
    """`_meta.agentd.subagent` of every update on the parent's tool call `call_id`."""
    return [
        u["_meta"]["agentd"]["subagent"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "tool_call_update"
        and u["toolCallId"] == call_id
        and "subagent" in u.get("_meta", {}).get("agentd", {})
    ]


def statuses(client: WsClient, session_id: str, call_id: str) -> list[str]:
    return [n["status"] for n in nested(client, session_id, call_id) if "status" in n]


def tool_results(request: Any) -> list[str]:
    return [m.content for m in request.messages if m.role == "tool"]


async def test_foreground_child_runs_its_own_loop_and_its_answer_is_the_tool_result(
    server_factory, workspace: Path, agents_dir: Path
):
    """R-T11: "a `task` tool that runs a child agent (an agent definition: own system prompt,
    tool allow-list, model, turn limit set by the parent) with its own L3 loop and budget
    inside the parent's turn; … the child's events appear under the parent's tool call …, its
    usage is attributed to its own lane and rolled up to the parent"."""
    (workspace / "notes.txt").write_text("secret: 42 (from the notes)\n")
    parent = scripted(
        {
            "tool_calls": [
                task("t1", "explorer", "Find the secret in notes.txt", description="find the secret")
            ]
        },
        {"text": "The explorer says 42."},
        NEVER,
    )
    child = scripted(
        {
            "tool_calls": [tool_call("read_file", "c1", path="notes.txt")],
            "usage": {"input_tokens": 100, "output_tokens": 10},
        },
        {"text": "The secret is 42.", "usage": {"input_tokens": 120, "output_tokens": 5}},
        NEVER,
    )
    async with served_session(
        server_factory, workspace, RoutedProvider(parent, {"EXPLORER": child}), agents_dir=agents_dir
    ) as (server, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "What is the secret?"))

        assert result["stopReason"] == "end_turn"
        # The child: its own system prompt, tools, model and conversation.
        first = child.requests[0]
        assert len(child.requests) == 2
        assert "You are the EXPLORER." in first.system
        assert [t.name for t in first.tools] == ["read_file"]
        assert first.model == "small-model"
        assert [(m.role, m.content) for m in first.messages] == [("user", "Find the secret in notes.txt")]
        assert "secret: 42" in tool_results(child.requests[1])[0]
        # The parent: `task` offered; the child's answer is the result; none of its messages.
        assert "task" in [t.name for t in parent.requests[0].tools]
        after = parent.requests[1].messages
        assert [m.role for m in after] == ["user", "assistant", "tool"]
        assert after[-1].content == "The secret is 42."
        # The child's events nest under the parent's call, never as calls of their own.
        subs = nested(client, sid, "t1")
        assert {(n["taskId"], n["agent"], n["depth"]) for n in subs} == {("agent-1", "explorer", 1)}
        assert statuses(client, sid, "t1") == ["running", "completed"]
        child_calls = [n["event"]["payload"] for n in subs if n.get("event", {}).get("kind") == "tool_call"]
        assert [c["toolCallId"] for c in child_calls] == ["c1"]
        top_level = [u["toolCallId"] for u in client.updates(sid) if u["sessionUpdate"] == "tool_call"]
        assert top_level == ["t1"]
        assert final_tool_updates(client, sid)["t1"]["status"] == "completed"
        # Usage: the child's own lane, rolled up into the prompt's and the session's ledgers.
        usage = result["_meta"]["agentd"]["usage"]
        lane = usage["byLane"]["subagent:explorer/primary"]
        assert (lane["inputTokens"], lane["outputTokens"], lane["calls"]) == (220, 15, 2)
        assert usage["inputTokens"] == usage["byLane"]["primary"]["inputTokens"] + 220
        assert "incomplete" not in usage
        session = (await client.call("_agentd/usage/get", {"sessionId": sid}))["session"]
        assert session["byLane"]["subagent:explorer/primary"]["calls"] == 2
        assert "incomplete" not in session and not session["dirty"]
        assert_valid_frames(client)
        # Durable: a client loading the session later sees the same nested events.
        later = await server.client()
        await later.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        assert statuses(later, sid, "t1") == ["running", "completed"]
        assert [n["event"]["kind"] for n in nested(later, sid, "t1") if "event" in n] == [
            n["event"]["kind"]
            for n in nested(client, sid, "t1")
            if "event" in n and n["event"]["kind"] != "agent_message_chunk"
        ]
        await later.close()


async def test_allow_list_is_enforced_and_task_stops_at_the_depth_limit(
    server_factory, workspace: Path, agents_dir: Path
):
    """R-T11: "tool allow-list enforced (and the child cannot call `task` beyond the depth
    limit)"; seed 000: "子代理没有这只手，所以子代理才有 max_turns" — a child is bounded."""
    parent = scripted({"tool_calls": [task("t1", "explorer", "try everything")]}, {"text": "ok"}, NEVER)
    child = scripted(
        {
            "tool_calls": [
                tool_call("bash", "c1", command="echo escaped"),
                task("c2", "explorer", "recurse"),
            ]
        },
        {"text": "I could not."},
        NEVER,
    )
    async with served_session(
        server_factory, workspace, RoutedProvider(parent, {"EXPLORER": child}), agents_dir=agents_dir
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        assert len(child.requests) == 2  # the recursive `task` never started another child
        bash_result, task_result = tool_results(child.requests[1])
        assert bash_result.startswith("Unknown tool 'bash'")
        assert task_result.startswith("Unknown tool 'task'")
        assert not (workspace / "escaped").exists()
        assert statuses(client, sid, "t1") == ["running", "completed"]


async def test_children_nest_to_the_depth_limit_and_usage_rolls_up_each_level(
    server_factory, workspace: Path, agents_dir: Path
):
    """R-T11: "depth and concurrency limits"; "the child's events appear under the parent's
    tool call" — a grandchild's under its parent's, which sit under the session's call."""
    parent = scripted({"tool_calls": [task("t1", "nester", "delegate")]}, {"text": "all done"}, NEVER)
    middle = scripted({"tool_calls": [task("m1", "explorer", "look")]}, {"text": "nester: 7"}, NEVER)
    leaf = scripted({"text": "explorer: 7"}, NEVER)
    provider = RoutedProvider(parent, {"NESTER": middle, "EXPLORER": leaf})
    async with served_session(
        server_factory, workspace, provider, agents_dir=agents_dir, subagent_max_depth=2
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        assert [t.name for t in middle.requests[0].tools] == ["task"]  # depth 1 < 2: may spawn
        assert "task" not in [t.name for t in leaf.requests[0].tools]
        assert tool_results(middle.requests[1]) == ["explorer: 7"]
        assert tool_results(parent.requests[1]) == ["nester: 7"]
        grandchild = [
            n["event"]["payload"]["_meta"]["agentd"]["subagent"]
            for n in nested(client, sid, "t1")
            if n.get("event", {}).get("kind") == "tool_call_update" and "_meta" in n["event"]["payload"]
        ]
        assert [g["status"] for g in grandchild if "status" in g] == ["running", "completed"]
        assert {(g["agent"], g["depth"]) for g in grandchild} == {("explorer", 2)}
        lanes = result["_meta"]["agentd"]["usage"]["byLane"]
        assert lanes["subagent:nester/primary"]["calls"] == 2
        assert lanes["subagent:nester/subagent:explorer/primary"]["calls"] == 1


async def test_the_turn_cap_the_parent_sets_bounds_the_child(
    server_factory, workspace: Path, agents_dir: Path
):
    """R-T11: "turn limit set by the parent"; seed 000: "max_turns … 只在子代理场景由定义或父代理填充"."""
    (workspace / "a.txt").write_text("a\n")
    parent = scripted(
        {"tool_calls": [task("t1", "explorer", "read twice", max_turns=1)]}, {"text": "capped"}, NEVER
    )
    child = scripted(
        {"tool_calls": [tool_call("read_file", "c1", path="a.txt")]},
        {"tool_calls": [tool_call("read_file", "c2", path="a.txt")]},
        NEVER,
    )
    async with served_session(
        server_factory, workspace, RoutedProvider(parent, {"EXPLORER": child}), agents_dir=agents_dir
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        assert len(child.requests) == 1  # the cap of 1 round ends the child without sampling again
        final = final_tool_updates(client, sid)["t1"]
        assert final["status"] == "failed"
        assert final["rawOutput"]["status"] == "max_turns_reached"
        assert statuses(client, sid, "t1") == ["running", "max_turns_reached"]


async def test_background_child_reports_through_task_output_and_its_live_usage_is_incomplete(
    server_factory, workspace: Path, agents_dir: Path
):
    """R-T11: "foreground and background (`run_in_background`, result via `task_output`)";
    seed 000: "当失败发生在仍存活的后台子代理身上时（background_live），只标'报告不完整'——花费稍后自然入账，
    不必标脏"."""
    parent = scripted(
        {"tool_calls": [task("t1", "waiter", "compute", description="compute", run_in_background=True)]},
        {"text": "Started it."},
        {"tool_calls": [tool_call("task_output", "t2", task_id="agent-1")]},
        {"text": "It said 7."},
        NEVER,
    )
    child = GatedProvider(scripted({"text": "Background result: 7"}, NEVER), hold={0})
    # The user asks after the child ended (an idle session waking by itself: test_background_wake.py).
    async with served_session(
        server_factory,
        workspace,
        RoutedProvider(parent, {"WAITER": child}),
        agents_dir=agents_dir,
        wake_on_task_finish=False,
    ) as (_, client, sid):
        first = await client.call("session/prompt", text_prompt(sid, "start it"))
        await child.held(0)

        assert first["stopReason"] == "end_turn"
        assert first["_meta"]["agentd"]["usage"]["incomplete"] is True
        assert tool_results(parent.requests[1])[0].startswith("Started agent-1 (waiter) in the background")
        live = (await client.call("_agentd/usage/get", {"sessionId": sid}))["session"]
        assert live["incomplete"] is True and not live["dirty"]
        assert "subagent:waiter/primary" not in live["byLane"]

        child.release(0)
        await until(lambda: events(client, sid, "background_task"), what="the child's end")
        (done,) = events(client, sid, "background_task")
        assert (done["taskId"], done["taskKind"], done["status"]) == ("agent-1", "agent", "completed")
        settled = (await client.call("_agentd/usage/get", {"sessionId": sid}))["session"]
        assert "incomplete" not in settled
        assert settled["byLane"]["subagent:waiter/primary"]["calls"] == 1

        second = await client.call("session/prompt", text_prompt(sid, "what did it say?"))

        assert second["stopReason"] == "end_turn"
        reminder = parent.requests[2].messages[-1].content
        assert "Background agent agent-1 has finished" in reminder and 'task_id "agent-1"' in reminder
        assert "Task: compute" in reminder
        output = tool_results(parent.requests[3])[-1]
        assert output.startswith("Background result: 7") and "ended completed" in output
        assert statuses(client, sid, "t1") == ["running", "completed"]
        assert_valid_frames(client)


async def test_a_running_background_child_keeps_its_session_from_being_evicted(
    server_factory, workspace: Path, agents_dir: Path
):
    """R-T11 background children: an idle session (no client, no turn) is evicted, which
    would cancel its children — so a session whose background child still runs is not idle;
    once the child has ended it is evicted as usual."""
    parent = scripted(
        {"tool_calls": [task("t1", "waiter", "compute", run_in_background=True)]},
        {"text": "Started it."},
        NEVER,
    )
    child = GatedProvider(scripted({"text": "Background result: 7"}, NEVER), hold={0})
    routed = RoutedProvider(parent, {"WAITER": child})
    async with server_factory(routed, agents_dir=agents_dir, wake_on_task_finish=False) as server:
        manager = server.app.state.agentd.manager
        client = await server.client()
        sid = await new_session(client, workspace)
        first = await client.call("session/prompt", text_prompt(sid, "start it"))
        assert first["stopReason"] == "end_turn"
        await child.held(0)
        await client.call("_agentd/session/detach", {"sessionId": sid})

        assert await manager.evict_idle(0.0) == []  # the child still runs
        actor = manager.live_actor(sid)
        assert actor is not None and actor.loop_state.subagents.running_background() == ["agent-1"]

        child.release(0)
        await until(lambda: not actor.loop_state.subagents.running_background(), what="the child's end")
        assert await manager.evict_idle(0.0) == [sid]
        await client.close()


async def test_cancel_of_the_parent_cancels_foreground_and_background_children(
    server_factory, workspace: Path, agents_dir: Path
):
    """R-T11: "cancel of the parent cancels children" (both the child the parent waits for
    and the background child its turn started)."""
    parent = scripted(
        {"tool_calls": [task("t1", "waiter", "run beside", run_in_background=True)]},
        {"tool_calls": [task("t2", "sleeper", "run inside")]},
        NEVER,
    )
    background = GatedProvider(scripted({"text": "never delivered"}, NEVER), hold={0})
    foreground = GatedProvider(scripted({"text": "never delivered"}, NEVER), hold={0})
    provider = RoutedProvider(parent, {"WAITER": background, "SLEEPER": foreground})
    async with served_session(server_factory, workspace, provider, agents_dir=agents_dir) as (_, client, sid):
        prompt = asyncio.create_task(client.call("session/prompt", text_prompt(sid, "go")))
        await background.held(0)
        await foreground.held(0)
        await cancel(client, sid)
        result = await prompt

        assert result["stopReason"] == "cancelled"
        assert statuses(client, sid, "t2") == ["running", "cancelled"]
        assert final_tool_updates(client, sid)["t2"]["status"] == "failed"
        await until(lambda: events(client, sid, "background_task"), what="the background child's end")
        (done,) = events(client, sid, "background_task")
        assert (done["taskId"], done["status"]) == ("agent-1", "killed")
        assert statuses(client, sid, "t1") == ["running", "cancelled"]
        assert len(background.requests) == len(foreground.requests) == 1


async def test_subagent_stop_hooks_ask_when_the_child_would_stop(
    server_factory, workspace: Path, agents_dir: Path, tmp_path: Path
):
    """R-T11: "`SubagentStop` hooks"; seed 001: "Stop 检查调用用户/客户端注册的 Stop（主 session）或
    SubagentStop（子 agent session）类 hook" — a block sends the child back to work."""
    sub_hook = CommandHook(tmp_path, "sub", block_first({"decision": "block", "reason": "check twice"}))
    stop_hook = CommandHook(tmp_path, "main", answer({"decision": "allow"}))
    hooks = tmp_path / "hooks.toml"
    hooks.write_text(
        f"[[subagent_stop]]\ncommand = {sub_hook.command!r}\n\n[[stop]]\ncommand = {stop_hook.command!r}\n"
    )
    parent = scripted({"tool_calls": [task("t1", "explorer", "answer")]}, {"text": "done"}, NEVER)
    child = scripted({"text": "first try"}, {"expect": "check twice", "text": "second try"}, NEVER)
    async with served_session(
        server_factory,
        workspace,
        RoutedProvider(parent, {"EXPLORER": child}),
        agents_dir=agents_dir,
        hooks_file=hooks,
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        calls = sub_hook.calls()
        assert [c["reentries"] for c in calls] == [0, 1]
        assert {c["event"] for c in calls} == {"subagent_stop"}
        assert {(c["agent"], c["taskId"], c["parentToolCallId"], c["depth"]) for c in calls} == {
            ("explorer", "agent-1", "t1", 1)
        }
        assert calls[0]["lastMessage"] == "first try" and calls[0]["sessionId"] == sid
        assert [c["event"] for c in stop_hook.calls()] == ["stop"]  # the session's agent only
        assert tool_results(parent.requests[1]) == ["second try"]


async def test_a_spawn_beyond_the_concurrency_limit_is_refused(
    server_factory, workspace: Path, agents_dir: Path
):
    """R-T11: "depth and concurrency limits" — one more child than allowed is a readable
    tool error, and the running child is unaffected."""
    parent = scripted(
        {"tool_calls": [task("t1", "waiter", "first", run_in_background=True)]},
        {"tool_calls": [task("t2", "explorer", "second")]},
        {"text": "ok"},
        NEVER,
    )
    background = GatedProvider(scripted({"text": "first done"}, NEVER), hold={0})
    explorer = scripted(NEVER)
    provider = RoutedProvider(parent, {"WAITER": background, "EXPLORER": explorer})
    async with served_session(
        server_factory, workspace, provider, agents_dir=agents_dir, subagent_max_concurrent=1
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        refused = final_tool_updates(client, sid)["t2"]
        assert refused["status"] == "failed"
        assert "1 sub-agents are already running (the limit is 1)" in tool_results(parent.requests[2])[-1]
        assert explorer.requests == []
        background.release(0)
        await until(lambda: events(client, sid, "background_task"), what="the first child's end")
        assert events(client, sid, "background_task")[0]["status"] == "completed"


async def test_a_childs_permission_request_goes_through_the_sessions_permission_flow(
    server_factory, workspace: Path, agents_dir: Path
):
    """R-T11 design: "permission requests of the child go through the parent session's
    normal permission flow" — seed 000 pattern two: "审批熔断" holds for a child too."""
    parent = scripted({"tool_calls": [task("t1", "writer", "write it")]}, {"text": "written"}, NEVER)
    child = scripted(
        {"tool_calls": [tool_call("write_file", "c1", path="out.txt", content="from the child\n")]},
        {"text": "wrote out.txt"},
        NEVER,
    )
    async with server_factory(RoutedProvider(parent, {"WRITER": child}), agents_dir=agents_dir) as server:
        client = await server.client()
        client.on_request = allow()
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        (asked,) = [r for r in client.server_requests if r["method"] == "session/request_permission"]
        assert asked["params"]["sessionId"] == sid
        assert asked["params"]["toolCall"]["toolCallId"] == "c1"
        assert (workspace / "out.txt").read_text() == "from the child\n"
        assert tool_results(parent.requests[1]) == ["wrote out.txt"]
        await client.close()


async def test_a_child_with_an_output_schema_answers_its_parent_in_that_schema(
    server_factory, workspace: Path, agents_dir: Path
):
    """R-T11 with the definition's completion requirement and output schema; seed 000:
    "完成契约多用于子代理" and "比如子代理必须调 StructuredOutput 汇报结果"."""
    parent = scripted({"tool_calls": [task("t1", "reporter", "count")]}, {"text": "n is 7"}, NEVER)
    child = scripted({"tool_calls": [tool_call("StructuredOutput", "c1", n=7)]}, NEVER)
    async with served_session(
        server_factory, workspace, RoutedProvider(parent, {"REPORTER": child}), agents_dir=agents_dir
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        assert "StructuredOutput" in [t.name for t in child.requests[0].tools]
        assert len(child.requests) == 1
        assert tool_results(parent.requests[1]) == ['{"n": 7}']
        assert "structuredOutput" not in result["_meta"]["agentd"]  # the child's, not the prompt's
