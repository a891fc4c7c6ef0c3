"""The session's prompt queue as `agentd chat` knows it: the whole queue from a
`_agentd/queue/*` answer, kept current by the `queue_update` events' changes (pure
bookkeeping; docs/protocol.md "queue_update")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Entry:
    id: str
    version: int
    kind: str
    text: str
    held: bool = False

    @classmethod
    def of(cls, raw: dict[str, Any]) -> Entry:
        return cls(
            id=str(raw.get("id") or raw.get("promptId")),
            version=int(raw.get("version", 1)),
            kind=str(raw.get("kind", "prompt")),
            text=str(raw.get("text", "")),
            held=bool(raw.get("held")),
        )

    def merge(self, raw: dict[str, Any]) -> None:
        """An `updated` change: `text` only when it changed."""
        self.version = int(raw.get("version", self.version))
        self.kind = str(raw.get("kind", self.kind))
        if "text" in raw:
            self.text = str(raw["text"])
        self.held = bool(raw.get("held"))


class QueueMirror:
    def __init__(self) -> None:
        self.entries: list[Entry] = []

    def __len__(self) -> int:
        return len(self.entries)

    def replace(self, queue: list[dict[str, Any]]) -> None:
        self.entries = [Entry.of(raw) for raw in queue]

    def apply(self, changes: list[dict[str, Any]]) -> list[str]:
        """Apply one event's changes in order; the ids that left the queue."""
        gone: list[str] = []
        for change in changes:
            op = change.get("op") or change.get("type") or change.get("change")
            if op == "removed":
                gone.append(str(change.get("id")))
                self.entries = [e for e in self.entries if e.id != change.get("id")]
            elif op == "added":
                entry = Entry.of(change.get("entry") or {})
                self.entries = [e for e in self.entries if e.id != entry.id]
                self.entries.insert(
                    min(int(change.get("index", len(self.entries))), len(self.entries)), entry
                )
            elif op == "updated":
                raw = change.get("entry") or {}
                for e in self.entries:
                    if e.id == raw.get("id"):
                        e.merge(raw)
            elif op == "moved":
                by_id = {e.id: e for e in self.entries}
                order = [by_id.pop(i) for i in change.get("order") or [] if i in by_id]
                self.entries = order + list(by_id.values())
        return gone

    def at(self, number: int) -> Entry | None:
        """The entry `/queue` lists as `number` (from 1)."""
        return self.entries[number - 1] if 1 <= number <= len(self.entries) else None

    def lines(self) -> list[str]:
        out = []
        for n, e in enumerate(self.entries, 1):
            first = e.text.splitlines()[0] if e.text else ""
            more = " …" if "\n" in e.text.strip() else ""
            tags = "".join(
                f" ({t})" for t in (e.kind if e.kind != "prompt" else "", "held" if e.held else "") if t
            )
            out.append(f"  {n}. {first}{more}{tags}")
        return out
