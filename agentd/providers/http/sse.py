"""Reading a Server-Sent Events body under the stream timeouts: the bytes of each network
read → the complete events, (event name, data), the first-token deadline until the provider
saw real output, the idle timeout after it, and the body drained after the end marker so the
connection is reused.

Per read, not per line or per event (issue 32): the events are cut at their blank line in
one `bytes.split`, and an event that is one `data:` line (what the model APIs send) is taken
as it is; its JSON is parsed from the bytes (`parse_event`). The caller loops over
`SSEReader.read()`'s lists — no generator between the connection and the provider."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import orjson

from agentd.core import ErrorKind, HarnessError
from agentd.providers.http.answer import Answer
from agentd.providers.http.common import drain, drain_lean, guard, no_first_token, stalled, transport_error

Event = tuple[str, bytes]  # (event name, data: its `data:` lines joined by LF)


class SSEDecoder:
    """Line-level SSE decoding: (`event:` name, joined `data:` lines) per event."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> tuple[str, str] | None:
        if line == "":
            return self.flush()
        if line.startswith(":"):  # comment / keep-alive (e.g. ": OPENROUTER PROCESSING")
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        return None  # id:, retry: carry nothing we need

    def flush(self) -> tuple[str, str] | None:
        event, self._event = self._event, ""
        if not self._data:
            return None
        data, self._data = "\n".join(self._data), []
        return event, data


def parse_json(data: str) -> dict[str, Any]:
    """One event's JSON object; anything else is a broken stream (PROVIDER_UNAVAILABLE).
    orjson (~4x the stdlib's speed, one call per event); what it refuses and the stdlib
    takes (NaN, Infinity) goes to the stdlib. (Integers beyond 64 bits come out as floats:
    no field of a model stream is one — tool arguments arrive as JSON text.)"""
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        chunk = None
    if chunk is None:
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise HarnessError(
                ErrorKind.PROVIDER_UNAVAILABLE, f"malformed chunk in stream: {data[:200]!r}"
            ) from exc
    if not isinstance(chunk, dict):
        raise HarnessError(ErrorKind.PROVIDER_UNAVAILABLE, f"malformed chunk in stream: {data[:200]!r}")
    return chunk


def parse_event(data: bytes) -> dict[str, Any]:
    """`parse_json` of an event's data as received: orjson reads the bytes (no str made
    first); anything else (not UTF-8, not an object, NaN) takes `parse_json` on the text the
    line decoding gave, so the result and the errors are the same."""
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        return parse_json(data.decode(errors="replace"))
    if type(chunk) is dict:
        return chunk
    return parse_json(data.decode(errors="replace"))


class LineSplitter:
    """Bytes as they arrive → complete lines (without their ending: LF, CRLF or CR, as SSE
    allows), decoded as UTF-8. Splitting before decoding is safe: CR and LF never occur
    inside a multi-byte UTF-8 sequence."""

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, chunk: bytes) -> list[str]:
        data = self._rest + chunk if self._rest else chunk
        parts = data.splitlines(keepends=True)
        # An unterminated last part waits for more; so does a trailing CR, which may be
        # the first half of a CRLF split across two reads.
        self._rest = parts.pop() if parts and not parts[-1].endswith(b"\n") else b""
        return [_decode(p) for p in parts]

    def close(self) -> list[str]:
        rest, self._rest = self._rest, b""
        return [_decode(rest)] if rest else []


def _decode(line: bytes) -> str:
    return line.rstrip(b"\r\n").decode(errors="replace")


class EventSplitter:
    """Bytes as they arrive → complete events, as `LineSplitter` + `SSEDecoder` give them
    (the data as bytes, not decoded). Line ends are made LF first (CRLF, then a lone CR; a
    CR ending the bytes read so far waits: it may be half of a CRLF), then the events are
    cut at their blank line ("\\n\\n"). Each event's lines are its own: the decoder's state
    (the event name, the data lines) is reset at every blank line."""

    __slots__ = ("_rest",)

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, chunk: bytes) -> list[Event]:
        data = self._rest + chunk if self._rest else chunk
        hold = b""
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
            if data.endswith(b"\r"):
                data, hold = data[:-1], b"\r"
            data = data.replace(b"\r", b"\n")
        blocks = data.split(b"\n\n")
        self._rest = blocks.pop() + hold
        # One data line is the usual event: taken by a comparison and a slice (issue 32: a
        # `startswith` and an `append` per event before); any other block by `_event`.
        out = [
            ("", block[6:]) if block[:6] == b"data: " and b"\n" not in block else _event(block)
            for block in blocks
        ]
        if None in out:  # a block with no data (a comment, a keep-alive)
            return [event for event in out if event is not None]
        return out  # type: ignore[return-value]

    def close(self) -> list[Event]:
        """The events of what is left at the end of the body (the last event may lack
        its blank line, as `SSEDecoder.flush` takes it)."""
        rest, self._rest = self._rest, b""
        if not rest:
            return []
        out = self.feed(rest + b"\n\n")  # (a held-back CR is a line end now)
        self._rest = b""
        return out


def _event(block: bytes) -> Event | None:
    """The event of one block's lines (LF-separated; a blank line can only lead it)."""
    if block.startswith(b"event: "):  # `event:` then one `data:` line (Anthropic, Responses)
        nl = block.find(b"\n")
        if nl > 0 and block.startswith(b"data: ", nl + 1) and block.find(b"\n", nl + 1) < 0:
            return block[7:nl].decode(errors="replace"), block[nl + 7 :]
    name = b""
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line.startswith(b":"):  # (a blank line before any field: no event)
            continue
        field, _, value = line.partition(b":")
        value = value.removeprefix(b" ")
        if field == b"data":
            data.append(value)
        elif field == b"event":
            name = value
    if not data:
        return None
    return name.decode(errors="replace"), b"\n".join(data)


class SSEReader:
    """The events of one streamed response, a network read at a time: `await read()` gives
    the events that read completed (maybe none), None once the body ended. The caller calls
    `first_token()` once real output arrived (keep-alives and bookkeeping events do not
    count; `started` says whether it did) and `end()` at the end marker ([DONE],
    response.completed), leaving the rest of that list: the next `read()` reads the body's
    remainder without parsing it, and gives None.

    One timed read per network chunk (one chunk usually holds several events), straight from
    the lean transport's connection when the body has no content coding (`Answer.lean`)."""

    def __init__(
        self,
        answer: Answer,
        deadline: float | None,
        *,
        base_url: str,
        first_token_timeout: float | None,
        idle_timeout: float | None,
    ) -> None:
        self._answer = answer
        self._body = answer.lean
        self.deadline = deadline
        self._base_url = base_url
        self._first_token_timeout = first_token_timeout
        self._idle_timeout = idle_timeout
        self._ended = False
        self._finished = False
        self.started = False  # real output seen: the idle timeout applies from now on
        self._splitter = EventSplitter()
        self._loop = asyncio.get_running_loop()

    def first_token(self) -> None:
        self.deadline = None  # from now on only the idle timeout applies
        self.started = True

    def end(self) -> None:
        self._ended = True

    async def read(self) -> list[Event] | None:
        """The events the next network read completes; None at the end of the body
        (transport failures and the stream timeouts raise `HarnessError`)."""
        if self._finished:
            return None
        if self._ended:
            self._finished = True
            if self._body is not None:
                await drain_lean(self._body, limit_s=self._idle_timeout)
            else:
                await drain(self._answer.chunks(), limit_s=self._idle_timeout)
            return None
        body = self._body
        if body is not None:
            # Read straight from the connection, the stream timeouts as the read's own
            # deadline: no timer per chunk (see read_deadline).
            if self.deadline is not None:
                until, expired = self.deadline, self._no_first_token
            elif self.started and self._idle_timeout is not None:
                until, expired = self._loop.time() + self._idle_timeout, self._stalled
            else:
                until, expired = None, None
            try:
                chunk = await body.read(until, expired)
            except httpx.RequestError as exc:
                raise transport_error(exc, self._base_url) from exc
        else:
            chunk = await guard(
                anext(self._answer.chunks(), None),
                self.deadline,
                base_url=self._base_url,
                first_token_timeout=self._first_token_timeout,
                idle_timeout=self._idle_timeout if self.started else None,
            )
        if chunk is None:
            self._finished = True
            return self._splitter.close()
        return self._splitter.feed(chunk)

    def _no_first_token(self) -> HarnessError:
        return no_first_token(self._first_token_timeout)

    def _stalled(self) -> HarnessError:
        return stalled(self._idle_timeout)
