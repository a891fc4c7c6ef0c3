"""The L2 opening reminders and the L3 tool-set reminder (issue 30 item 7), without a server.

001, L2: "注入一批 reminder（MCP、plan mode、任务恢复、workflow 状态、中断提示等）"; L3 step 2:
"如有必要，告诉模型当前 MCP 服务器/工具集合发生了什么变化的 system-reminder".
"""

from __future__ import annotations

import pytest

from agentd.core import EndReason, OutcomeKind
from agentd.loop.reminders import is_system_reminder
from agentd.loop.turn_reminders import (
    MAX_LISTED,
    McpServerState,
    OpeningState,
    PreviousEnd,
    ReminderKind,
    ReminderMemory,
    opening_message,
    opening_reminders,
    previous_end_of,
    toolset_reminder,
    with_live_tools,
)

FILES = McpServerState("files", ("files__read", "files__write"))
EVERYTHING = OpeningState(
    plan_mode=True,
    mcp_servers=(FILES,),
    previous_end=PreviousEnd.USER_CANCELLED,
    goal=("ship the release", "active"),
    open_todos=("write the changelog",),
)


def kinds(state: OpeningState) -> list[ReminderKind]:
    return [r.kind for r in opening_reminders(state)]


def test_nothing_to_say_opens_with_nothing() -> None:
    assert opening_reminders(OpeningState()) == ()
    assert opening_message(()) is None


def test_the_seeds_order_mcp_plan_recovery_workflow_interruption() -> None:
    assert kinds(EVERYTHING) == [
        ReminderKind.MCP,
        ReminderKind.PLAN_MODE,
        ReminderKind.WORKFLOW,
        ReminderKind.INTERRUPTION,
    ]
    cut_off = OpeningState(plan_mode=True, previous_end=PreviousEnd.CUT_OFF, open_todos=("x",))
    assert kinds(cut_off) == [ReminderKind.PLAN_MODE, ReminderKind.TASK_RECOVERY, ReminderKind.WORKFLOW]


def test_the_opening_is_one_user_message_of_system_reminders() -> None:
    text = opening_message(opening_reminders(EVERYTHING))
    assert text is not None
    blocks = text.split("\n<system-reminder>")
    assert len(blocks) == 4
    assert all(is_system_reminder(b if i == 0 else f"<system-reminder>{b}") for i, b in enumerate(blocks))
    assert "files: files__read, files__write" in text
    assert "Plan mode is on" in text
    assert "ship the release" in text and "write the changelog" in text
    assert "The user interrupted your previous turn" in text


def test_mcp_is_announced_once_then_again_only_when_the_servers_change() -> None:
    first = OpeningState(mcp_servers=(FILES,))
    assert kinds(first) == [ReminderKind.MCP]
    assert kinds(OpeningState(mcp_servers=(FILES,), mcp_announced=frozenset({"files"}))) == []
    web = McpServerState("web", ("web__fetch",))
    [swapped] = opening_reminders(OpeningState(mcp_servers=(web,), mcp_announced=frozenset({"files"})))
    assert "web: web__fetch" in swapped.text
    assert "No longer connected (their tools are gone): files." in swapped.text
    [gone] = opening_reminders(OpeningState(mcp_announced=frozenset({"files"})))
    assert gone.text == "No longer connected (their tools are gone): files."


@pytest.mark.parametrize(
    ("kind", "reason", "expected"),
    [
        (OutcomeKind.COMPLETED, None, PreviousEnd.NORMAL),
        (OutcomeKind.CANCELLED, EndReason.USER_CANCELLED, PreviousEnd.USER_CANCELLED),
        (OutcomeKind.CANCELLED, EndReason.PERMISSION_REJECTED, PreviousEnd.NORMAL),
        (OutcomeKind.CANCELLED, EndReason.SERVER_SHUTDOWN, PreviousEnd.CUT_OFF),
        (OutcomeKind.INTERRUPTED, EndReason.SERVER_RESTARTED, PreviousEnd.CUT_OFF),
        (OutcomeKind.MAX_TURNS_REACHED, EndReason.MAX_TURNS_REACHED, PreviousEnd.NORMAL),
    ],
)
def test_how_the_previous_turn_ended(
    kind: OutcomeKind, reason: EndReason | None, expected: PreviousEnd
) -> None:
    assert previous_end_of(kind, reason) is expected


def test_toolset_reminder_says_what_changed() -> None:
    before = frozenset({"read_file", "files__read"})
    assert toolset_reminder(None, before) is None  # the first request shows the whole set
    assert toolset_reminder(before, before) is None
    reminder = toolset_reminder(before, frozenset({"read_file", "web__fetch"}))
    assert reminder is not None and reminder.kind is ReminderKind.TOOLSET_CHANGED
    assert reminder.text == (
        "The tools available to you changed since your last step. New: web__fetch. "
        "No longer available (do not call them): files__read."
    )
    assert is_system_reminder(reminder.render())


def test_long_lists_are_bounded() -> None:
    many = frozenset(f"t{i:03}" for i in range(MAX_LISTED + 7))
    reminder = toolset_reminder(frozenset(), many)
    assert reminder is not None
    assert reminder.text.endswith("and 7 more.")
    assert f"t{MAX_LISTED:03}" not in reminder.text


def test_with_live_tools_replaces_only_the_live_part() -> None:
    tools = {"read_file": 1, "task": 2, "files__read": 3}
    assert with_live_tools(tools, frozenset({"files__read"}), {"web__fetch": 4}) == {
        "read_file": 1,
        "task": 2,
        "web__fetch": 4,
    }
    assert with_live_tools(tools, frozenset(), {}) == tools


def test_a_tool_set_changed_between_turns_is_told_in_the_opening_unless_mcp_covers_it() -> None:
    old, new = frozenset({"read_file", "bash"}), frozenset({"read_file"})
    [changed] = opening_reminders(OpeningState(tools=new, seen_tools=old))
    assert changed.kind is ReminderKind.TOOLSET_CHANGED and "bash" in changed.text
    assert opening_reminders(OpeningState(tools=new, seen_tools=None)) == ()  # a first request
    assert opening_reminders(OpeningState(tools=new, seen_tools=new)) == ()
    with_mcp = OpeningState(mcp_servers=(FILES,), tools=new | {"files__read"}, seen_tools=old)
    assert kinds(with_mcp) == [ReminderKind.MCP]


def test_a_blocked_prompt_gives_back_what_its_opening_told() -> None:
    memory = ReminderMemory(frozenset({"files"}), frozenset({"a"}), PreviousEnd.USER_CANCELLED)
    before = memory.copy()
    memory.mcp_announced, memory.seen_tools, memory.previous_end = frozenset(), None, PreviousEnd.NORMAL
    memory.restore(before)
    assert memory == ReminderMemory(frozenset({"files"}), frozenset({"a"}), PreviousEnd.USER_CANCELLED)
