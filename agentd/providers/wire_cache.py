"""The request body's conversation, encoded once per message (issue 14: a request's cost
must not grow with the history it carries).

Every call sends the whole conversation, and all of it but the tail was already translated
and JSON-encoded for the previous call. `EncodedMessages` keeps, per session, the last
request's messages and each one's encoded wire items; the next request reuses them while
its messages start with the same list (`extends`: identical objects, or equal copies) and
encodes only the new tail, and keeps the older messages' bytes joined in segments. The
conversation then goes into the body as a `Spliced` array: the rest of the body is one
small `orjson.dumps` with a placeholder, and the body is that encoding's two halves around
the conversation's pieces (`wire_pieces`), which the HTTP transport writes as they are.
The history's bytes are neither re-encoded nor copied per request: at a long session's
size every copy was a fresh mmapped block, page faults included (agentd/infra/rss_trim.py fixes
glibc's mmap threshold at 128 KiB).

Byte-for-byte: orjson escapes strings exactly as the stdlib's compact
`json.dumps(ensure_ascii=False)` did (checked over every code point in the tests), so the
conversation part is the same bytes as before; elsewhere only float spelling may differ
(`1e-05` vs `1e-5`, the same number). What orjson refuses (an int beyond 64 bits inside a
tool input, a lone surrogate) takes the stdlib path on the plain body, as before.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import orjson

from agentd.core import ErrorKind, HarnessError, Message, common_prefix, extends

# Sessions whose encoded conversation is kept (least recently used dropped first): each
# holds its messages and their bytes, about the conversation's size again.
MAX_SESSIONS = 64


def encode_items(items: list[dict[str, Any]]) -> bytes:
    """Wire items as they sit inside a JSON array, each followed by a comma."""
    return b"".join(orjson.dumps(item) + b"," for item in items)


# Stands for a `Spliced` value in the body orjson encodes. orjson writes control characters
# inside strings escaped, so a raw NUL in its output can only be a placeholder.
_PLACEHOLDER = b"\x00"


class Spliced:
    """A JSON array given as the pieces of its bytes; `wire_pieces` puts them in the body."""

    __slots__ = ("pieces",)

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    def fragment(self) -> orjson.Fragment:
        return orjson.Fragment(b"".join(self.pieces))


def as_array(parts: list[bytes], first: bytes = b"") -> Spliced:
    """`first` and comma-terminated parts (see `encode_items`; a part may be empty) as one
    JSON array."""
    pieces = [b"[", first, *parts]
    last = len(pieces) - 1
    while last > 0 and not pieces[last]:  # a message with no wire items: b""
        last -= 1
    if last > 0:
        pieces[last] = pieces[last][:-1]  # a short copy: the last item without its comma
    pieces.append(b"]")
    return Spliced(pieces)


# Encoded messages are kept joined in segments of about this many bytes: a request's body is
# then a few segments, written as they are (`http_lean.BodyPieces`), not one piece per
# message. Below the 128 KiB mmap threshold (agentd/infra/rss_trim.py), so a segment is heap memory.
SEGMENT_BYTES = 64 * 1024


class _Encoded:
    """One session's encoded conversation: closed segments (joined once) and the open parts.

    Invariants: `ends[i]` is the byte offset after message i's part in the concatenation of
    all parts; `segments[k]` joins the parts of messages `bounds[k-1]` (or 0) to `bounds[k]`;
    `open` holds the parts from `sealed` on, one per message."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.ends: list[int] = []
        self.segments: list[bytes] = []
        self.bounds: list[int] = []
        self.open: list[bytes] = []
        self.open_bytes = 0

    @property
    def sealed(self) -> int:
        return self.bounds[-1] if self.bounds else 0

    def cut(self, keep: int) -> None:
        """Forget every message from `keep` on."""
        while self.bounds and self.bounds[-1] > keep:
            segment, end = self.segments.pop(), self.bounds.pop()
            start = self.sealed
            if start < keep:  # the cut falls inside this segment: reopen its first parts
                base = self.ends[start - 1] if start else 0
                edges = [base, *self.ends[start:end]]
                self.open = [segment[edges[i] - base : edges[i + 1] - base] for i in range(keep - start)]
                break
            self.open = []
        else:
            del self.open[keep - self.sealed :]
        del self.messages[keep:], self.ends[keep:]
        self.open_bytes = sum(map(len, self.open))

    def add(self, message: Message, part: bytes) -> None:
        self.messages.append(message)
        self.ends.append((self.ends[-1] if self.ends else 0) + len(part))
        self.open.append(part)
        self.open_bytes += len(part)

    def seal(self) -> None:
        """Close a segment of all open parts but the last (the last one's comma is cut per
        request) once they are large enough."""
        if len(self.open) > 1 and self.open_bytes - len(self.open[-1]) >= SEGMENT_BYTES:
            last = self.open.pop()
            self.segments.append(b"".join(self.open))
            self.bounds.append(len(self.messages) - 1)
            self.open, self.open_bytes = [last], len(last)

    def array(self, first: bytes) -> Spliced:
        if len(self.open) == 1:
            return as_array([*self.segments, self.open[0]], first)
        return as_array([*self.segments, b"".join(self.open)], first)


class EncodedMessages:
    """Per session: the last request's messages and their encoded wire items."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._max = max_sessions
        self._sessions: OrderedDict[str, _Encoded] = OrderedDict()

    def array(
        self,
        session_id: str | None,
        messages: list[Message],
        encode: Callable[[Message], bytes],
        first: bytes = b"",
    ) -> Spliced:
        """`as_array([encode(m) for m in messages], first)`, encoding only what the
        session's last call did not."""
        if session_id is None:
            return as_array([encode(m) for m in messages], first)
        state = self._sessions.pop(session_id, None) or _Encoded()
        if not extends(messages, state.messages):
            state.cut(common_prefix(messages, state.messages))
        for message in messages[len(state.messages) :]:
            # If orjson refuses a message this raises, and the half-advanced state (taken
            # out of the cache above) is dropped.
            state.add(message, encode(message))
        state.seal()
        self._sessions[session_id] = state
        while len(self._sessions) > self._max:
            self._sessions.popitem(last=False)
        return state.array(first)

    def forget(self, session_id: str) -> None:
        """The session was unloaded: its conversation need not stay (issue 32 item 3)."""
        self._sessions.pop(session_id, None)


class KeptTools:
    """A provider's last encoded `tools` value, reused while the next request's equals it
    (issue 32: the tools' JSON Schemas were most of a small body's encoding, on every call).
    The comparison is `==`, in C: the schemas are the tools' own dicts, the same objects from
    call to call (identical objects compare equal at once), so it costs far less than
    encoding them; a tool whose schema changes comes with a new dict (nothing mutates one in
    place), which compares by value."""

    __slots__ = ("_encoded", "_value")

    def __init__(self) -> None:
        self._value: Any = None
        self._encoded: orjson.Fragment | None = None

    def fragment(self, value: Any) -> orjson.Fragment:
        """`value` encoded (raises as `orjson.dumps` does)."""
        encoded = self._encoded
        if encoded is None or value != self._value:
            encoded = self._encoded = orjson.Fragment(orjson.dumps(value))
            self._value = value
        return encoded


class KeptBody:
    """A body's bytes around its conversation array (`head`, `tail`) and the array's leading
    items (`first`: the system prompt's, on Chat Completions), for the request fields `key`
    (issue 32: the body but its conversation is the same from call to call of a session, and
    was composed and encoded on every one). `[head, *conversation.pieces, tail]` is what
    `wire_pieces` gives for a request with those fields."""

    __slots__ = ("first", "head", "key", "tail")

    def __init__(self, key: Any, first: bytes, head: bytes, tail: bytes) -> None:
        self.key, self.first, self.head, self.tail = key, first, head, tail


_NO_CONVERSATION = Spliced([])


def keep_body(
    key: Any,
    first: Callable[[Any], bytes],
    compose: Callable[[Any, Any], dict[str, Any]],
    request: Any,
    tools: KeptTools,
) -> KeptBody | None:
    """The `KeptBody` of `compose(request, conversation)` (see `wire_pieces`: the same
    encoding, the tools as `tools` keeps them); None when orjson refuses any of it (those
    bodies take `wire_pieces` every time)."""
    try:
        leading = first(request)
        body = compose(request, _NO_CONVERSATION)
        if "tools" in body:
            body["tools"] = tools.fragment(body["tools"])
        pieces = _spliced_body(body)
    except TypeError:  # orjson.JSONEncodeError
        return None
    return KeptBody(key, leading, pieces[0], pieces[1]) if len(pieces) == 2 else None


def wire_pieces(
    fast: Callable[[], dict[str, Any]], plain: Callable[[], dict[str, Any]], tools: KeptTools | None = None
) -> list[bytes]:
    """The encoded body, in pieces (the HTTP transport writes them as they are): `fast()`
    through orjson, its top-level `Spliced` values put in (and its `tools` encoded as they
    were last time, when `tools` keeps them); when orjson refuses something, `plain()`
    through the stdlib as httpx's `json=` encoded it."""
    try:
        body = fast()
        if tools is not None and "tools" in body:
            body["tools"] = tools.fragment(body["tools"])
        return _spliced_body(body)
    except TypeError:  # orjson.JSONEncodeError
        pass
    try:
        return [json.dumps(plain(), ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()]
    except (TypeError, ValueError) as exc:  # not JSON-serialisable: retrying cannot help
        raise HarnessError(ErrorKind.INVALID_REQUEST, f"cannot build the request: {exc}") from exc


def _spliced_body(body: dict[str, Any]) -> list[bytes]:
    spliced: list[tuple[str, Spliced]] = []
    for key, value in body.items():
        if isinstance(value, Spliced):
            spliced.append((key, value))
            body[key] = orjson.Fragment(_PLACEHOLDER)
    encoded = orjson.dumps(body)
    if not spliced:
        return [encoded]
    around = encoded.split(_PLACEHOLDER)
    if len(around) != len(spliced) + 1:  # not expected (see _PLACEHOLDER): join them apart
        for key, value in spliced:
            body[key] = value.fragment()
        return [orjson.dumps(body)]
    pieces = [around[0]]
    for (_key, value), after in zip(spliced, around[1:], strict=True):
        pieces += value.pieces
        pieces.append(after)
    return pieces
