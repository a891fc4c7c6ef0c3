"""The request body's conversation, encoded once per message (issue 14: a request's cost
must not grow with the history it carries).

Every call sends the whole conversation, and all of it but the tail was already translated
and JSON-encoded for the previous call. `EncodedMessages` keeps, per session, the last
request's messages and each one's encoded wire items; the next request reuses them while
its messages start with the same list (`extends`: identical objects, or equal copies) and
encodes only the new tail. The body is then one `orjson.dumps` with the conversation as a
pre-encoded `orjson.Fragment`, so the stable prefix's bytes are copied, not re-encoded.

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

from server.core.conversation import Message, common_prefix, extends
from server.core.errors import ErrorKind, HarnessError

# Sessions whose encoded conversation is kept (least recently used dropped first): each
# holds its messages and their bytes, about the conversation's size again.
MAX_SESSIONS = 64


def encode_items(items: list[dict[str, Any]]) -> bytes:
    """Wire items as they sit inside a JSON array, each followed by a comma."""
    return b"".join(orjson.dumps(item) + b"," for item in items)


def as_array(parts: list[bytes]) -> orjson.Fragment:
    """Comma-terminated parts (see `encode_items`) as one JSON array."""
    joined = b"".join(parts)
    return orjson.Fragment(b"[" + joined[:-1] + b"]" if joined else b"[]")


class EncodedMessages:
    """Per session: the last request's messages and their encoded wire items."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._max = max_sessions
        self._sessions: OrderedDict[str, tuple[list[Message], list[bytes]]] = OrderedDict()

    def parts(
        self, session_id: str | None, messages: list[Message], encode: Callable[[Message], bytes]
    ) -> list[bytes]:
        """`[encode(m) for m in messages]`, encoding only what the session's last call did not."""
        if session_id is None:
            return [encode(m) for m in messages]
        entry = self._sessions.pop(session_id, None)
        known, parts = entry if entry is not None else ([], [])
        if not extends(messages, known):
            keep = common_prefix(messages, known)
            del known[keep:], parts[keep:]
        for message in messages[len(known) :]:
            encoded = encode(message)  # may raise (orjson refuses it): nothing half-added
            known.append(message)
            parts.append(encoded)
        self._sessions[session_id] = (known, parts)
        while len(self._sessions) > self._max:
            self._sessions.popitem(last=False)
        return parts  # the cache's own list: read it, do not keep or change it


def wire_body(fast: Callable[[], dict[str, Any]], plain: Callable[[], dict[str, Any]]) -> bytes:
    """The encoded body: `fast()` (conversation as a Fragment) through orjson; when orjson
    refuses something, `plain()` through the stdlib as httpx's `json=` encoded it."""
    try:
        return orjson.dumps(fast())
    except TypeError:  # orjson.JSONEncodeError
        pass
    try:
        return json.dumps(plain(), ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as exc:  # not JSON-serialisable: retrying cannot help
        raise HarnessError(ErrorKind.INVALID_REQUEST, f"cannot build the request: {exc}") from exc
