"""Local commands (R-S6): a prompt that starts with `/` and names a builtin runs here,
without sampling the model, and ends the turn. They are advertised to clients with ACP
`available_commands_update`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


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
        LocalCommand("model", "Show or set the session's model", "model name"),
        LocalCommand("goal", "Set, show or clear the session's goal", "objective | status | clear"),
        LocalCommand("queue", "Show the prompts waiting in the queue"),
        LocalCommand("usage", "Show token usage and cost of this session"),
        LocalCommand("clear", "Start a fresh context (the history stays in the session log)"),
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


def expand_skill(text: str, skills: dict[str, Skill]) -> str | None:
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


def available_commands(skills: dict[str, Skill] | None = None) -> list[dict[str, Any]]:
    out = []
    for s in (skills or {}).values():
        out.append({"name": s.name, "description": s.description, "input": {"hint": "what to apply it to"}})
    for c in BUILTINS.values():
        entry: dict[str, Any] = {"name": c.name, "description": c.description}
        if c.hint:
            entry["input"] = {"hint": c.hint}
        out.append(entry)
    return out


def help_text() -> str:
    lines = [f"/{c.name}{' <' + c.hint + '>' if c.hint else ''} — {c.description}" for c in BUILTINS.values()]
    return "Commands:\n" + "\n".join(lines)
