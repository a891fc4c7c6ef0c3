"""`agentd acp` answers the editor's `initialize` before the server has loaded (issue 32 item 2).

An editor sends `initialize` first and gives up if the answer is slow, but the answer depends
on nothing the server loads: it is the protocol's constants. So the command reads stdin's
first line itself and answers an `initialize` from this light module (orjson and the
protocol's pydantic models) while the app, the store and the session machinery load in a
worker thread; everything read past that line, and the client's capabilities, are handed to
the real connection (`serve_stdio`), which then behaves as if it had answered itself.
Anything the real path would answer differently (a batch, a notification, invalid params,
an oversized or too deeply nested line) is not answered here but handed over as is.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

import orjson
from pydantic import ValidationError

from agentd import __version__
from agentd.protocol import (
    EXTENSIONS,
    PROTOCOL_VERSION,
    ErrorCode,
    InitializeParams,
    OptIn,
    Request,
    RpcError,
    Served,
    error_response,
    response,
)
from agentd.transport.guards import check_depth, prompt_of

if TYPE_CHECKING:
    from agentd.transport.state import Peer

_CHUNK = 64 * 1024


def initialize_result() -> dict[str, Any]:
    """What agentd answers to `initialize` (the handler's result, and the early answer's)."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": True, "sse": False},
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
        },
        "authMethods": [],
        "agentInfo": {"name": "agentd", "title": "agentd", "version": __version__},
        "_meta": {"agentd": {"extensions": list(EXTENSIONS)}},
    }


class LoadFailed(RuntimeError):
    """The server did not load after `initialize` was answered (its pending requests have
    been answered with the reason): the command says so in one line."""


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def accept_initialize(conn: Peer, params: InitializeParams) -> None:
    """The client's `initialize` taken by its connection: what it can show, and agentd's
    own traffic only if it asked (the handler's, and the early answer's hand-over)."""
    conn.client_capabilities = params.client_capabilities
    conn.opt_in = OptIn.of(params.meta)
    conn.initialized = True


@dataclass
class EarlyStart:
    """What happened on stdio before the server loaded: the protocol's stdout, the bytes read
    from stdin that the connection must read first, and the `initialize` answered here."""

    out: BinaryIO
    unread: bytes = b""
    initialized: InitializeParams | None = None


def protocol_stdout() -> BinaryIO:
    """A private handle on the real stdout for the protocol; fd 1 then points at stderr, so a
    stray print (or a library's banner) can never corrupt the message stream."""
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def _first_line(limit: int) -> tuple[bytes, bytes]:
    """Stdin's first non-blank line and what was read past it, read straight from the file
    descriptor (a buffered `sys.stdin` would keep bytes the connection's reader never sees).
    No line (end of input, or `limit` bytes without a newline): (b"", everything read)."""
    data = b""
    while True:
        end = data.find(b"\n")
        if end >= 0:
            line, rest = data[:end], data[end + 1 :]
            if line.strip():
                return line, rest
            data = rest
            continue
        if len(data) > limit:
            return b"", data
        chunk = os.read(0, _CHUNK)
        if not chunk:
            return b"", data
        data += chunk


def early_initialize(
    line: bytes, max_frame_bytes: int, max_json_depth: int
) -> tuple[bytes, InitializeParams] | None:
    """The answer to `line` when it is an `initialize` request that the dispatcher would
    answer with its result (the same bytes), with the client's params; else None."""
    if len(line) > max_frame_bytes:
        return None
    try:
        raw = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(raw, dict) or raw.get("method") != Served.INITIALIZE:
        return None
    rid = raw.get("id")
    if not isinstance(rid, (int, str)) or isinstance(rid, bool) or prompt_of(raw) is not None:
        return None
    if check_depth(raw, max_json_depth) is not None:
        return None
    try:
        request = Request.model_validate(raw)
        params = request.params if request.params is not None else {}
        if not isinstance(params, dict):
            return None
        init = InitializeParams.model_validate(params)
    except ValidationError:
        return None
    return orjson.dumps(response(request.id, initialize_result())) + b"\n", init


def answer_initialize(
    out: BinaryIO, max_frame_bytes: int, max_json_depth: int, *, answer: bool = True
) -> EarlyStart:
    """Read stdin's first message; answer it when it is `initialize` (and `answer`: not
    when the server already failed to load). Blocks until a line or the end of input."""
    line, rest = _first_line(max_frame_bytes * 6)
    early = early_initialize(line, max_frame_bytes, max_json_depth) if line and answer else None
    if early is None:
        return EarlyStart(out, line + b"\n" + rest if line else rest)
    text, params = early
    out.write(text)
    return EarlyStart(out, rest, params)


def refuse_pending(start: EarlyStart, reason: str) -> int:
    """The server failed to load: every request read so far, or waiting on stdin now, is
    answered with an error saying why (an editor shows it instead of waiting for ever).
    Returns how many were answered."""
    data = start.unread
    try:
        os.set_blocking(0, False)
        try:
            while chunk := os.read(0, _CHUNK):
                data += chunk
        finally:
            os.set_blocking(0, True)  # the descriptor may be shared (a terminal)
    except OSError:
        pass  # nothing more waiting (BlockingIOError), or stdin is gone
    err = RpcError(
        ErrorCode.INTERNAL_ERROR, f"agentd could not start: {reason}", {"reason": "startup_failed"}
    )
    answered = 0
    for line in data.splitlines():
        try:
            raw = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        for item in raw if isinstance(raw, list) else [raw]:
            rid = item.get("id") if isinstance(item, dict) and "method" in item else None
            if isinstance(rid, (int, str)) and not isinstance(rid, bool):
                start.out.write(orjson.dumps(error_response(rid, err)) + b"\n")
                answered += 1
    return answered
