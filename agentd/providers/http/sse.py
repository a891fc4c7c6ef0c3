"""Reading a Server-Sent Events body under the stream timeouts: lines → (event name, data),
the first-token deadline until the provider saw real output, the idle timeout after it, and
the body drained after the end marker so the connection is reused."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

from agentd.core import ErrorKind, HarnessError
from agentd.providers.http.common import drain, guard, no_first_token, stalled, transport_error
from agentd.providers.http.lean import body_chunks, lean_body


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


class SSEReader:
    """The events of one streamed response. The caller calls `first_token()` once real
    output arrived (keep-alives and bookkeeping events do not count) and `end()` at the end
    marker ([DONE], response.completed): the iteration then reads the body's remainder
    without yielding it, and stops.

    The body is read a network chunk at a time (each read under the stream timeouts) and
    split into lines here: one chunk usually holds several events, so this is one timed
    read per chunk rather than one per line through httpx's text and line decoders."""

    def __init__(
        self,
        response: httpx.Response,
        deadline: float | None,
        *,
        base_url: str,
        first_token_timeout: float | None,
        idle_timeout: float | None,
    ) -> None:
        self._chunks = body_chunks(response)
        self._body = lean_body(response)
        self.deadline = deadline
        self._base_url = base_url
        self._first_token_timeout = first_token_timeout
        self._idle_timeout = idle_timeout
        self._ended = False
        self._started = False  # real output seen: the idle timeout applies from now on

    def first_token(self) -> None:
        self.deadline = None  # from now on only the idle timeout applies
        self._started = True

    async def events(self) -> AsyncIterator[tuple[str, str]]:
        """(event name, data) until the body ends; transport failures raise `HarnessError`."""
        decoder = SSEDecoder()
        splitter = LineSplitter()
        loop = asyncio.get_running_loop()
        while True:
            if self._body is not None:
                # Read straight from the connection, the stream timeouts as the read's own
                # deadline: no timer per chunk (see read_deadline).
                if self.deadline is not None:
                    until, expired = self.deadline, self._no_first_token
                elif self._started and self._idle_timeout is not None:
                    until, expired = loop.time() + self._idle_timeout, self._stalled
                else:
                    until, expired = None, None
                try:
                    chunk = await self._body.read(until, expired)
                except httpx.RequestError as exc:
                    raise transport_error(exc, self._base_url) from exc
            else:
                chunk = await guard(
                    anext(self._chunks, None),
                    self.deadline,
                    base_url=self._base_url,
                    first_token_timeout=self._first_token_timeout,
                    idle_timeout=self._idle_timeout if self._started else None,
                )
            for line in splitter.feed(chunk) if chunk is not None else splitter.close():
                item = decoder.feed(line)
                if item is not None:
                    yield item
                    if self._ended:
                        await drain(self._chunks, limit_s=self._idle_timeout)
                        return
            if chunk is None:
                item = decoder.flush()
                if item is not None:
                    yield item
                return

    def end(self) -> None:
        self._ended = True

    def _no_first_token(self) -> HarnessError:
        return no_first_token(self._first_token_timeout)

    def _stalled(self) -> HarnessError:
        return stalled(self._idle_timeout)
