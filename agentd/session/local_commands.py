"""Local commands (R-S6): a prompt that starts with `/` and names a builtin runs here,
without sampling the model, and ends the turn; `!cmd` and skills are recognised here too.
They are advertised to clients (`available_commands`; the transport renders them as ACP
`available_commands_update`)."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Protocol

from agentd.core import GoalState, PermissionMode, prompt_text
from agentd.loop import TurnContext, run_compaction
from agentd.session.changes import changes_text, session_changes
from agentd.session.command_syntax import help_text
from agentd.session.errors import SessionError
from agentd.session.rewind import RewindHost, rewind, rewindable_turns

if TYPE_CHECKING:
    from agentd.core import UsageLedger
    from agentd.session.queue import QueuedPrompt
    from agentd.tools import TodoList


class LocalCommandsHost(RewindHost, Protocol):
    """The actor as its builtins see it (a rewind's names, and `/changes` needs fewer)."""

    @property
    def model(self) -> str: ...
    @property
    def goal(self) -> GoalState | None: ...
    @property
    def queue(self) -> Collection[QueuedPrompt]: ...
    @property
    def usage(self) -> UsageLedger: ...
    @property
    def todos(self) -> TodoList: ...
    def mode(self) -> PermissionMode: ...
    def set_mode(self, mode: PermissionMode) -> None: ...
    def set_plan(self, on: bool) -> None: ...
    def set_model(self, model: str) -> None: ...
    def set_goal(self, goal: GoalState | None) -> None: ...
    def config_options(self) -> list[dict[str, Any]]: ...


def describe_plan(mode_id: PermissionMode) -> str:
    if mode_id is PermissionMode.PLAN:
        return "Plan mode is on: no edits and no commands, whatever the permission mode. /plan off ends it."
    return f"Plan mode is off (permission mode: {mode_id.value})."


def describe_goal(goal: GoalState | None) -> str:
    if goal is None:
        return "No goal is set. Use /goal <objective> to set one."
    text = f"Goal ({goal.status.value}): {goal.objective}"
    if goal.pause_reason:
        text += f"\nPaused: {goal.pause_reason}"
    if goal.user_action:
        text += f"\nNeeded from you: {goal.user_action}"
    return text


async def run_local_command(actor: LocalCommandsHost, ctx: TurnContext, name: str, arg: str) -> str:
    """Run builtin `/name arg` on the session; the text answered. A ValueError's message
    is answered too (a bad argument, an unknown command)."""
    match name:
        case "help":
            return help_text()
        case "mode":
            if arg:
                try:
                    actor.set_mode(PermissionMode(arg))
                except ValueError:
                    known = ", ".join(m.value for m in PermissionMode)
                    raise ValueError(f"Unknown mode {arg!r}; one of {known}.") from None
            return f"Permission mode: {actor.mode().value}"
        case "plan":
            if arg in ("", "on", "off"):
                actor.set_plan(arg != "off")
            elif arg != "status":
                raise ValueError(f"Unknown argument {arg!r}; /plan on, off or status.")
            return describe_plan(actor.mode())
        case "model":
            offered = next(o for o in actor.config_options() if o["id"] == "model")["options"]
            names = [o["value"] for o in offered]
            if arg and actor.services.settings.models_allow and arg not in names:
                # The operator limited the models: `/model` is no way around the picker.
                raise ValueError(f"Model {arg!r} is not offered; one of {', '.join(names)}.")
            if arg:
                actor.set_model(arg)
                return f"Model: {actor.model}"
            return f"Model: {actor.model}\nOffered: {', '.join(names)}"
        case "goal":
            if arg in ("", "status"):
                return describe_goal(actor.goal)
            if arg == "clear":
                actor.set_goal(None)
                return "Goal cleared."
            actor.set_goal(GoalState(arg))
            return f"Goal set: {arg}\nSend a prompt to start working on it."
        case "queue":
            if not actor.queue:
                return "The queue is empty."
            lines = [f"{i}. {prompt_text(q.command.blocks)[:80]}" for i, q in enumerate(actor.queue, 1)]
            return "Queued prompts:\n" + "\n".join(lines)
        case "usage":
            u = actor.usage.total
            return (
                f"Tokens: {u.input_tokens} in, {u.output_tokens} out, {u.cache_read_tokens} cache read, "
                f"{u.cache_write_tokens} cache write; cost ${u.cost:.4f} over {u.calls} calls"
                + (" (some usage could not be read)" if u.dirty else "")
            )
        case "clear":
            actor.conversation.replace([])
            actor.todos.replace([])
            await actor.files.conversation_cleared(actor.journal.seq)
            return "Context cleared. The session log keeps the history."
        case "compact":
            changed = await run_compaction(ctx)
            return "Compacted the conversation." if changed else "Nothing old enough to compact."
        case "rewind":
            return await rewind_command(actor, arg)
        case "diff":
            try:
                return changes_text(await session_changes(actor, arg or None))
            except SessionError as exc:
                raise ValueError(exc.message) from None
    raise ValueError(f"Unknown command /{name}.")


async def rewind_command(actor: LocalCommandsHost, arg: str) -> str:
    """`/rewind [N | turn id]`: files and conversation back to before the Nth last turn."""
    marks = await rewindable_turns(actor)
    if arg and not arg.isdigit():
        target = arg
    else:
        back = int(arg or "1")
        if not 1 <= back <= len(marks):
            raise ValueError(f"Cannot rewind {back} turn(s): {len(marks)} turn(s) can be rewound.")
        target = marks[-back].turn_id
    try:
        done = await rewind(actor, target, files=True)
    except SessionError as exc:
        raise ValueError(exc.message) from None
    lines = [f"Rewound to before turn {target} ({len(done['turnsUndone'])} turn(s) undone)."]
    for key, label in (("restored", "Restored"), ("removed", "Removed"), ("notRestored", "Not restorable")):
        if done[key]:
            lines.append(f"{label}: {', '.join(done[key])}")
    return "\n".join(lines)
