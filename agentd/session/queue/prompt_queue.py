"""The session's prompt queue desk (R-S3, R-S4, R-E6): `PromptQueue` is where everything that
arrives for the queue comes in, in the actor's step — prompts and enqueues, compaction jobs,
interjections, queue operations. Its entries are in entry.py, request idempotency (a retried
submission never queued or run twice) in idempotency.py, the queue operations themselves in
ops.py, and what clients and the store were told in sync.py.
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from typing import Any, TypeVar

from agentd.core import EndReason, Interjection, TurnOutcome, prompt_text
from agentd.protocol import QueueOp as QueueOpName  # the operations' wire names, one list
from agentd.session.commands import (
    EnqueueAck,
    Interject,
    InterjectResult,
    InterjectStatus,
    Prompt,
    PromptDone,
    QueueOp,
    ResumeQueue,
)
from agentd.session.errors import SessionError, request_conflict
from agentd.session.queue import ops as queue_ops
from agentd.session.queue.entry import QueuedPrompt, new_id, request_id_of, restore_entries
from agentd.session.queue.host import DeskHost
from agentd.session.queue.idempotency import (
    REQUEST_DIGEST,
    Repeat,
    RequestLedger,
    content_digest,
    decide_repeat,
)
from agentd.session.queue.ops import OpRefusal, QueueKind, prompt_kind
from agentd.session.queue.sync import AfterCommit, LeftQueue, QueueSync, answer_all, entry_size

T = TypeVar("T")


class PromptQueue:
    """The actor's queue desk: prompts, enqueues, queue operations and interjections come
    in here (in the actor's step); what changed is published and stored as a delta, and
    every answer goes out once what it says is committed."""

    def __init__(self, actor: DeskHost) -> None:
        services = actor.services
        self._actor = actor
        self.entries: deque[QueuedPrompt] = deque()
        self.requests = RequestLedger()  # client requestIds seen (R-S3, R-E6)
        self._sync = QueueSync(services.queued_bytes)  # what clients and the store were told
        self._after_commit = AfterCommit(services.writer, actor.id)
        self._settings = services.settings
        self._skills = services.skills

    def restore(self, stored: list[dict[str, Any]]) -> None:
        """The queue of a previous run (already published and stored)."""
        positions: dict[str, int] = {}
        since = self._after_commit.mark()  # read from the store: committed
        for restored in restore_entries(self._actor.id, stored, self._skills):
            restored.entry.since = since
            self.entries.append(restored.entry)
            positions[restored.entry.id] = restored.position
            if restored.request_id is not None:
                self.requests.remember(restored.request_id, restored.entry, bounded=False)
        self._sync.restore(self.entries, positions)

    # ------------------------------------------------------------------ prompts

    def submit(self, cmd: Prompt) -> None:
        """A `session/prompt` or an enqueue: queued (or run now), unless it repeats a
        request already seen or breaks a queue limit."""
        request_id = request_id_of(cmd.meta) if cmd.meta else None  # (most prompts: no meta)
        if request_id is not None and self._repeat_of_known_request(cmd, request_id):
            return
        if (refusal := self._refusal(cmd)) is not None:
            _refuse_prompt(cmd, refusal)
            return
        actor = self._actor
        since = self._after_commit.mark()  # its own writes start here
        # Classified now, not when it starts: what it is decides what queue operations
        # may do with it while it waits (only plain prompts combine, R-S3).
        queued = QueuedPrompt(
            new_id("prompt"),
            cmd,
            kind=prompt_kind(prompt_text(cmd.blocks), self._skills),
            owner=cmd.principal,
            last_editor=cmd.principal,
            send_now=cmd.send_now,
            since=since,
        )
        if request_id is not None:
            self.requests.remember(request_id, queued)
        if cmd.send_now:
            queue_ops.insert_send_now(self.entries, queued)
            # send_now cancels the running turn — unless a goal is active: then it simply
            # runs next (R-S3).
            turn = actor.running
            if turn is not None and not (actor.goal is not None and actor.goal.active):
                turn.ctx.cancel.set()
        else:
            self.entries.append(queued)
        actor.start_next_turn()
        running = actor.running
        if running is None or running.prompt is not queued:
            self.changed()  # it waits (one that started was never shown: `start_next_turn` looked)
        if cmd.ack is not None:
            self._ack(cmd.ack, queued)

    def _repeat_of_known_request(self, cmd: Prompt, request_id: str) -> bool:
        """A client retrying a submission (same `request_id`) gets the original prompt: it
        is never queued or run twice (R-S3)."""
        digest = cmd.meta[REQUEST_DIGEST] = content_digest(cmd.blocks)
        known, done = self.requests.lookup(request_id)
        first = self.requests.digest_of(request_id)
        if (known is not None or done is not None) and first is not None and first != digest:
            # Not a retry: the same key for another prompt. Refused, nothing changes.
            first_id = known.id if known is not None else done.prompt_id if done is not None else ""
            _refuse_prompt(cmd, request_conflict(request_id, first_id))
            return True
        match decide_repeat(known=known is not None, done=done is not None, enqueue=cmd.ack is not None):
            case Repeat.NEW:
                return False
            case Repeat.ACK:
                assert cmd.ack is not None
                cmd.reply.cancel()  # nobody waits for an enqueue's end
                self._ack(cmd.ack, known, done)
            case Repeat.ANSWER:
                assert done is not None
                cmd.reply.set_result(done)
            case Repeat.JOIN:
                assert known is not None
                known.waiters.append(cmd.reply)
        return True

    def _refusal(self, cmd: Prompt) -> SessionError | None:
        """A prompt that would wait must fit the queue limits (R-X3); one that runs at
        once is not queued."""
        if self._actor.running is None and not self.entries:
            return None
        return self._sync.refusal(self._settings, len(self.entries), cmd.principal, entry_size(cmd))

    def _ack(
        self, ack: asyncio.Future[EnqueueAck], entry: QueuedPrompt | None, done: PromptDone | None = None
    ) -> None:
        """Answer an enqueue once what it changed is committed: where the prompt waits
        (0 = running now), or how it ended. If its writes were dropped, a retryable
        `not_committed` error instead (a repeat waits on the original's writes)."""
        since = entry.since if entry is not None else self._after_commit.mark()
        if done is not None:
            answer = EnqueueAck(done.prompt_id, None, done)
        else:
            assert entry is not None
            index = next((i for i, e in enumerate(self.entries) if e is entry), None)
            running = self._actor.running is not None
            answer = EnqueueAck(entry.id, 0 if index is None else index + running)
        self._after_commit.then(since, lambda: resolve(ack, answer), [ack])

    # ------------------------------------------------------------------ compaction jobs

    def schedule_compaction(self, turn_id: str, reply: asyncio.Future[Any]) -> None:
        """`_agentd/session/compact` while a turn runs: the turn compacts before its next
        request (the caller set its flag); this makes the request durable — a compaction
        job first in the queue, stored like a prompt — and answers once that is committed."""
        since = self._after_commit.mark()  # the job's writes come after this
        if not any(e.kind is QueueKind.COMPACT and e.for_turn == turn_id for e in self.entries):
            job = QueuedPrompt(
                new_id("compact"),
                Prompt([], asyncio.get_running_loop().create_future()),
                kind=QueueKind.COMPACT,
                for_turn=turn_id,
            )
            self.entries.appendleft(job)
            self.changed()
        self._after_commit.then(since, lambda: resolve(reply, None), [reply])

    def turn_compacted(self, turn_id: str) -> None:
        """The turn did the compaction asked for while it ran: its job is no longer needed."""
        done = [e for e in self.entries if e.kind is QueueKind.COMPACT and e.for_turn == turn_id]
        for job in done:
            self.entries.remove(job)
        if done:
            self.changed()

    # ------------------------------------------------------------------ interjections (R-S4)

    def interject(self, cmd: Interject) -> None:
        turn = self._actor.running
        if cmd.expected_turn_id is not None and (turn is None or turn.id != cmd.expected_turn_id):
            cmd.reply.set_result(InterjectResult(InterjectStatus.TURN_NOT_ACTIVE, turn.id if turn else None))
            return
        if turn is not None:
            turn.ctx.interjections.append(Interjection(prompt_text(cmd.blocks), cmd.origin))
            turn.ctx.interrupted.set()
            cmd.reply.set_result(InterjectResult(InterjectStatus.INTERJECTED, turn.id))
            return
        # No running turn: an interjection is simply the next prompt.
        since = self._after_commit.mark()
        reply: asyncio.Future[PromptDone] = asyncio.get_running_loop().create_future()
        kind = prompt_kind(prompt_text(cmd.blocks), self._skills)
        queued = QueuedPrompt(
            new_id("prompt"), Prompt(cmd.blocks, reply, origin=cmd.origin), kind=kind, since=since
        )
        self.entries.append(queued)
        self._actor.start_next_turn()
        self.changed()
        answer = InterjectResult(InterjectStatus.QUEUED, None, queued.id)  # once it is committed
        self._after_commit.then(since, lambda: resolve(cmd.reply, answer), [cmd.reply])

    # ------------------------------------------------------------------ queue operations

    def operate(self, cmd: QueueOp) -> None:
        since = self._after_commit.mark()
        try:
            answer = self._operate(cmd, since)
        except SessionError as exc:  # refused (a limit): nothing changed
            cmd.reply.set_exception(exc)
            return
        # Answered once the change is committed (a crash cannot undo what was said).
        self._after_commit.then(since, lambda: resolve(cmd.reply, answer), [cmd.reply])

    def _operate(self, cmd: QueueOp, since: int) -> dict[str, Any]:
        args, who, q = cmd.args, cmd.principal, self.entries
        match cmd.op:
            case QueueOpName.LIST:
                return {"applied": True, "queue": queue_ops.view(q)}
            case QueueOpName.REMOVE:
                result = queue_ops.remove(q, args["id"], args["expectedVersion"])
            case QueueOpName.EDIT:
                if refusal := self._sync.check_edit(self._settings, q, args["id"], args["text"]):
                    raise refusal
                result = queue_ops.edit(q, args["id"], args["expectedVersion"], args["text"], who)
                if result.applied:  # new text, perhaps a new kind (`!cmd` → plain text)
                    edited = next(e for e in q if e.id == args["id"])
                    edited.kind = prompt_kind(edited.text, self._skills)
            case QueueOpName.MOVE:
                result = queue_ops.move(q, args["order"])
            case QueueOpName.COMBINE:
                result = queue_ops.combine(q, who)
            case QueueOpName.HOLD:
                hold_s = self._settings.queue_hold_s
                result = queue_ops.hold(q, args["id"], who, seconds=hold_s)
                if result.applied:
                    # Nothing else may wake the actor when the hold runs out: a timer does
                    # (a little late: the loop may run callbacks a clock tick early).
                    asyncio.get_running_loop().call_later(hold_s + 0.05, self._actor.send, ResumeQueue())
            case QueueOpName.RELEASE:
                result = queue_ops.release(q, args["id"])
            case QueueOpName.CLEAR:
                result = queue_ops.clear(q)
            case QueueOpName.INTERJECT:
                result = self._interject_entry(args["id"])
            case _:
                return {
                    "applied": False,
                    "reason": f"unknown operation {cmd.op!r}",
                    "queue": queue_ops.view(q),
                }
        self._removed(result.removed, since)
        out: dict[str, Any] = {"applied": result.applied, "queue": queue_ops.view(q)}
        if result.reason:
            out["reason"] = result.reason
        if result.applied:
            self.changed()
            self._actor.start_next_turn()
        return out

    def _interject_entry(self, entry_id: str) -> queue_ops.OpResult:
        """A queued prompt moves into the running turn (or, with none, runs now)."""
        q = self.entries
        entry = next((e for e in q if e.id == entry_id), None)
        turn = self._actor.running
        if entry is None:
            return queue_ops.OpResult(False, [], OpRefusal.NOT_FOUND)
        if entry.kind is not QueueKind.PROMPT:
            return queue_ops.OpResult(False, [], OpRefusal.NOT_PLAIN)
        q.remove(entry)
        if turn is None:
            q.appendleft(entry)  # no running turn: it simply runs now
            return queue_ops.OpResult(True, [])
        # Atomically out of the queue and into the running turn (R-S4); it is answered
        # with that turn's end.
        self._sync.leaving[entry.id] = LeftQueue.INTERJECTED
        turn.ctx.interjections.append(Interjection(entry.text, entry.command.origin))
        turn.ctx.interrupted.set()
        turn.prompt.waiters.append(entry.command.reply)
        turn.prompt.waiters.extend(entry.waiters)
        return queue_ops.OpResult(True, [])

    def _removed(self, entries: list[QueuedPrompt], since: int) -> None:
        """Answered `removed_from_queue` once the removal is committed (not committed:
        the prompt is still queued in the store, and its waiters are told to retry)."""
        for e in entries:
            result = PromptDone(e.id, None, TurnOutcome.cancelled(EndReason.REMOVED_FROM_QUEUE))
            e.result = result
            self._sync.leaving[e.id] = LeftQueue.REMOVED
            waiters = [e.command.reply, *e.waiters]
            self._after_commit.then(since, functools.partial(answer_all, waiters, result), waiters)

    # ------------------------------------------------------------------ publishing

    def changed(self) -> None:
        """Publish and store what changed in the queue since the last call (R-S3, R-E6):
        a delta event and the changed rows only, never every waiting prompt again."""
        payload, write = self._sync.diff(list(self.entries))
        if write is not None:
            self._actor.services.writer.submit(self._actor.id, queue=write)
        if payload is not None:
            self._actor.journal.emit(payload)

    def forget(self) -> None:
        """The actor stops: its queue stays in the store but no longer counts here."""
        self._sync.forget()


def resolve(future: asyncio.Future[T], value: T) -> None:
    """Set the result unless the waiter already has one (or gave up)."""
    if not future.done():
        future.set_result(value)


def _refuse_prompt(cmd: Prompt, err: SessionError) -> None:
    if cmd.ack is not None:  # enqueue: the caller waits for the ack, nobody for the end
        cmd.ack.set_exception(err)
        cmd.reply.cancel()
    else:
        cmd.reply.set_exception(err)


__all__ = ["PromptQueue", "resolve"]
