"""Local commands (R-S6): a prompt that starts with `/` and names a builtin runs here,
without sampling the model, and ends the turn. They are advertised to clients with ACP
`available_commands_update`."""

from __future__ import annotations

from dataclasses import dataclass
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


def parse_local(text: str) -> tuple[LocalCommand, str] | None:
    """(command, argument text) when `text` invokes a builtin; None for anything else."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    name, _, arg = stripped[1:].partition(" ")
    command = BUILTINS.get(name)
    return (command, arg.strip()) if command else None


def available_commands() -> list[dict[str, Any]]:
    out = []
    for c in BUILTINS.values():
        entry: dict[str, Any] = {"name": c.name, "description": c.description}
        if c.hint:
            entry["input"] = {"hint": c.hint}
        out.append(entry)
    return out


def help_text() -> str:
    lines = [f"/{c.name}{' <' + c.hint + '>' if c.hint else ''} — {c.description}" for c in BUILTINS.values()]
    return "Commands:\n" + "\n".join(lines)
