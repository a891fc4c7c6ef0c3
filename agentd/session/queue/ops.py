"""The prompt queue's operations (R-S3), as plain functions over the actor's deque.

Every entry has an id, a version (bumped by each edit), the principal that queued it and
its last editor. A stale `expectedVersion` or an unknown id changes nothing. Entries that
leave the queue without running (removed, merged, cleared) are answered `cancelled` with
reason `removed_from_queue` by the actor.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from agentd.session.command_syntax import Skill, expand_skill, parse_bang, parse_local

HOLD_SECONDS = 600.0  # a hold (a user editing an entry) expires after 10 minutes


class Entry(Protocol):
    id: str
    version: int
    owner: str
    last_editor: str
    held_until: float | None
    send_now: bool

    @property
    def kind(self) -> str: ...  # read-only here: a `QueueKind` is a str

    @property
    def text(self) -> str: ...

    def set_text(self, text: str) -> None: ...


class QueueKind(StrEnum):
    """What a queue entry runs as (the `kind` on the wire and in the store)."""

    PROMPT = "prompt"  # plain text: sampled by the model as it is
    COMPACT = "compact"  # a compaction job (`_agentd/session/compact` while idle)
    LOCAL = "local"  # a builtin `/command`
    BANG = "bang"  # `!cmd` run in the shell
    SKILL = "skill"  # `/skill args`: expanded into an ordinary prompt when it starts


class OpRefusal(StrEnum):
    """Why an operation changed nothing (the answer's `reason`)."""

    NOT_FOUND = "not_found"
    STALE_VERSION = "stale_version"
    NOT_EDITABLE = "not_editable"
    UNCHANGED = "unchanged"
    NOTHING_TO_COMBINE = "nothing_to_combine"
    NOT_HELD = "not_held"
    NOT_PLAIN = "not_plain"  # interject: only a plain-text prompt can join a running turn


@dataclass(frozen=True)
class OpResult:
    applied: bool
    removed: list[Any]  # entries that left the queue without running
    reason: OpRefusal | None = None


def view(queue: Iterable[Entry], now: float | None = None, *, with_text: bool = True) -> list[dict[str, Any]]:
    now = time.monotonic() if now is None else now
    out = []
    for e in queue:
        item: dict[str, Any] = {
            "id": e.id,
            "version": e.version,
            "kind": e.kind,
            "owner": e.owner,
            "lastEditor": e.last_editor,
        }
        if with_text:
            item["text"] = e.text
        if e.held_until is not None and e.held_until > now:
            item["held"] = True
        if e.send_now:
            item["sendNow"] = True
        out.append(item)
    return out


def _find(queue: deque[Any], entry_id: str) -> Any | None:
    return next((e for e in queue if e.id == entry_id), None)


def remove(queue: deque[Any], entry_id: str, expected_version: int) -> OpResult:
    e = _find(queue, entry_id)
    if e is None:
        return OpResult(False, [], OpRefusal.NOT_FOUND)
    if e.version != expected_version:
        return OpResult(False, [], OpRefusal.STALE_VERSION)
    queue.remove(e)
    return OpResult(True, [e])


def edit(queue: deque[Any], entry_id: str, expected_version: int, text: str, editor: str) -> OpResult:
    e = _find(queue, entry_id)
    if e is None:
        return OpResult(False, [], OpRefusal.NOT_FOUND)
    if e.version != expected_version:
        return OpResult(False, [], OpRefusal.STALE_VERSION)
    if e.kind == QueueKind.COMPACT:
        return OpResult(False, [], OpRefusal.NOT_EDITABLE)
    e.set_text(text)  # the caller classifies the new text again (it may be a command now)
    e.version += 1
    e.last_editor = editor
    return OpResult(True, [])


def move(queue: deque[Any], order: list[str]) -> OpResult:
    """Reorder: the named ids first, in that order; unknown ids ignored; the rest keep
    their relative order after them. (The running turn is not in the queue: it stays.)"""
    named = [e for i in order if (e := _find(queue, i)) is not None]
    seen = {id(e) for e in named}
    rest = [e for e in queue if id(e) not in seen]
    new = named + rest
    if [e.id for e in new] == [e.id for e in queue]:
        return OpResult(False, [], OpRefusal.UNCHANGED)
    queue.clear()
    queue.extend(new)
    return OpResult(True, [])


def combine(queue: deque[Any], editor: str) -> OpResult:
    """Merge the consecutive plain-text prompts at the front into the first one, joined by
    a blank line; the merged followers leave the queue. Only `PROMPT` entries are plain
    text: a `/command`, `!cmd` or skill (classified when queued) is never merged, so it
    still runs as what it is."""
    if not queue or queue[0].kind != QueueKind.PROMPT:
        return OpResult(False, [], OpRefusal.NOTHING_TO_COMBINE)
    head = queue[0]
    merged = []
    for e in list(queue)[1:]:
        if e.kind != QueueKind.PROMPT or e.held_until is not None:
            break
        merged.append(e)
    if not merged:
        return OpResult(False, [], OpRefusal.NOTHING_TO_COMBINE)
    head.set_text("\n\n".join([head.text, *(e.text for e in merged)]))
    head.version += 1
    head.last_editor = editor
    for e in merged:
        queue.remove(e)
    return OpResult(True, merged)


def hold(
    queue: deque[Any], entry_id: str, editor: str, now: float | None = None, seconds: float = HOLD_SECONDS
) -> OpResult:
    e = _find(queue, entry_id)
    if e is None:
        return OpResult(False, [], OpRefusal.NOT_FOUND)
    e.held_until = (time.monotonic() if now is None else now) + seconds
    e.last_editor = editor
    return OpResult(True, [])


def release(queue: deque[Any], entry_id: str) -> OpResult:
    e = _find(queue, entry_id)
    if e is None or e.held_until is None:
        return OpResult(False, [], OpRefusal.NOT_FOUND if e is None else OpRefusal.NOT_HELD)
    e.held_until = None
    return OpResult(True, [])


def clear(queue: deque[Any]) -> OpResult:
    removed = list(queue)
    queue.clear()
    return OpResult(bool(removed), removed)


def front_is_held(queue: deque[Any], now: float | None = None) -> bool:
    if not queue:
        return False
    until = queue[0].held_until
    if until is None:
        return False
    if until <= (time.monotonic() if now is None else now):
        queue[0].held_until = None  # the hold expired
        return False
    return True


def insert_send_now(queue: deque[Any], entry: Any) -> int:
    """Right behind the running front: after the other send_now entries (FIFO among
    them), before everything else. Returns its position."""
    position = 0
    while position < len(queue) and queue[position].send_now:
        position += 1
    queue.insert(position, entry)
    return position


def prompt_kind(text: str, skills: Mapping[str, Skill]) -> QueueKind:
    """What a prompt's text runs as, decided when it is queued (and again when it is
    edited): a builtin `/command`, a `!cmd`, a skill, or plain text. Queue operations
    read it — only plain prompts may be combined (R-S3) — so a command that waits in the
    queue stays a command."""
    first = text.lstrip()[:1]
    if not first or first not in "/!":  # plain text (most prompts): none of the parsers
        return QueueKind.PROMPT
    if parse_local(text) is not None:
        return QueueKind.LOCAL
    if parse_bang(text) is not None:
        return QueueKind.BANG
    if expand_skill(text, skills) is not None:
        return QueueKind.SKILL
    return QueueKind.PROMPT
