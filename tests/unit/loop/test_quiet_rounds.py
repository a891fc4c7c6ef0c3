"""What a round (and a turn's end) asks of features a session is not using — background
tasks, sub-agents, MCP tools (issue 32: a trivial turn paid for each of them) — answers "none"
without building anything, and the moment one is used the next round sees it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentd.core import Message, TaskCompletion
from agentd.core.task_notice import TaskEnd, TaskKind
from agentd.loop.context import TurnContext
from agentd.loop.react.run import refresh_toolset
from agentd.loop.react.state import TurnState
from agentd.loop.session_state import SessionLoopState
from agentd.loop.subagents import Subagents
from agentd.loop.subagents.registry import _Child
from agentd.loop.task_notices import drain_task_notices
from agentd.loop.turn import run_turn
from agentd.loop.turn_reminders import NO_LIVE_TOOLS, LiveTools, ReminderMemory
from agentd.tools.shell.background import BackgroundTasks
from tests.support.turn_context import bare_context


def context(messages: list[Message], **fields: Any) -> TurnContext:
    return bare_context(messages, turn_id="turn-1", **fields)


def finished_child(subagents: Subagents, child_id: str, *, background: bool, done: bool) -> _Child:
    finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    if done:
        finished.set_result(None)
    child = _Child(child_id, "helper", "look around", "turn-1", background, asyncio.Event(), finished)
    subagents._children[child_id] = child
    return child


def completion(task_id: str, end: TaskEnd) -> TaskCompletion:
    return TaskCompletion(task_id, TaskKind.BASH, "make", end, f"{end.value}", None, "task_output")


async def test_no_task_announces_nothing_and_each_source_is_heard_once_it_has_one(tmp_path: Path) -> None:
    messages: list[Message] = []
    background = BackgroundTasks()
    subagents = Subagents(agents={}, run_turn=run_turn)
    ctx = context(messages, background=background, subagents=subagents)
    try:
        assert drain_task_notices(ctx) == [] and messages == []  # nothing ran: nothing said
        assert background.unreported() == [] and subagents.unreported() == []

        # An earlier life's lost task alone (no task of this life), then one of each: each
        # announced on the next round after an empty one, background tasks first.
        background.earlier.add(completion("bg-0", TaskEnd.INTERRUPTED), announce=True)
        assert [c.task_id for c in drain_task_notices(ctx)] == ["bg-0"] and len(messages) == 1
        messages.clear()
        background.earlier.add(completion("bg-1", TaskEnd.INTERRUPTED), announce=True)
        task_id = background.start("true", tmp_path)
        await background._tasks[task_id].finished
        finished_child(subagents, "agent-1", background=True, done=True)
        assert [c.task_id for c in background.unreported()] == ["bg-1", task_id]
        assert [c.task_id for c in subagents.unreported()] == ["agent-1"]

        done = drain_task_notices(ctx)
        assert [c.task_id for c in done] == ["bg-1", task_id, "agent-1"]
        assert len(messages) == 1 and all(t in messages[0].content for t in ("bg-1", task_id, "agent-1"))
        assert drain_task_notices(ctx) == [] and len(messages) == 1  # each once
        assert background.unreported() == [] and subagents.unreported() == []
    finally:
        await background.close()


async def test_a_sub_agent_turn_hears_only_its_shell_tasks() -> None:
    subagents = Subagents(agents={}, run_turn=run_turn)
    finished_child(subagents, "agent-1", background=True, done=True)
    child = context([], subagents=subagents, depth=1)
    assert drain_task_notices(child) == []
    assert [c.task_id for c in subagents.take_completions()] == ["agent-1"]  # left for the session's agent


async def test_a_turn_with_a_live_background_child_says_so() -> None:
    subagents = Subagents(agents={}, run_turn=run_turn)
    assert not subagents.live_from("turn-1")  # no child at all
    child = finished_child(subagents, "agent-1", background=True, done=False)
    assert subagents.live_from("turn-1") and not subagents.live_from("turn-2")
    child.parent_turn_id = "turn-1/agent-0"  # started by one of the turn's children
    assert subagents.live_from("turn-1")
    child.finished.set_result(None)
    assert not subagents.live_from("turn-1")


def test_no_mcp_connection_keeps_the_turns_tool_set_and_its_arrival_is_told() -> None:
    """Without MCP tools before or now the round keeps the turn's tool dict as it is; tools
    that arrive mid-turn join it (and the model is told), and tools that leave go."""
    live: list[LiveTools] = [NO_LIVE_TOOLS]
    messages: list[Message] = []
    ctx = context(messages, live_tools=lambda: live[0], reminders=ReminderMemory())
    state = TurnState.for_limits(ctx.limits)
    tools = ctx.tools

    refresh_toolset(ctx, state)  # the session's first request: it sees the whole set
    assert ctx.tools is tools and ctx.reminders.seen_tools == frozenset({"bash"}) and messages == []
    refresh_toolset(ctx, state)
    assert ctx.tools is tools and messages == [] and state.reminders == []

    live[0] = LiveTools({"files__read": object()}, frozenset({"files"}))
    refresh_toolset(ctx, state)
    assert set(ctx.tools) == {"bash", "files__read"} and ctx.live_names == frozenset({"files__read"})
    assert len(messages) == 1 and "New: files__read." in messages[0].content
    assert ctx.reminders.mcp_announced == frozenset({"files"})

    live[0] = NO_LIVE_TOOLS  # the connection went
    refresh_toolset(ctx, state)
    assert set(ctx.tools) == {"bash"} and ctx.live_names == frozenset()
    assert len(messages) == 2
    assert "No longer available (do not call them): files__read." in messages[1].content


def test_a_session_without_mcp_shares_one_read_only_answer() -> None:
    now = SessionLoopState.live_tools(lambda: None)
    assert now() is NO_LIVE_TOOLS and now() is now()
    with pytest.raises(TypeError):
        NO_LIVE_TOOLS.tools["x"] = 1  # type: ignore[index]  # shared by every session: never written
