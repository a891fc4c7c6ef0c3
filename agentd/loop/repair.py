"""Message repair before every request (R-L3c).

A conversation left behind by a crash, a cancel, a restart or a provider switch can break
provider rules: ids in a charset the next provider rejects, system messages in the
middle, tool results that drifted behind a later user message, results for calls nobody
made, calls without a result, and huge old outputs. `repair_conversation` fixes all of
that in a fixed order and says which repairs it made, as `RepairReason` values the loop
records on the turn state.

It is pure (the input list and its messages are never mutated; unchanged messages are
shared with the output, so treat messages as immutable) and idempotent (a repaired
conversation comes back unchanged with no reasons).
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from dataclasses import dataclass
from enum import StrEnum

from agentd.core import Message, ToolCall


class RepairReason(StrEnum):
    TOOL_CALL_IDS_NORMALIZED = "tool_call_ids_normalized"
    SYSTEM_MESSAGES_MERGED = "system_messages_merged"
    MESSAGE_ORDER_REPAIRED = "message_order_repaired"
    ORPHAN_TOOL_RESULTS_DROPPED = "orphan_tool_results_dropped"
    MISSING_TOOL_RESULTS_SYNTHESIZED = "missing_tool_results_synthesized"
    OLD_TOOL_RESULTS_TRUNCATED = "old_tool_results_truncated"


def _id_pattern(limits: RepairLimits) -> re.Pattern[str]:
    return re.compile(f"[{limits.tool_call_id_charset}]+")


@dataclass(frozen=True)
class RepairLimits:
    """Every constant of this module; operators override it, tests read it."""

    max_tool_call_id_length: int = 64  # the strictest common provider limit
    tool_call_id_charset: str = "A-Za-z0-9_-"  # regex character-class body
    generated_id_prefix: str = "call_"
    generated_id_hash_chars: int = 24  # sha1 hex digits after the prefix
    keep_recent_tool_results: int = 6  # the last N results are never truncated
    oversized_tool_result_chars: int = 20_000  # an older result longer than this is cut ...
    truncated_tool_result_chars: int = 2_000  # ... to this many chars, marker included

    def __post_init__(self) -> None:
        # A cut result must be short enough not to be cut again, or repair would not be
        # idempotent; and it must leave room for the marker.
        if not 100 <= self.truncated_tool_result_chars <= self.oversized_tool_result_chars:
            raise ValueError("need 100 <= truncated_tool_result_chars <= oversized_tool_result_chars")
        if len(self.generated_id_prefix) + self.generated_id_hash_chars > self.max_tool_call_id_length:
            raise ValueError("generated tool-call ids would exceed max_tool_call_id_length")
        if not _id_pattern(self).fullmatch(self.generated_id_prefix + "0123456789abcdef"):
            raise ValueError("generated ids (prefix + hex) must be inside tool_call_id_charset")


DEFAULT_LIMITS = RepairLimits()

MISSING_RESULT_TEXT = "cancelled: this tool call did not complete (cancelled or interrupted)"
TRUNCATION_MARKER = "\n[... {cut} characters cut from this old tool result ...]\n"


def _hashed_id(seed: str, limits: RepairLimits) -> str:
    digest = hashlib.sha1(seed.encode()).hexdigest()[: limits.generated_id_hash_chars]
    return limits.generated_id_prefix + digest


def normalize_tool_call_id(call_id: str, limits: RepairLimits = DEFAULT_LIMITS) -> str:
    """`call_id` if it is provider-safe, else a deterministic safe id derived from it."""
    if len(call_id) <= limits.max_tool_call_id_length and _id_pattern(limits).fullmatch(call_id):
        return call_id
    return _hashed_id(call_id, limits)


# --------------------------------------------------------------------------- (a) ids


class IdNormalizer:
    """Step (a) as a left-to-right stream: a message's output depends only on the messages
    before it, so `RequestMemo` feeds it just the new tail of a growing conversation.

    Safe, conversation-unique call ids; each result follows its call's new id. A result
    belongs to the oldest unanswered call with its original id, so duplicated ids (one
    provider reusing `call_0` every step) pair up positionally.
    """

    def __init__(self, limits: RepairLimits) -> None:
        self.limits = limits
        self.used: set[str] = set()
        self.pending: dict[str, deque[str]] = {}  # original id -> new ids of calls not yet answered
        self.latest: dict[str, str] = {}  # original id -> new id of its most recent call
        self.changed = False  # some message so far came out changed

    def feed(self, msg: Message) -> Message:
        limits = self.limits
        if msg.role == "assistant" and msg.tool_calls:
            calls: list[ToolCall] = []
            for call in msg.tool_calls:
                new_id = normalize_tool_call_id(call.id, limits)
                attempt = 0
                while new_id in self.used:
                    attempt += 1
                    new_id = _hashed_id(f"{call.id}\x00{attempt}", limits)
                self.used.add(new_id)
                self.pending.setdefault(call.id, deque()).append(new_id)
                self.latest[call.id] = new_id
                calls.append(call if new_id == call.id else call.model_copy(update={"id": new_id}))
            if any(new is not old for new, old in zip(calls, msg.tool_calls, strict=True)):
                self.changed = True
                msg = msg.model_copy(update={"tool_calls": calls})
        elif msg.role == "tool" and msg.tool_call_id is not None:
            old_id = msg.tool_call_id
            queue = self.pending.get(old_id)
            if queue:
                new_id = queue.popleft()
            elif old_id in self.latest:
                new_id = self.latest[old_id]  # a second result for one call; (d) drops it
            else:
                new_id = normalize_tool_call_id(old_id, limits)  # an orphan; (d) drops it
            if new_id != old_id:
                self.changed = True
                msg = msg.model_copy(update={"tool_call_id": new_id})
        return msg


def _normalize_ids(messages: list[Message], limits: RepairLimits) -> tuple[list[Message], bool]:
    normalizer = IdNormalizer(limits)
    out = [normalizer.feed(msg) for msg in messages]
    return out, normalizer.changed


# --------------------------------------------------------------------------- (b) system


def _merge_system(messages: list[Message]) -> tuple[list[Message], bool]:
    """One system message, first; contents in their order, joined by blank lines."""
    systems = [m for m in messages if m.role == "system"]
    if not systems or (len(systems) == 1 and messages[0].role == "system"):
        return messages, False
    rest = [m for m in messages if m.role != "system"]
    if len(systems) == 1:
        return [systems[0], *rest], True
    merged = Message.system("\n\n".join(m.content for m in systems if m.content))
    return [merged, *rest], True


# --------------------------------------------------------------------------- (c) order


def _repair_order(messages: list[Message]) -> tuple[list[Message], bool]:
    """Results directly behind the assistant message that issued them, in call order.

    Only one result per issued call moves (the first one after the call, else the first
    one anywhere); orphans and second results stay where they are for (d) to drop.
    """
    issued_at = {c.id: i for i, m in enumerate(messages) if m.role == "assistant" for c in m.tool_calls}
    first_result: dict[str, int] = {}
    for i, msg in enumerate(messages):
        tid = msg.tool_call_id
        if msg.role != "tool" or tid is None or tid not in issued_at:
            continue
        # A result written after its call beats a stray copy that sits before it.
        if tid not in first_result or first_result[tid] < issued_at[tid] < i:
            first_result[tid] = i
    moved = set(first_result.values())
    order: list[int] = []
    for i, msg in enumerate(messages):
        if i in moved:
            continue
        order.append(i)
        if msg.role == "assistant":
            for call in msg.tool_calls:
                j = first_result.pop(call.id, None)
                if j is not None:
                    order.append(j)
    return [messages[i] for i in order], order != list(range(len(messages)))


# --------------------------------------------------------------------------- (d) orphans


def _drop_orphans(messages: list[Message]) -> tuple[list[Message], bool]:
    """Keep only results inside the block of the assistant message that issued them.

    After (c) every issued call's first result sits in that block, so whatever is left
    outside is a result nobody asked for, or a second result for an answered call (a
    stray copy that came before its call counts as the second one).
    """
    out: list[Message] = []
    block_ids: set[str] = set()  # calls of the assistant message whose results follow
    answered: set[str] = set()
    for msg in messages:
        if msg.role == "tool":
            tid = msg.tool_call_id
            if tid is not None and tid in block_ids and tid not in answered:
                answered.add(tid)
                out.append(msg)
            continue
        block_ids = {c.id for c in msg.tool_calls} if msg.role == "assistant" else set()
        out.append(msg)
    return out, len(out) != len(messages)


# --------------------------------------------------------------------------- (e) missing


def _synthesize_missing(messages: list[Message]) -> tuple[list[Message], bool]:
    """A cancelled result for every call without one, in its call-order slot.

    Call order (rather than "after the existing results") keeps (c) satisfied, so a second
    repair pass moves nothing; for the usual crash, where the first k results were written,
    both orders coincide.
    """
    out: list[Message] = []
    changed = False
    i = 0
    while i < len(messages):
        msg = messages[i]
        out.append(msg)
        i += 1
        if msg.role != "assistant" or not msg.tool_calls:
            continue
        block: dict[str, Message] = {}
        while i < len(messages) and messages[i].role == "tool":
            block[messages[i].tool_call_id or ""] = messages[i]
            i += 1
        for call in msg.tool_calls:
            result = block.get(call.id)
            if result is None:
                changed = True
                result = Message.tool_result(call, MISSING_RESULT_TEXT, is_error=True)
            out.append(result)
    return out, changed


# --------------------------------------------------------------------------- (f) truncate


def _truncate_text(text: str, target: int) -> str:
    """Head and tail of `text` (errors are often at the end) around a marker; ≤ `target`."""
    # Sizing the marker for cutting everything bounds its digits, so the result fits.
    keep = target - len(TRUNCATION_MARKER.format(cut=len(text)))
    head = keep - keep // 2
    tail = keep // 2
    marker = TRUNCATION_MARKER.format(cut=len(text) - keep)
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")


def truncate_old_result(msg: Message, limits: RepairLimits) -> Message:
    """The cut copy of an old tool result longer than `oversized_tool_result_chars`."""
    return msg.model_copy(update={"content": _truncate_text(msg.content, limits.truncated_tool_result_chars)})


def _truncate_old_results(messages: list[Message], limits: RepairLimits) -> tuple[list[Message], bool]:
    tool_positions = [i for i, m in enumerate(messages) if m.role == "tool"]
    old = tool_positions[: max(0, len(tool_positions) - max(0, limits.keep_recent_tool_results))]
    out = list(messages)
    changed = False
    for i in old:
        msg = messages[i]
        if len(msg.content) > limits.oversized_tool_result_chars:
            out[i] = truncate_old_result(msg, limits)
            changed = True
    return out, changed


# --------------------------------------------------------------------------- pipeline


def repair_conversation(
    messages: list[Message], limits: RepairLimits = DEFAULT_LIMITS
) -> tuple[list[Message], list[RepairReason]]:
    """Apply (a)–(f) in order; return the repaired list and each repair that changed something."""
    msgs, changed = _normalize_ids(messages, limits)
    return repair_normalized(msgs, changed, limits)


def repair_normalized(
    msgs: list[Message], ids_changed: bool, limits: RepairLimits = DEFAULT_LIMITS
) -> tuple[list[Message], list[RepairReason]]:
    """(b)–(f) on the output of (a) (`ids_changed`: whether (a) changed anything)."""
    reasons: list[RepairReason] = []
    if ids_changed:
        reasons.append(RepairReason.TOOL_CALL_IDS_NORMALIZED)
    steps = (
        (_merge_system, RepairReason.SYSTEM_MESSAGES_MERGED),
        (_repair_order, RepairReason.MESSAGE_ORDER_REPAIRED),
        (_drop_orphans, RepairReason.ORPHAN_TOOL_RESULTS_DROPPED),
        (_synthesize_missing, RepairReason.MISSING_TOOL_RESULTS_SYNTHESIZED),
    )
    for step, reason in steps:
        msgs, changed = step(msgs)
        if changed:
            reasons.append(reason)
    msgs, changed = _truncate_old_results(msgs, limits)
    if changed:
        reasons.append(RepairReason.OLD_TOOL_RESULTS_TRUNCATED)
    return msgs, reasons
