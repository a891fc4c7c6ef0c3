"""Compaction (R-L3d): when the conversation nears the model's context window, older
history is summarised by one provider call and the recent turns are kept verbatim.

The estimate is conservative: the larger of chars/4 over the whole request and the
provider's own last report. The pre-compaction messages are kept in the durable
`compaction` event, so the store never loses them.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from enum import StrEnum

from agentd.core import CompactionCompleted, Message, Provider, ProviderRequest, TextDelta


class CompactionReason(StrEnum):
    """Why the history was folded (on the `compaction` event and the turn summary)."""

    THRESHOLD = "threshold"  # the request neared the context window
    REQUESTED = "requested"  # `/compact`, or the client asked
    CONTEXT_OVERFLOW = "context_overflow"  # the provider refused the request as too long


@dataclass(frozen=True)
class CompactionLimits:
    threshold: float = 0.85  # of the context window
    keep_recent_user_turns: int = 2  # the last N user turns stay verbatim
    summary_max_tokens: int = 2048
    per_message_overhead_chars: int = 16  # role markers and separators, counted conservatively


DEFAULT_LIMITS = CompactionLimits()

SUMMARY_SYSTEM = (
    "You compress a conversation between a user and a coding agent so the agent can continue "
    "the work without the full history. Write a faithful, dense summary: the user's goals and "
    "constraints, decisions made, files created or changed (with paths), commands run and their "
    "results, open problems, and the next steps. Do not invent anything. Plain text, no preamble."
)
SUMMARY_HEADER = "[Summary of the earlier conversation, written when it was compacted]"
SUMMARY_TAG = "compaction_summary"


def estimate_tokens(
    messages: list[Message], system: str = "", limits: CompactionLimits = DEFAULT_LIMITS
) -> int:
    return chars_to_tokens(len(system) + sum(message_chars(m, limits) for m in messages))


def chars_to_tokens(chars: int) -> int:
    return (chars + 3) // 4


def message_chars(m: Message, limits: CompactionLimits = DEFAULT_LIMITS) -> int:
    """What one message adds to `estimate_tokens`'s character count (`RequestMemo` sums
    it once per message)."""
    chars = len(m.content) + len(m.reasoning) + limits.per_message_overhead_chars
    for call in m.tool_calls:
        chars += len(call.name) + len(call.arguments) + len(call.id)
    for block in m.reasoning_blocks:
        # Readable thinking is already in `m.reasoning`; what a block adds to the context
        # is its opaque part (a redacted block's `data`, a Responses item's encrypted_content).
        opaque = block.data.get("encrypted_content") or block.data.get("data") or ""
        chars += len(opaque) if isinstance(opaque, str) else 0
    return chars


def should_compact(estimate: int, context_window: int, limits: CompactionLimits = DEFAULT_LIMITS) -> bool:
    return context_window > 0 and estimate >= limits.threshold * context_window


def split_point(messages: list[Message], keep_recent_user_turns: int) -> int:
    """Index where the verbatim tail starts: at a user message, so no tool call is ever
    separated from its result. 0 means there is nothing old enough to compact."""
    user_starts = [i for i, m in enumerate(messages) if m.role == "user"]
    if len(user_starts) <= keep_recent_user_turns:
        return 0
    return user_starts[-keep_recent_user_turns] if keep_recent_user_turns > 0 else len(messages)


def _transcript(messages: list[Message]) -> str:
    lines = []
    for m in messages:
        if m.role == "tool":
            lines.append(f"[tool result {m.name}{' (error)' if m.is_error else ''}]\n{m.content}")
            continue
        if m.content:
            lines.append(f"[{m.role}]\n{m.content}")
        for call in m.tool_calls:
            lines.append(f"[{m.role} calls {call.name}] {call.arguments}")
    return "\n\n".join(lines)


async def summarise(
    provider: Provider, model: str, older: list[Message], limits: CompactionLimits = DEFAULT_LIMITS
) -> str:
    request = ProviderRequest(
        model=model,
        system=SUMMARY_SYSTEM,
        messages=[Message.user("Summarise this conversation:\n\n" + _transcript(older))],
        max_output_tokens=limits.summary_max_tokens,
        extended_reasoning=False,
    )
    parts: list[str] = []
    async with contextlib.aclosing(provider.stream(request)) as stream:  # type: ignore[type-var]
        async for ev in stream:
            if isinstance(ev, TextDelta):
                parts.append(ev.text)
    return "".join(parts).strip()


@dataclass(frozen=True)
class Compaction:
    id: str
    summary: str
    replaced: list[Message]  # the messages the summary stands for
    kept: list[Message]

    @property
    def messages(self) -> list[Message]:
        summary = Message(role="user", content=f"{SUMMARY_HEADER}\n\n{self.summary}", tag=SUMMARY_TAG)
        return [summary, *self.kept]

    def to_update(self, reason: CompactionReason) -> CompactionCompleted:
        """The durable `compaction` event, with the replaced messages so the pre-compaction
        transcript stays in the store."""
        return CompactionCompleted(
            compaction_id=self.id,
            summary=self.summary,
            reason=reason.value,
            replaced=[m.model_dump(mode="json") for m in self.replaced],
            kept_messages=len(self.kept),
        )


def compactable(messages: list[Message], limits: CompactionLimits = DEFAULT_LIMITS) -> bool:
    """Whether anything besides a previous summary lies before the recent turns."""
    cut = split_point(messages, limits.keep_recent_user_turns)
    return cut > 0 and not all(m.tag == SUMMARY_TAG for m in messages[:cut])


async def compact(
    provider: Provider,
    model: str,
    messages: list[Message],
    limits: CompactionLimits = DEFAULT_LIMITS,
    *,
    compaction_id: str | None = None,
) -> Compaction | None:
    """Summarise everything before the recent turns; None when there is nothing to fold."""
    if not compactable(messages, limits):
        return None  # nothing old enough, or only the previous summary: nothing to gain
    cut = split_point(messages, limits.keep_recent_user_turns)
    older, kept = messages[:cut], messages[cut:]
    summary = await summarise(provider, model, older, limits)
    if not summary:
        summary = "(the summariser returned nothing; earlier details are in the session's event log)"
    return Compaction(compaction_id or f"compaction_{uuid.uuid4().hex[:16]}", summary, older, kept)
