"""The syntax of what a prompt may be besides plain text (R-S6): a builtin `/command`, a
`!cmd`, a skill; the builtins' table and what is advertised to clients. Light on purpose:
the queue classifies every prompt with it, and a started, idle server loads the queue but
not the turn machinery that runs the commands (`local_commands.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


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
