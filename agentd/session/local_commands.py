"""Local commands (R-S6): a prompt that starts with `/` and names a builtin runs here,
without sampling the model, and ends the turn; `!cmd` and skills are recognised here too.
They are advertised to clients (`available_commands`; the transport renders them as ACP
`available_commands_update`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agentd.core.modes import PermissionMode
from agentd.loop.compaction import CompactionReason
from agentd.loop.context import TurnContext
from agentd.loop.goal import GoalState
from agentd.loop.prompt import prompt_text
from agentd.loop.react_base import run_compaction
from agentd.loop.turn_state import TurnState
from agentd.session.errors import SessionError
from agentd.session.queue_ops import QueueKind
from agentd.session.rewind import rewind, rewindable_turns

if TYPE_CHECKING:  # the actor runs its builtins here (same package)
    from agentd.session.actor import SessionActor


@dataclass(frozen=True)
class LocalCommand:
    name: str
    description: str
    hint: str | None = None  # what the text after the name means, when it takes any


BUILTINS: dict[str, LocalCommand] = {
    c.name: c
    for c in (
        LocalCommand("help", "List the available commands"),
        LocalCommand("compact", "Summarise older history now to free context"),
        LocalCommand("mode", "Show or set the permission mode", "default | accept_edits | bypass | plan"),
        LocalCommand("plan", "Turn plan mode (read-only, whatever the mode) on or off", "on | off | status"),
        LocalCommand("model", "Show or set the session's model", "model name"),
        LocalCommand("goal", "Set, show or clear the session's goal", "objective | status | clear"),
        LocalCommand("queue", "Show the prompts waiting in the queue"),
        LocalCommand("usage", "Show token usage and cost of this session"),
        LocalCommand("clear", "Start a fresh context (the history stays in the session log)"),
        LocalCommand(
            "rewind", "Undo the last turns' file edits and conversation", "N turns back (default 1) | turn id"
        ),
    )
}


@dataclass(frozen=True)
class Skill:
    """A markdown file in the skills folder: `/name args` becomes an ordinary prompt."""

    name: str
    description: str
    body: str

    def expand(self, arguments: str) -> str:
        if "$ARGUMENTS" in self.body:
            return self.body.replace("$ARGUMENTS", arguments)
        return f"{self.body}\n\n{arguments}".strip()


def load_skills(folder: Path | None) -> dict[str, Skill]:
    """`<name>.md` files; an optional first line `description: ...` describes the skill."""
    skills: dict[str, Skill] = {}
    if folder is None or not folder.is_dir():
        return skills
    for path in sorted(folder.glob("*.md")):
        name = path.stem
        if name in BUILTINS or not name.replace("-", "").replace("_", "").isalnum():
            continue  # builtins win; odd names cannot be typed as commands
        text = path.read_text(errors="replace").strip()
        description = f"Skill {name}"
        first, _, rest = text.partition("\n")
        if first.lower().startswith("description:"):
            description, text = first.split(":", 1)[1].strip(), rest.strip()
        skills[name] = Skill(name, description, text)
    return skills


def expand_skill(text: str, skills: Mapping[str, Skill]) -> str | None:
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    name, _, arg = stripped[1:].partition(" ")
    skill = skills.get(name)
    return skill.expand(arg.strip()) if skill else None


def parse_bang(text: str) -> str | None:
    """`!cmd` runs `cmd` in the shell directly (permission rules apply)."""
    stripped = text.strip()
    return stripped[1:].strip() or None if stripped.startswith("!") else None


def parse_local(text: str) -> tuple[LocalCommand, str] | None:
    """(command, argument text) when `text` invokes a builtin; None for anything else."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    name, _, arg = stripped[1:].partition(" ")
    command = BUILTINS.get(name)
    return (command, arg.strip()) if command else None


def prompt_kind(text: str, skills: Mapping[str, Skill]) -> QueueKind:
    """What a prompt's text runs as, decided when it is queued (and again when it is
    edited): a builtin `/command`, a `!cmd`, a skill, or plain text. Queue operations
    read it — only plain prompts may be combined (R-S3) — so a command that waits in the
    queue stays a command."""
    if parse_local(text) is not None:
        return QueueKind.LOCAL
    if parse_bang(text) is not None:
        return QueueKind.BANG
    if expand_skill(text, skills) is not None:
        return QueueKind.SKILL
    return QueueKind.PROMPT


@dataclass(frozen=True)
class Advertised:
    """A command clients may offer their user (skills first, then the builtins)."""

    name: str
    description: str
    hint: str | None = None  # what the text after the name means


def available_commands(skills: dict[str, Skill] | None = None) -> list[Advertised]:
    out = [Advertised(s.name, s.description, "what to apply it to") for s in (skills or {}).values()]
    out += [Advertised(c.name, c.description, c.hint) for c in BUILTINS.values()]
    return out


def help_text() -> str:
    lines = [f"/{c.name}{' <' + c.hint + '>' if c.hint else ''} — {c.description}" for c in BUILTINS.values()]
    return "Commands:\n" + "\n".join(lines)


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


async def run_local_command(actor: SessionActor, ctx: TurnContext, name: str, arg: str) -> str:
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
            changed = await run_compaction(ctx, TurnState(), CompactionReason.REQUESTED)
            return "Compacted the conversation." if changed else "Nothing old enough to compact."
        case "rewind":
            return await rewind_command(actor, arg)
    raise ValueError(f"Unknown command /{name}.")


async def rewind_command(actor: SessionActor, arg: str) -> str:
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
