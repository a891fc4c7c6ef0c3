"""The reminders a turn opens with (L2) and the tool-set reminder before a sampling (L3),
as 001 places them (issue 30 item 7). Pure decisions over typed state; the session and the
loop only gather the state and write what comes back.

001, L2: "注入一批 reminder（MCP、plan mode、任务恢复、workflow 状态、中断提示等）" — at a
turn's start, in that order, next to the turn's user message. 001, L3 step 2: "如有必要，告诉
模型当前 MCP 服务器/工具集合发生了什么变化的 system-reminder" — before a sampling whose tool
set differs from the one the model last saw. Each is `<system-reminder>` text in a user
message (001: "<system-reminder> 标签会作为某条 user content 里的文本").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from agentd.core import EndReason, Message, OutcomeKind, Reason
from agentd.loop.reminders import system_reminder

PLAN_MODE_TEXT = (
    "Plan mode is on: read, search and think, but do not edit files or run commands that change "
    "anything (such calls are refused). Finish by presenting your plan."
)
TASK_RECOVERY_TEXT = (
    "Your previous turn was cut off (the server stopped or restarted) before it finished; tool "
    "calls still running then ended interrupted. Check the state of the workspace before you "
    "rely on that work."
)
INTERRUPTION_TEXT = (
    "The user interrupted your previous turn. Do not resume that work unless this message asks you to."
)

# The marker of the messages these reminders are written in (agentd's own, never sent).
REMINDER_TAG = "system_reminder"

MAX_LISTED = 40  # names listed per reminder: a server with 500 tools must not flood the context


class ReminderKind(StrEnum):
    MCP = "mcp"  # the session's MCP servers (first turn with them, or a new set)
    PLAN_MODE = "plan_mode"  # the plan gate is on: read and plan, change nothing
    TASK_RECOVERY = "task_recovery"  # the previous turn was cut off by a restart or shutdown
    WORKFLOW = "workflow"  # an unfinished goal or todo list carries over into this turn
    INTERRUPTION = "interruption"  # the user cancelled the previous turn
    TOOLSET_CHANGED = "toolset_changed"  # L3: the tools offered differ from the last request's
    PROMPT_HOOK = "prompt_hook"  # context a user_prompt_submit hook added


class PreviousEnd(StrEnum):
    """How the session's previous model turn ended, as far as the next turn should know."""

    NORMAL = "normal"
    USER_CANCELLED = "user_cancelled"
    CUT_OFF = "cut_off"  # interrupted by a shutdown or a crash (closed on restart)


@dataclass(frozen=True)
class Reminder:
    kind: ReminderKind
    text: str  # without the <system-reminder> tags

    def render(self) -> str:
        return system_reminder(self.text)

    def as_data(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "text": self.text}


@dataclass(frozen=True)
class McpServerState:
    name: str
    tools: tuple[str, ...]


@dataclass(frozen=True)
class OpeningState:
    """What the opening reminders are decided on, taken when the turn starts."""

    plan_mode: bool = False
    mcp_servers: tuple[McpServerState, ...] = ()
    mcp_announced: frozenset[str] = frozenset()  # the server names the model was last told
    previous_end: PreviousEnd = PreviousEnd.NORMAL
    goal: tuple[str, str] | None = None  # (objective, status) of an unfinished goal
    open_todos: tuple[str, ...] = ()
    # The tools this turn offers and those of the last request (None: no request yet). A set
    # changed between turns (another agent, other MCP servers) is told here, before the prompt.
    tools: frozenset[str] = frozenset()
    seen_tools: frozenset[str] | None = None


@dataclass(frozen=True)
class TurnOpening:
    """A user prompt's turn as it opened: the prompt, where the turn's messages begin in the
    conversation (a blocked prompt is taken out from there), the reminders written first."""

    prompt: str
    prompt_id: str
    index: int
    reminders: tuple[Reminder, ...] = ()
    told_before: ReminderMemory | None = None  # the memory before this opening (a block restores it)


@dataclass(frozen=True)
class LiveTools:
    """The session's MCP servers as they are now: their tools by name, and the server names."""

    tools: Mapping[str, Any]
    servers: frozenset[str]


NO_SERVERS: frozenset[str] = frozenset()
NO_LIVE_TOOLS = LiveTools(MappingProxyType({}), NO_SERVERS)  # a session without MCP connections


@dataclass
class ReminderMemory:
    """Per session, in memory: what the model has been told (a restart forgets it, and so do
    the MCP servers, which belong to connections)."""

    mcp_announced: frozenset[str] = frozenset()
    seen_tools: frozenset[str] | None = None  # the tool names of the last request; None: none yet
    previous_end: PreviousEnd = PreviousEnd.NORMAL

    def copy(self) -> ReminderMemory:
        return ReminderMemory(self.mcp_announced, self.seen_tools, self.previous_end)

    def restore(self, other: ReminderMemory) -> None:
        self.mcp_announced, self.seen_tools, self.previous_end = (
            other.mcp_announced,
            other.seen_tools,
            other.previous_end,
        )


def previous_end_of(kind: OutcomeKind, reason: Reason | None) -> PreviousEnd:
    """What the next turn is told about how this one ended."""
    if kind is OutcomeKind.CANCELLED and reason == EndReason.USER_CANCELLED:
        return PreviousEnd.USER_CANCELLED
    if kind is OutcomeKind.INTERRUPTED or reason == EndReason.SERVER_SHUTDOWN:
        return PreviousEnd.CUT_OFF
    return PreviousEnd.NORMAL


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:MAX_LISTED])
    more = len(names) - MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def opening_reminders(state: OpeningState) -> tuple[Reminder, ...]:
    """The reminders a turn opens with, in 001's order (MCP, plan mode, task recovery,
    workflow state, interruption); each only when there is something to say. A tool set that
    changed since the last request follows the MCP reminder (which covers it when it fires)."""
    out: list[Reminder] = []
    # (no server now nor announced — most sessions — is no change: no set built to say so)
    named = {s.name for s in state.mcp_servers} if state.mcp_servers or state.mcp_announced else None
    if named is not None and named != state.mcp_announced:
        lines = [f"- {s.name}: {_names(s.tools) or 'no tools'}" for s in state.mcp_servers]
        gone = sorted(state.mcp_announced - named)
        text = "MCP servers connected to this session and their tools:\n" + "\n".join(lines) if lines else ""
        if gone:
            text += ("\n" if text else "") + f"No longer connected (their tools are gone): {', '.join(gone)}."
        out.append(Reminder(ReminderKind.MCP, text))
    elif (changed := toolset_reminder(state.seen_tools, state.tools)) is not None:
        out.append(changed)
    if state.plan_mode:
        out.append(Reminder(ReminderKind.PLAN_MODE, PLAN_MODE_TEXT))
    if state.previous_end is PreviousEnd.CUT_OFF:
        out.append(Reminder(ReminderKind.TASK_RECOVERY, TASK_RECOVERY_TEXT))
    if state.goal is not None or state.open_todos:
        parts = []
        if state.goal is not None:
            objective, status = state.goal
            parts.append(f"The session's goal ({status}): {objective}")
        if state.open_todos:
            parts.append(f"Open todo items: {_names(state.open_todos)}")
        out.append(Reminder(ReminderKind.WORKFLOW, "\n".join(parts)))
    if state.previous_end is PreviousEnd.USER_CANCELLED:
        out.append(Reminder(ReminderKind.INTERRUPTION, INTERRUPTION_TEXT))
    return tuple(out)


def opening_message(reminders: Sequence[Reminder]) -> str | None:
    """The reminders as one user message's text (None when there are none)."""
    return "\n".join(r.render() for r in reminders) if reminders else None


def reminder_message(text: str) -> Message:
    """A user message of reminder text, tagged as agentd's own (a transcript of what the user
    and the agent said leaves it out)."""
    return Message(role="user", content=text, tag=REMINDER_TAG)


def toolset_reminder(seen: frozenset[str] | None, current: frozenset[str]) -> Reminder | None:
    """The L3 pre-sampling reminder when the tools offered changed since the last request the
    model saw; None for the session's first request (it sees the whole set) or no change."""
    if seen is None or seen == current:
        return None
    added, removed = sorted(current - seen), sorted(seen - current)
    parts = ["The tools available to you changed since your last step."]
    if added:
        parts.append(f"New: {_names(added)}.")
    if removed:
        parts.append(f"No longer available (do not call them): {_names(removed)}.")
    return Reminder(ReminderKind.TOOLSET_CHANGED, " ".join(parts))


def with_live_tools(
    tools: Mapping[str, Any], stale: frozenset[str], live: Mapping[str, Any]
) -> dict[str, Any]:
    """`tools` with the live part (the session's MCP tools, `stale` being the names that
    part had before) replaced by what it is now."""
    return {**{n: t for n, t in tools.items() if n not in stale}, **live}
