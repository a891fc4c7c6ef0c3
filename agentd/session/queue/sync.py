"""What clients and the store were last told about a session's prompt queue (R-S3, R-E6).

The actor changes its in-memory queue freely; `QueueSync.diff()` then compares it with
what was last published and yields (a) a `queue_update` event carrying only the changes
(added / removed / updated / moved, with ids and versions — an entry's text only when it
is new or was edited) and (b) a `QueueWrite` touching only the rows that changed. So one
change costs what changed, not the size of the queue.

It also keeps the queued-byte ledger (per session here, per principal in `QueuedBytes`,
shared by all live sessions) that the input limits of R-X3 check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from agentd.core import QueueChanged, prompt_bytes
from agentd.infra import Settings
from agentd.protocol import dump
from agentd.session.commands import Prompt
from agentd.session.commit_outcome import CommitFailure, CommitOutcome, NotCommitted, not_committed
from agentd.session.errors import SessionError, limit_exceeded
from agentd.session.queue import ops as queue_ops
from agentd.store import QueueWrite


class LeftQueue(StrEnum):
    """Why an entry left the queue (the `reason` of a `removed` change)."""

    STARTED = "started"
    REMOVED = "removed_from_queue"
    INTERJECTED = "interjected"


class Change(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    UPDATED = "updated"
    MOVED = "moved"


class QueueEntry(queue_ops.Entry, Protocol):
    """A queue entry as the sync sees it: an `Entry` holding its `Prompt`."""

    @property
    def command(self) -> Prompt: ...


@dataclass
class QueuedBytes:
    """Bytes of queued prompts per principal over every live session."""

    by_principal: dict[str, int] = field(default_factory=dict)

    def add(self, principal: str, n: int) -> None:
        total = self.by_principal.get(principal, 0) + n
        if total > 0:
            self.by_principal[principal] = total
        else:
            self.by_principal.pop(principal, None)

    def of(self, principal: str) -> int:
        return self.by_principal.get(principal, 0)


@dataclass
class _Shown:
    version: int
    held: bool
    send_now: bool
    last_editor: str
    owner: str
    size: int
    position: int | None  # None: not a row in the store (only plain prompts are)


def entry_size(entry: QueueEntry | Prompt) -> int:
    """The bytes a queued entry (or a `Prompt` command) holds."""
    return prompt_bytes(entry.blocks if isinstance(entry, Prompt) else entry.command.blocks)


def _row(entry: QueueEntry, position: int) -> dict[str, Any]:
    meta = entry.command.meta
    request_id = meta.get("requestId")
    return {
        "id": entry.id,
        "position": position,
        "kind": entry.kind,
        "version": entry.version,
        "owner": entry.owner,
        "last_editor": entry.last_editor,
        "send_now": entry.send_now,
        "request_id": request_id if isinstance(request_id, str) else None,
        "blocks": [dump(b) for b in entry.command.blocks],
        "meta": meta,
    }


class QueueSync:
    def __init__(self, ledger: QueuedBytes) -> None:
        self._ledger = ledger
        self._shown: dict[str, _Shown] = {}
        self._order: list[str] = []
        self.bytes = 0  # this session's queued bytes as last published
        self.leaving: dict[str, LeftQueue] = {}  # set by whoever takes an entry out

    def restore(self, queue: Iterable[QueueEntry], positions: dict[str, int]) -> None:
        """Entries read back from the store: already published and stored."""
        for e in queue:
            self._remember(e, positions.get(e.id))
            self._order.append(e.id)

    def _remember(self, e: QueueEntry, position: int | None, size: int | None = None) -> None:
        size = entry_size(e) if size is None else size
        old = self._shown.get(e.id)
        delta = size - (old.size if old else 0)
        self.bytes += delta
        self._ledger.add(e.owner, delta)
        self._shown[e.id] = _Shown(
            e.version, e.held_until is not None, e.send_now, e.last_editor, e.owner, size, position
        )

    def forget(self) -> None:
        """The actor stops; its queue stays in the store but no longer counts here."""
        for shown in self._shown.values():
            self._ledger.add(shown.owner, -shown.size)
        self._shown.clear()
        self._order.clear()
        self.bytes = 0

    def refusal(self, settings: Settings, length: int, principal: str, size: int) -> SessionError | None:
        """May one more prompt of `size` bytes wait behind `length` others? (R-X3)"""
        limit = settings.max_queue_length
        if limit and length >= limit:
            return limit_exceeded(
                "queue_length", limit, f"queue full: {limit} prompts are waiting (remove some or wait)"
            )
        return self.check_room(settings, principal, size)

    def check_room(self, settings: Settings, principal: str, extra: int) -> SessionError | None:
        """Would `extra` more queued bytes break a limit? (R-X3; nothing is changed.)"""
        per_session = settings.max_queued_bytes_per_session
        if per_session and self.bytes + extra > per_session:
            return limit_exceeded(
                "queued_bytes_session",
                per_session,
                f"queue too large: this session already holds {self.bytes} queued bytes "
                f"(at most {per_session}); remove some or wait",
                size=extra,
            )
        per_principal = settings.max_queued_bytes_per_principal
        held = self._ledger.of(principal)
        if per_principal and held + extra > per_principal:
            return limit_exceeded(
                "queued_bytes_principal",
                per_principal,
                f"queue too large: your sessions already hold {held} queued bytes "
                f"(at most {per_principal}); remove some or wait",
                size=extra,
            )
        return None

    def check_edit(
        self, settings: Settings, queue: Iterable[QueueEntry], entry_id: str, text: str
    ) -> SessionError | None:
        """An edit that makes a queued prompt larger must fit too."""
        entry = next((e for e in queue if e.id == entry_id), None)
        if entry is None:
            return None  # the edit answers not_found itself
        grows = len(text.encode()) - entry_size(entry)
        return self.check_room(settings, entry.owner, grows) if grows > 0 else None

    def diff(self, queue: Sequence[QueueEntry]) -> tuple[QueueChanged | None, QueueWrite | None]:
        """The changes since the last call: (queue_update payload, store write), each
        None when nothing changed."""
        if not queue and not self._order:  # empty before and after (a prompt that ran at once)
            self.leaving.clear()
            return None, None
        ids = [e.id for e in queue]
        present = set(ids)
        changes: list[dict[str, Any]] = []
        write = QueueWrite()
        for gone in [i for i in self._order if i not in present]:
            left = self._shown.pop(gone)
            self.bytes -= left.size
            self._ledger.add(left.owner, -left.size)
            reason = self.leaving.pop(gone, LeftQueue.STARTED)
            changes.append({"change": Change.REMOVED.value, "id": gone, "reason": reason.value})
            if left.position is not None:
                write.deletes.append(gone)
        self.leaving.clear()
        survivors = [i for i in self._order if i in present]
        now_ids = [i for i in ids if i in self._shown]
        prev: int | None = None
        floor = min((s.position for s in self._shown.values() if s.position is not None), default=0)
        for index, e in enumerate(queue):
            shown = self._shown.get(e.id)
            # Every entry is kept, a compaction job too: one acknowledged behind a running
            # turn must survive a crash like a prompt (issue 28 item 7).
            stored = True
            position: int | None = None
            if stored:
                old = shown.position if shown is not None else None
                if old is not None and (prev is None or old > prev):
                    position = old
                else:
                    position = floor - 1 if prev is None else prev + 1
                prev = position
            if shown is None:
                entry = queue_ops.view([e])[0]
                changes.append({"change": Change.ADDED.value, "index": index, "entry": entry})
                if position is not None:
                    write.upserts.append(_row(e, position))
                self._remember(e, position)
                continue
            edited = e.version != shown.version
            if (
                edited
                or (e.held_until is not None) != shown.held
                or e.send_now != shown.send_now
                or (e.last_editor != shown.last_editor)
            ):
                # Unchanged text is not sent again (clients keep it), not even built here.
                view = queue_ops.view([e], with_text=edited)[0]
                changes.append({"change": Change.UPDATED.value, "entry": view})
                if position is not None and edited:
                    write.upserts.append(_row(e, position))
                elif position is not None:
                    fields = {"last_editor": e.last_editor, "send_now": e.send_now}
                    if position != shown.position:
                        fields["position"] = position
                    write.updates.append((e.id, fields))
                self._remember(e, position, None if edited else shown.size)
            elif position is not None and position != shown.position:
                write.updates.append((e.id, {"position": position}))
                shown.position = position
        if now_ids != survivors:  # the survivors changed their relative order
            changes.append({"change": Change.MOVED.value, "order": ids})
        self._order = ids
        if not changes:
            return None, None
        return QueueChanged(changes, len(ids)), (None if write.empty() else write)


def answer_all(waiters: Iterable[asyncio.Future[Any]], result: Any) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(result)


class AfterCommit:
    """Runs a callback once the session's writes since a `mark()` are committed: answers
    go out only for what a crash can no longer undo — without blocking the mailbox. If
    the writer dropped or discarded any of them, the waiters get a retryable
    `not_committed` error instead (issue 26): never "done" for rows the store lacks."""

    def __init__(self, writer: CommitTracker, session_id: str) -> None:
        self._writer = writer
        self._session_id = session_id

    def mark(self) -> int:
        """Taken before the writes an answer stands for are submitted."""
        return self._writer.mark()

    def then(
        self,
        since: int,
        callback: Callable[[], None],
        waiters: Iterable[asyncio.Future[Any]] = (),
    ) -> None:
        """`callback` once committed; else every one of `waiters` fails `not_committed`.
        The wait is queued after the rest of the actor's step: the writes the answer
        stands for may be submitted after this call in the same step (a removal's queue
        delta is)."""
        asyncio.get_running_loop().call_soon(self._wait, since, callback, list(waiters))

    def _wait(self, since: int, callback: Callable[[], None], waiters: list[asyncio.Future[Any]]) -> None:
        outcome = self._writer.committed(self._session_id, since)
        session_id = self._session_id

        def done(fut: asyncio.Future[CommitOutcome]) -> None:
            # A writer stopped before it got there committed nothing either.
            result = NotCommitted(CommitFailure.CONNECTION_LOST) if fut.cancelled() else fut.result()
            if isinstance(result, NotCommitted):
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_exception(not_committed(session_id, result.reason))
                return
            callback()

        outcome.add_done_callback(done)


class CommitTracker(Protocol):
    """What `AfterCommit` needs of the event writer."""

    def mark(self) -> int: ...

    def committed(self, session_id: str, since: int) -> asyncio.Future[CommitOutcome]: ...
