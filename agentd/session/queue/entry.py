"""One entry of a session's prompt queue (a prompt, a compaction job, a local or `!`
command, agentd/session/queue/prompt_queue.py), its id, the client's requestId it answers
to, and the entries of a stored queue read back after a restart."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter

from agentd.core import prompt_text, random_hex
from agentd.protocol import ContentBlock, TextContent
from agentd.session.command_syntax import Skill
from agentd.session.commands import Prompt, PromptDone
from agentd.session.queue.ops import QueueKind, prompt_kind

log = logging.getLogger(__name__)

CONTENT_BLOCKS: TypeAdapter[list[ContentBlock]] = TypeAdapter(list[ContentBlock])


@dataclass
class QueuedPrompt:
    id: str
    command: Prompt
    kind: QueueKind = QueueKind.PROMPT
    # Repeats of the same `_meta.agentd.requestId` wait on the same turn (idempotency).
    waiters: list[asyncio.Future[PromptDone]] = field(default_factory=list)
    result: PromptDone | None = None
    version: int = 1
    owner: str = "local"
    last_editor: str = "local"
    held_until: float | None = None
    send_now: bool = False
    # The writer's ticket when it was queued: its ack (and a repeat's) waits for the
    # writes from there on (`EventWriter.committed`).
    since: int = 0
    # A compaction job asked for while this turn ran: that turn compacts before its next
    # request, and the job is dropped once it did (it stays, and runs, if the turn ended
    # first or the server died).
    for_turn: str | None = None

    @property
    def text(self) -> str:
        return prompt_text(self.command.blocks)

    def set_text(self, text: str) -> None:
        self.command.blocks = [TextContent(text=text)]


def new_id(prefix: str) -> str:
    # 20 random hex digits, as uuid4().hex[:20] gave (less its fixed version digit) without
    # building a UUID object per id (three per turn); unique, not secret (agentd/core/ids.py:
    # no system call per id).
    return f"{prefix}_{random_hex(10)}"


def request_id_of(meta: dict[str, Any]) -> str | None:
    """The client's idempotency key, `_meta.agentd.requestId` (R-S3)."""
    value = meta.get("requestId")
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class Restored:
    entry: QueuedPrompt
    position: int
    request_id: str | None


def restore_entries(
    session_id: str, stored: list[dict[str, Any]], skills: dict[str, Skill] | None = None
) -> list[Restored]:
    """Queued prompts of a previous run, with their stored positions; their original
    requests are gone, so their ends are reported as events only. Unreadable rows are dropped.
    Each is classified from its text again (`prompt_kind`), as when it was queued."""
    loop = asyncio.get_running_loop()
    out: list[Restored] = []
    for item in stored:
        try:
            blocks = CONTENT_BLOCKS.validate_python(item["blocks"])
        except Exception:
            log.warning("session %s: dropping an unreadable queued prompt %s", session_id, item.get("id"))
            continue
        owner = item.get("owner", "local")
        cmd = Prompt(blocks, loop.create_future(), meta=dict(item.get("meta") or {}), principal=owner)
        compact = item.get("kind") == QueueKind.COMPACT.value  # a job: it has no text to classify
        entry = QueuedPrompt(
            item["id"],
            cmd,
            kind=QueueKind.COMPACT if compact else prompt_kind(prompt_text(blocks), skills or {}),
            version=int(item.get("version", 1)),
            owner=owner,
            last_editor=item.get("lastEditor", "local"),
            send_now=bool(item.get("sendNow", False)),
        )
        # The requestId a stored row answers to: its column, else its meta.
        request_id = item.get("requestId") or request_id_of(cmd.meta)
        out.append(Restored(entry, int(item.get("position", len(out))), request_id))
    return out


__all__ = ["CONTENT_BLOCKS", "QueuedPrompt", "Restored", "new_id", "request_id_of", "restore_entries"]
