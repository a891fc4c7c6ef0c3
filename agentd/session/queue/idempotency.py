"""Request idempotency for a session's prompt queue (R-S3, R-E6): a requestId's content
digest (the requestId itself: entry.py `request_id_of`), `RequestLedger` — the requestIds
this session has seen and how they ended — and `decide_repeat`, the pure decision of what a
repeated request gets, so a retried submission is never queued or run twice."""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import orjson

from agentd.protocol import ContentBlock, dump

if TYPE_CHECKING:
    from agentd.session.commands import PromptDone
    from agentd.session.queue.entry import QueuedPrompt

MAX_REMEMBERED_REQUESTS = 1000


# `Prompt.meta` key the desk sets (never the client's: overwritten) on a prompt carrying a
# requestId: the digest of its content as submitted, stored with its queue row and on its
# turn's events, so a reuse of the requestId for other content is told from a retry.
REQUEST_DIGEST = "requestDigest"


def content_digest(blocks: list[ContentBlock]) -> str:
    """What a prompt's content is, for comparing a repeat with its original (issue 28 item 5)."""
    raw = orjson.dumps([dump(b) for b in blocks], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(raw).hexdigest()[:32]


def request_digest_of(meta: dict[str, Any]) -> str | None:
    value = meta.get(REQUEST_DIGEST)
    return value if isinstance(value, str) else None


class Repeat(StrEnum):
    """What a submission carrying an already-seen requestId gets."""

    NEW = "new"  # not a repeat: queue it
    ACK = "ack"  # an enqueue: answered at once with where the original waits, or its end
    ANSWER = "answer"  # a `session/prompt` whose original ended: answered with that end
    JOIN = "join"  # a `session/prompt` whose original still waits or runs: waits with it


def decide_repeat(*, known: bool, done: bool, enqueue: bool) -> Repeat:
    """`known`: the original is in this run's ledger; `done`: how it ended is known (in
    this run or before a restart); `enqueue`: the repeat is an enqueue, not a prompt."""
    if not known and not done:
        return Repeat.NEW
    if enqueue:
        return Repeat.ACK
    return Repeat.ANSWER if done else Repeat.JOIN


def _bounded(d: dict[str, Any]) -> None:
    while len(d) > MAX_REMEMBERED_REQUESTS:
        d.pop(next(iter(d)))


class RequestLedger:
    """The client requestIds this session has seen (bounded, oldest forgotten first)."""

    def __init__(self) -> None:
        self._requests: dict[str, QueuedPrompt] = {}  # requestId → its prompt, in this run
        # requestId → how its prompt ended in an earlier run of the server (from the log).
        self._answered: dict[str, PromptDone] = {}
        self._answered_digests: dict[str, str] = {}  # requestId → its content's digest, when logged

    def remember(self, request_id: str, entry: QueuedPrompt, *, bounded: bool = True) -> None:
        """`bounded=False` for a restored queue: every waiting prompt keeps its requestId."""
        self._requests[request_id] = entry
        if bounded:
            _bounded(self._requests)

    def remember_outcome(self, request_id: str, done: PromptDone, digest: str | None = None) -> None:
        """How a client's request ended before a restart: its retry learns it (R-E6)."""
        self._answered[request_id] = done
        _bounded(self._answered)
        if digest is not None:
            self._answered_digests[request_id] = digest
            _bounded(self._answered_digests)

    def lookup(self, request_id: str) -> tuple[QueuedPrompt | None, PromptDone | None]:
        """(the original entry in this run, how the original ended — here or before a restart)."""
        known = self._requests.get(request_id)
        done = known.result if known is not None else self._answered.get(request_id)
        return known, done

    def digest_of(self, request_id: str) -> str | None:
        """The content digest the requestId was first seen with (None: not known)."""
        known = self._requests.get(request_id)
        if known is not None:
            return request_digest_of(known.command.meta)
        return self._answered_digests.get(request_id)


__all__ = [
    "MAX_REMEMBERED_REQUESTS",
    "REQUEST_DIGEST",
    "Repeat",
    "RequestLedger",
    "content_digest",
    "decide_repeat",
    "request_digest_of",
]
