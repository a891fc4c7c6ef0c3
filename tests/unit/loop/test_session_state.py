"""The loop's state of a session between its turns (`SessionLoopState`, issue 27): a prompt's
opening, how the last turn ended, the `task` tool — what the session used to do itself with a
dozen loop names."""

from __future__ import annotations

from typing import Any

from agentd.agents import DEFAULT_AGENT
from agentd.core import EndReason, GoalState, Message, TurnOutcome
from agentd.loop.context import TurnContext
from agentd.loop.retry import RetryState
from agentd.loop.session_state import SessionLoopState
from agentd.loop.subagents import TASK_TOOL, Subagents
from agentd.loop.turn import run_turn
from agentd.loop.turn_reminders import PreviousEnd, ReminderKind
from agentd.protocol import TextContent
from tests.support.turn_context import bare_context


def context(messages: list[Message], **fields: Any) -> TurnContext:
    return bare_context(messages, **fields)


def loop_state(agents: dict[str, Any] | None = None) -> SessionLoopState:
    return SessionLoopState(RetryState(), Subagents(agents=agents or {}, run_turn=run_turn))


def test_a_prompt_opens_with_its_reminders_then_the_prompt() -> None:
    state = loop_state()
    state.cut_off()  # the server died mid-turn
    messages: list[Message] = []
    ctx = context(messages, goal=GoalState("ship it"), prompt_hooks=[object()])
    ctx.todos.replace([{"content": "write the changelog", "status": "pending"}])

    state.open_turn(ctx, [TextContent(text="go on")], "prompt-1", 0, plan_mode=True, mcp=None)

    assert [m.role for m in messages] == ["user", "user"]
    assert "write the changelog" in messages[0].content and messages[1].content == "go on"
    opening = ctx.opening
    assert opening is not None and (opening.prompt, opening.prompt_id, opening.index) == (
        "go on",
        "prompt-1",
        0,
    )
    assert [r.kind for r in opening.reminders] == [
        ReminderKind.PLAN_MODE,
        ReminderKind.TASK_RECOVERY,
        ReminderKind.WORKFLOW,
    ]
    # Told once: the memory moved on, and what it was before is kept (a blocked prompt restores it).
    assert opening.told_before is not None and opening.told_before.previous_end is PreviousEnd.CUT_OFF
    assert state.reminders.previous_end is PreviousEnd.NORMAL
    assert state.reminders.seen_tools == frozenset({"bash"})


def test_an_opening_keeps_what_was_told_before_only_for_a_prompt_hook_to_restore() -> None:
    """Only a prompt hook can block a prompt (`_open_turn`): without one there is nothing to
    restore and no copy; with one, the copy is the memory as it was before this opening."""
    state = loop_state()
    state.cut_off()
    plain = context([])
    state.open_turn(plain, [TextContent(text="go")], "p1", 0, plan_mode=False, mcp=None)
    assert plain.opening is not None and plain.opening.told_before is None
    assert state.reminders.previous_end is PreviousEnd.NORMAL  # told all the same

    state.cut_off()
    hooked = context([], prompt_hooks=[object()])
    state.open_turn(hooked, [TextContent(text="go")], "p2", 0, plan_mode=False, mcp=None)
    assert hooked.opening is not None and hooked.opening.told_before is not None
    assert hooked.opening.told_before.previous_end is PreviousEnd.CUT_OFF


def test_the_next_opening_says_how_the_last_turn_ended() -> None:
    state = loop_state()
    state.turn_ended(TurnOutcome.cancelled(EndReason.USER_CANCELLED))
    ctx = context([])
    state.open_turn(ctx, [TextContent(text="again")], "prompt-2", 0, plan_mode=False, mcp=None)
    assert ctx.opening is not None
    assert [r.kind for r in ctx.opening.reminders] == [ReminderKind.INTERRUPTION]


def test_the_task_tool_only_for_an_agent_that_may_use_it() -> None:
    state = loop_state(agents={"helper": DEFAULT_AGENT})
    refused = context([])
    state.equip(refused, {}, allowed=lambda name: name != TASK_TOOL)
    assert TASK_TOOL not in refused.tools and refused.subagents is state.subagents

    allowed = context([])
    state.equip(allowed, {}, allowed=lambda name: True)
    assert TASK_TOOL in allowed.tools and allowed.subagents is state.subagents

    no_agents = loop_state()
    ctx = context([])
    no_agents.equip(ctx, {}, allowed=lambda name: True)
    assert TASK_TOOL not in ctx.tools


def test_the_task_tool_is_made_once_and_bound_to_each_turn() -> None:
    """Made once while the tools it picks from and the agents are the same objects (its
    guidance and schema are theirs), bound to the turn offering it; new ones when they change."""
    state = loop_state(agents={"helper": DEFAULT_AGENT})
    available: dict[str, Any] = {"bash": object()}
    first, second = context([]), context([])
    state.equip(first, available, allowed=lambda name: True)
    tool = first.tools[TASK_TOOL]
    assert tool.parent is first  # type: ignore[attr-defined]
    state.equip(second, available, allowed=lambda name: True)
    assert second.tools[TASK_TOOL] is tool and tool.parent is second  # type: ignore[attr-defined]
    assert "helper" in tool.guidance and tool.parameters["properties"]["agent"]["enum"] == ["helper"]

    third = context([])
    state.equip(third, {"bash": object()}, allowed=lambda name: True)  # other tools: a new one
    assert third.tools[TASK_TOOL] is not tool and third.tools[TASK_TOOL].available is not available  # type: ignore[attr-defined]
    state.subagents.agents = {"helper": DEFAULT_AGENT, "other": DEFAULT_AGENT}
    fourth = context([])
    state.equip(fourth, available, allowed=lambda name: True)  # other agents: a new one
    assert fourth.tools[TASK_TOOL].parameters["properties"]["agent"]["enum"] == ["helper", "other"]


def test_an_opening_takes_the_prompts_text_when_the_caller_has_it() -> None:
    """The launch read the blocks' text already (to classify the entry): the opening takes it
    as it is — after the reminders, whatever they say — and reads the blocks when not given."""
    state = loop_state()
    state.cut_off()  # a reminder to open with
    messages: list[Message] = []
    ctx = context(messages)
    state.open_turn(ctx, [TextContent(text="go on")], "p1", 0, plan_mode=True, mcp=None, prompt="go on")
    assert messages[1].content == "go on" and ctx.opening is not None and ctx.opening.prompt == "go on"
    assert "Plan mode is on" in messages[0].content
    again: list[Message] = []
    state.open_turn(context(again), [TextContent(text="from the blocks")], "p2", 0, plan_mode=True, mcp=None)
    assert [m.content for m in again][-1] == "from the blocks"
