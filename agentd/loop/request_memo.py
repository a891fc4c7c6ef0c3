"""The pre-sampling passes over the whole history — repair (R-L3c) and the token estimate
(R-L3d) — done incrementally, so a request's cost does not grow with the session's length.

A conversation mostly grows at its end. `RequestMemo` (one per `Conversation`) remembers
the last input and what it made of it; when the next input starts with that same list
(checked in one C-level list comparison: identical objects compare equal without looking
inside, and an equal copy gives the same result anyway), only the new tail is processed.
Anything else — compaction, `/clear`, a rewrite — starts over from scratch. Messages are
treated as immutable throughout the loop (repair shares them; see `repair.py`), which is
what makes an identical object a valid cache key.

The results are exactly `repair_conversation` and `estimate_tokens`:

- step (a), the id normalisation, is a left-to-right stream (`IdNormalizer`), so its
  output for a prefix never changes and its state simply advances over the tail;
- steps (b)–(e) change nothing when the normalised conversation is in *canonical form*:
  no system message except at index 0, and every assistant message's tool calls answered
  by exactly one result each, directly behind it and in call order, with no other tool
  message anywhere. That form is checked incrementally too; a request whose conversation
  is not in it (a crash left a call unanswered, a result out of place) runs the full steps
  (b)–(f) on the normalised list, as before;
- step (f) cuts old oversized tool results: their positions are tracked, and each cut copy
  is made once and reused (the same object every request, so the providers' per-message
  caches keep hitting).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import TYPE_CHECKING

from agentd.core import Message, ToolSpec, common_prefix, extends
from agentd.loop.compaction import DEFAULT_LIMITS as ESTIMATE_LIMITS
from agentd.loop.compaction import CompactionLimits, chars_to_tokens, message_chars
from agentd.loop.repair import (
    IdNormalizer,
    RepairLimits,
    RepairReason,
    repair_normalized,
    truncate_old_result,
)

if TYPE_CHECKING:
    from agentd.tools import Tool


class _RepairState:
    """Repair of one input list, advanced message by message."""

    def __init__(self, limits: RepairLimits) -> None:
        self.limits = limits
        self.inputs: list[Message] = []
        self.normalizer = IdNormalizer(limits)
        self.normalized: list[Message] = []  # step (a)'s output, one per input
        # Canonical form so far (sticky once broken) and the calls the open block still owes.
        self.canonical = True
        self.owed: deque[str] = deque()
        self.tool_count = 0
        self.oversized: list[tuple[int, int]] = []  # (rank among tool results, position)
        self.cut: dict[int, Message] = {}  # position -> its cut copy (made once)

    def advance(self, tail: list[Message]) -> None:
        oversized_chars = self.limits.oversized_tool_result_chars
        for msg in tail:
            self.inputs.append(msg)
            out = self.normalizer.feed(msg)
            position = len(self.normalized)
            self.normalized.append(out)
            if out.role == "tool":
                if self.owed and out.tool_call_id == self.owed[0]:
                    self.owed.popleft()
                else:
                    self.canonical = False
                if len(out.content) > oversized_chars:
                    self.oversized.append((self.tool_count, position))
                self.tool_count += 1
                continue
            if self.owed or (out.role == "system" and position != 0):
                self.canonical = False
            self.owed = deque(c.id for c in out.tool_calls) if out.role == "assistant" else deque()

    def result(self) -> tuple[list[Message], list[RepairReason]]:
        if not self.canonical or self.owed:
            # (b)–(e) have work to do: the full steps, on the normalised list.
            return repair_normalized(list(self.normalized), self.normalizer.changed, self.limits)
        reasons = [RepairReason.TOOL_CALL_IDS_NORMALIZED] if self.normalizer.changed else []
        out = list(self.normalized)
        recent_from = self.tool_count - max(0, self.limits.keep_recent_tool_results)
        truncated = False
        for rank, position in self.oversized:
            if rank < recent_from:
                cut = self.cut.get(position)
                if cut is None:
                    cut = self.cut[position] = truncate_old_result(out[position], self.limits)
                out[position] = cut
                truncated = True
        if truncated:
            reasons.append(RepairReason.OLD_TOOL_RESULTS_TRUNCATED)
        return out, reasons


# What a request takes from each tool (its spec, its guidance line).
_TOOL_PARTS = attrgetter("name", "description", "parameters", "guidance")


class RequestMemo:
    """Per-conversation memo of repair and the token estimate (see the module doc)."""

    def __init__(self) -> None:
        self._repair: _RepairState | None = None
        self._estimated: list[Message] = []
        self._chars: list[int] = [0]  # _chars[i]: characters of _estimated[:i]
        self._estimate_limits: CompactionLimits = ESTIMATE_LIMITS
        self._parts_key: object = None
        self._parts: tuple[str, list[ToolSpec]] = ("", [])

    def system_and_tools(
        self,
        system_prompt: str,
        cwd: object,
        tools: Mapping[str, Tool],
        make: Callable[[str, object, Mapping[str, Tool]], tuple[str, list[ToolSpec]]],
    ) -> tuple[str, list[ToolSpec]]:
        """`make(system_prompt, cwd, tools)`, kept while its inputs equal the last call's:
        a session's system prompt and tool specs are the same from request to request, and
        were built again for each (the tools' guidance lines, a `ToolSpec` per tool). The
        key is every value they are made of, compared in C (`attrgetter`, `==`: the same
        objects each time compare at once), so a changed prompt, workspace, tool set, or a
        tool's text or schema — mode, model, agent, MCP — makes them anew."""
        key = (system_prompt, cwd, list(map(_TOOL_PARTS, tools.values())))
        if key != self._parts_key:
            self._parts = make(system_prompt, cwd, tools)
            self._parts_key = key
        return self._parts

    def repair(
        self, messages: list[Message], limits: RepairLimits
    ) -> tuple[list[Message], list[RepairReason]]:
        """`repair_conversation(messages, limits)`, reusing the work done for the last call."""
        state = self._repair
        if state is None or state.limits != limits or not extends(messages, state.inputs):
            state = self._repair = _RepairState(limits)
        state.advance(messages[len(state.inputs) :])
        return state.result()

    def estimate(
        self, messages: list[Message], system: str = "", limits: CompactionLimits = ESTIMATE_LIMITS
    ) -> int:
        """`estimate_tokens(messages, system, limits)`, summing only messages it has not seen
        at their position."""
        if limits != self._estimate_limits:
            self._estimated, self._chars, self._estimate_limits = [], [0], limits
        known = self._estimated
        if not extends(messages, known):
            keep = common_prefix(messages, known)
            del known[keep:], self._chars[keep + 1 :]
        chars = self._chars
        for msg in messages[len(known) :]:
            known.append(msg)
            chars.append(chars[-1] + message_chars(msg, limits))
        return chars_to_tokens(len(system) + chars[len(messages)])
