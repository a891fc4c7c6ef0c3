"""The Anthropic request body encoded with the conversation's bytes reused from the
session's previous call (see `wire_cache` for the idea; issue 14).

Anthropic's `messages` are not one entry per conversation message: consecutive same-role
messages merge into one entry (its user blocks sorted tool results first), and the prompt
cache marks the tail entry and the previous user entry. So the unit cached here is the
entry: every entry but the last is closed (a later message can only open a new one), and
its encoded bytes are made once; the open last entry and the two marked entries are encoded
per request. The result is byte for byte `orjson.dumps(build_body(request, options))`.
"""

from __future__ import annotations

from collections import OrderedDict
from operator import attrgetter
from typing import Any

import orjson

from agentd.core import Message, ProviderRequest, extends
from agentd.providers import wire_cache
from agentd.providers.anthropic.messages import content_blocks
from agentd.providers.anthropic.request import (
    AnthropicOptions,
    build_body,
    compose_body,
    last_cacheable,
    loop_thinks,
    mark_cached,
    wants_thinking,
)
from agentd.providers.wire_cache import MAX_SESSIONS, KeptBody, KeptTools, Spliced, keep_body, wire_pieces

# A tool as the body's key compares it (C only: no dataclass `__eq__` per tool).
_TOOL_FIELDS = attrgetter("name", "description", "parameters")


def _no_first(request: ProviderRequest) -> bytes:
    return b""  # (system messages join the body's `system`, not the array)


def _sort_user_blocks(entry: dict[str, Any]) -> None:
    if entry["role"] == "user":
        # tool_result blocks first (stable); re-sorting a sorted entry plus new blocks
        # gives what sorting the whole run at once gives.
        entry["content"].sort(key=lambda block: block["type"] != "tool_result")


def _marked(entry: dict[str, Any]) -> dict[str, Any] | None:
    """A copy of `entry` with a cache mark on its last cacheable block (None: it has none)."""
    block = last_cacheable(entry)
    if block is None:
        return None
    content = [mark_cached(dict(b)) if b is block else b for b in entry["content"]]
    return {"role": entry["role"], "content": content}


class _Translated:
    """One session's conversation as Anthropic entries, advanced message by message."""

    def __init__(self, with_reasoning: bool) -> None:
        self.with_reasoning = with_reasoning
        self.messages: list[Message] = []
        self.entries: list[dict[str, Any]] = []
        # Closed entries (all but the last): the older ones joined in segments (each with a
        # trailing comma), the newer ones — at least the last two, which the cache marks may
        # change — one by one (see wire_cache.SEGMENT_BYTES).
        self.segments: list[bytes] = []
        self.encoded: list[bytes] = []
        self.encoded_bytes = 0
        self.systems: list[str] = []  # contents of system messages (they join `system`)

    def advance(self, tail: list[Message]) -> None:
        for message in tail:
            self.messages.append(message)
            if message.role == "system":
                if message.content:
                    self.systems.append(message.content)
                continue
            role, blocks = content_blocks(message, with_reasoning=self.with_reasoning)
            if not blocks:
                continue
            if self.entries and self.entries[-1]["role"] == role:
                self.entries[-1]["content"].extend(blocks)
                continue
            if self.entries:  # the previous entry is closed now
                _sort_user_blocks(self.entries[-1])
                self._close(orjson.dumps(self.entries[-1]))
            self.entries.append({"role": role, "content": blocks})

    def _close(self, encoded: bytes) -> None:
        self.encoded.append(encoded)
        self.encoded_bytes += len(encoded)
        if len(self.encoded) > 2 and self.encoded_bytes - len(encoded) - len(self.encoded[-2]) >= (
            wire_cache.SEGMENT_BYTES
        ):
            keep = self.encoded[-2:]
            self.segments.append(b",".join(self.encoded[:-2]) + b",")
            self.encoded = keep
            self.encoded_bytes = sum(map(len, keep))

    def array(self, marks: bool) -> Spliced:
        if not self.entries:
            return Spliced([b"[]"])
        last = self.entries[-1]
        _sort_user_blocks(last)
        parts = [*self.encoded, orjson.dumps(last)]  # all entries after the segments
        if marks:
            tail = _marked(last)
            if tail is not None:
                parts[-1] = orjson.dumps(tail)
            # Entries alternate roles, so the previous user entry sits two before a user tail.
            if last["role"] == "user" and len(self.entries) >= 3:  # (in `parts`: see _close)
                previous = _marked(self.entries[-3])
                if previous is not None:
                    parts[-3] = orjson.dumps(previous)
        return Spliced([b"[", *self.segments, b",".join(parts), b"]"])


class AnthropicWire:
    """Per session (and thinking mode): the translated, encoded conversation."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._max = max_sessions
        self._sessions: OrderedDict[tuple[str, bool], _Translated] = OrderedDict()
        self._tools = KeptTools()  # the last request's tools (cache mark included), encoded
        self._bodies: dict[str, KeptBody] = {}  # per session: the bytes around its conversation

    def _translated(self, session_id: str, messages: list[Message], with_reasoning: bool) -> _Translated:
        key = (session_id, with_reasoning)
        state = self._sessions.pop(key, None)
        if state is None or not extends(messages, state.messages):
            state = _Translated(with_reasoning)  # an edit (compaction, a rewrite): start over
        # If orjson refuses a message this raises, and the half-advanced state is dropped.
        state.advance(messages[len(state.messages) :])
        self._sessions[key] = state
        while len(self._sessions) > self._max:
            self._sessions.popitem(last=False)
        return state

    def forget(self, session_id: str) -> None:
        """The session was unloaded: its conversation need not stay (issue 32 item 3)."""
        for with_reasoning in (False, True):
            self._sessions.pop((session_id, with_reasoning), None)
        self._bodies.pop(session_id, None)

    def encode_pieces(self, request: ProviderRequest, options: AnthropicOptions) -> list[bytes]:
        """`build_body(request, options)` encoded, in pieces (the stdlib path when orjson
        refuses it). The bytes around the conversation are the session's last ones while
        what they are made of is equal (`wire_cache.KeptBody`; issue 32)."""
        session = request.session_id
        if session is not None:
            try:
                state, thinks = self._state(session, request, options)
            except TypeError:  # orjson refused a message (JSONEncodeError): the stdlib path
                pass
            else:
                key = (
                    request.model or options.model,
                    request.max_output_tokens,
                    request.system,
                    tuple(state.systems),  # (a snapshot: the list grows in place)
                    thinks,
                    list(map(_TOOL_FIELDS, request.tools)),
                    options,
                )
                kept = self._bodies.get(session)
                if kept is not None and kept.key == key:
                    try:
                        return [kept.head, *state.array(marks=options.prompt_cache).pieces, kept.tail]
                    except TypeError:  # orjson refused the last entry: the stdlib path below
                        pass
                pieces = wire_pieces(
                    lambda: self._around(request, options, state, thinks),
                    lambda: build_body(request, options),
                    self._tools,
                )
                self._bodies.pop(session, None)
                kept = keep_body(
                    key,
                    _no_first,
                    lambda r, conversation: self._around(r, options, state, thinks, conversation),
                    request,
                    self._tools,
                )
                if kept is not None:
                    if len(self._bodies) >= self._max:
                        del self._bodies[next(iter(self._bodies))]
                    self._bodies[session] = kept
                return pieces
        return wire_pieces(
            lambda: self._fast(request, options), lambda: build_body(request, options), self._tools
        )

    def _state(
        self, session: str, request: ProviderRequest, options: AnthropicOptions
    ) -> tuple[_Translated, bool]:
        """The session's translated conversation, and whether the request thinks."""
        thinks = wants_thinking(request, options)
        state = self._translated(session, request.messages, thinks)
        if thinks and not loop_thinks(state.entries):
            thinks = False
            state = self._translated(session, request.messages, False)
        return state, thinks

    def _around(
        self,
        request: ProviderRequest,
        options: AnthropicOptions,
        state: _Translated,
        thinks: bool,
        conversation: Spliced | None = None,
    ) -> dict[str, Any]:
        """The body, its messages `conversation` (else the state's array, cache marks as
        the options say)."""
        system_parts = ([request.system] if request.system else []) + state.systems
        body = compose_body(request, options, [], system_parts, thinks)
        if options.prompt_cache:
            # The tail and previous-user marks are in the conversation's bytes; these are the others.
            if body.get("tools"):
                mark_cached(body["tools"][-1])
            if isinstance(body.get("system"), list) and body["system"]:
                mark_cached(body["system"][-1])
        body["messages"] = (
            conversation if conversation is not None else state.array(marks=options.prompt_cache)
        )
        return body

    def _fast(self, request: ProviderRequest, options: AnthropicOptions) -> dict[str, Any]:
        if request.session_id is None:
            return build_body(request, options)  # nothing to key a cache by (a summary call)
        state, thinks = self._state(request.session_id, request, options)
        return self._around(request, options, state, thinks)
