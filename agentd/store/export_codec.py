"""The session export format (issue 33 item 1): a versioned JSONL, encoded and decoded here
with no I/O, so the CLI, the protocol and the tests share one reading of it.

One JSON object a line, each with a `type`:

- `header` (first): `format` (`agentd.session`), `version`, `exportedAt`, and `session` —
  title, cwd, modes, model, agent, goal, usage, permission memory, timestamps.
- `event` (`seq`, `kind`, `payload`) in seq order: the durable event log, what a replay sends.
- `message` (`idx`, `data`) in order: the conversation the model sees.
- `queued` (`prompt`): a prompt waiting in the queue (only the exporting owner's).
- `snapshot` (`turnId`, `path`, `state`, `size`, `content` base64 or null): a file's state
  before a turn first changed it (what rewind and revert restore); `cut`: which turns a
  rewind can reach (`fromSeq`, `toSeq`, `messageIdx`).
- `file` (`path`, `content` base64): a workspace file, only when asked for.
- `end` (last): `lines` before it and the `sha256` of those lines joined by `\\n` — a
  truncated or edited file is refused as corrupt.

What never goes in: the lease, the fencing tokens, retry buckets, team shares, API tokens,
other principals' queued prompts, and the values of the server's secrets (replaced by
`[redacted]` wherever they occur).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import orjson

FORMAT = "agentd.session"
VERSION = 1
REDACTED = "[redacted]"
MAX_LINE_BYTES = 64 * 1024 * 1024  # one event or snapshot; a longer line is corrupt


class ExportFormatError(ValueError):
    """A file that cannot be imported; its message is one line naming where and why."""


@dataclass(frozen=True)
class Snapshot:
    turn_id: str
    path: str
    state: str
    size: int
    content: bytes | None


@dataclass
class SessionBundle:
    """Everything one session export holds (the store's rows, as plain values)."""

    session: dict[str, Any]
    events: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    queue: list[dict[str, Any]] = field(default_factory=list)
    snapshots: list[Snapshot] = field(default_factory=list)
    cuts: list[tuple[int, int, int | None]] = field(default_factory=list)
    files: list[tuple[str, bytes]] = field(default_factory=list)


SESSION_KEYS = (
    "id",
    "title",
    "cwd",
    "mode",
    "plan",
    "model",
    "agent",
    "permissionMemory",
    "goal",
    "usage",
    "createdAt",
    "updatedAt",
)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def scrub(value: Any, secrets: tuple[str, ...]) -> Any:
    """`value` with every occurrence of a secret in its strings replaced by `[redacted]`."""
    if not secrets:
        return value
    if isinstance(value, str):
        for s in secrets:
            if s in value:
                value = value.replace(s, REDACTED)
        return value
    if isinstance(value, dict):
        return {k: scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, secrets) for v in value]
    return value


def _body_lines(
    bundle: SessionBundle, exported_at: str, secrets: tuple[str, ...]
) -> Iterator[dict[str, Any]]:
    session = {k: bundle.session.get(k) for k in SESSION_KEYS}
    head = {"format": FORMAT, "version": VERSION, "exportedAt": exported_at}
    yield {"type": "header", **head, "session": session}
    for seq, kind, payload in bundle.events:
        yield {"type": "event", "seq": seq, "kind": kind, "payload": payload}
    for idx, data in enumerate(bundle.messages):
        yield {"type": "message", "idx": idx, "data": data}
    for prompt in bundle.queue:
        yield {"type": "queued", "prompt": prompt}
    for s in bundle.snapshots:
        snap = {"turnId": s.turn_id, "path": s.path, "state": s.state, "size": s.size}
        yield {"type": "snapshot", **snap, "content": _b64(s.content)}
    for from_seq, to_seq, message_idx in bundle.cuts:
        yield {"type": "cut", "fromSeq": from_seq, "toSeq": to_seq, "messageIdx": message_idx}
    for path, content in bundle.files:
        yield {"type": "file", "path": path, "content": _b64(content)}


def encode(bundle: SessionBundle, exported_at: str, secrets: Iterable[str] = ()) -> Iterator[bytes]:
    """The export, one line (with its newline) at a time."""
    kept = tuple(s for s in secrets if s)
    digest = hashlib.sha256()
    count = 0
    for obj in _body_lines(bundle, exported_at, kept):
        # File bytes are base64 (never a secret's text); everything else is scrubbed.
        line = orjson.dumps(obj if obj["type"] in ("file", "snapshot") else scrub(obj, kept))
        digest.update(line if count == 0 else b"\n" + line)
        count += 1
        yield line + b"\n"
    yield orjson.dumps({"type": "end", "lines": count, "sha256": digest.hexdigest()}) + b"\n"


def encode_all(bundle: SessionBundle, exported_at: str, secrets: Iterable[str] = ()) -> bytes:
    return b"".join(encode(bundle, exported_at, secrets))


# ------------------------------------------------------------------------------ decoding


def _fail(line_no: int, why: str) -> ExportFormatError:
    return ExportFormatError(f"line {line_no}: {why}" if line_no else why)


def _need(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], n: int) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise _fail(n, f"corrupt {obj.get('type')} line: {key!r} is missing or of the wrong type")
    return value


def _unb64(value: Any, n: int) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _fail(n, "corrupt line: content is not base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise _fail(n, "corrupt line: content is not valid base64") from None


def safe_relative(path: str, n: int = 0) -> str:
    """A path inside the workspace: relative, no `..`, no empty or NUL parts."""
    p = PurePosixPath(path)
    if not path or "\0" in path or p.is_absolute() or ".." in p.parts or str(p) in ("", "."):
        raise _fail(n, f"path {path!r} is not a relative path inside the workspace")
    return p.as_posix()


def _header(obj: dict[str, Any]) -> dict[str, Any]:
    if obj.get("type") != "header" or obj.get("format") != FORMAT:
        raise _fail(1, f"not an agentd session export (the first line is no {FORMAT!r} header)")
    version = obj.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _fail(1, "corrupt header: 'version' is not a positive integer")
    if version > VERSION:
        newer = f"format version {version} is newer than this agentd reads ({VERSION})"
        raise _fail(1, f"{newer}; upgrade agentd")
    session: dict[str, Any] = _need(obj, "session", dict, 1)
    for key in ("cwd", "mode", "model", "agent"):
        _need(session, key, str, 1)
    return session


def _decode_line(raw: bytes, n: int) -> dict[str, Any]:
    if len(raw) > MAX_LINE_BYTES:
        raise _fail(n, f"corrupt: a line over {MAX_LINE_BYTES} bytes")
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise _fail(n, "corrupt: not a JSON object") from None
    if not isinstance(obj, dict):
        raise _fail(n, "corrupt: not a JSON object")
    return obj


def decode(data: bytes) -> SessionBundle:
    """The bundle in `data`, fully checked; raises `ExportFormatError` (one line) otherwise."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if not lines or not lines[0].strip():
        raise ExportFormatError("empty file: not an agentd session export")
    bundle = SessionBundle(_header(_decode_line(lines[0], 1)))
    if not data.endswith(b"\n"):  # every line of an export ends with one, the end line too
        raise _fail(len(lines), "corrupt: the file is truncated (its last line is cut)")
    digest = hashlib.sha256(lines[0])
    last_seq = 0
    for i, raw in enumerate(lines[1:], start=2):
        obj = _decode_line(raw, i)
        kind = obj.get("type")
        if kind == "end":
            if i != len(lines):
                raise _fail(i, "corrupt: lines after the end line")
            if obj.get("lines") != i - 1 or obj.get("sha256") != digest.hexdigest():
                raise _fail(i, "corrupt: the content does not match its checksum (edited or truncated)")
            return bundle
        digest.update(b"\n" + raw)
        if kind == "event":
            seq = _need(obj, "seq", int, i)
            if seq <= last_seq:
                raise _fail(i, f"corrupt: event seq {seq} after {last_seq}")
            last_seq = seq
            bundle.events.append((seq, _need(obj, "kind", str, i), _need(obj, "payload", dict, i)))
        elif kind == "message":
            if _need(obj, "idx", int, i) != len(bundle.messages):
                raise _fail(i, "corrupt: messages out of order")
            bundle.messages.append(_need(obj, "data", dict, i))
        elif kind == "queued":
            prompt = _need(obj, "prompt", dict, i)
            for key, typ in (("id", str), ("kind", str), ("blocks", list)):
                _need(prompt, key, typ, i)
            bundle.queue.append(prompt)
        elif kind == "snapshot":
            path = safe_relative(_need(obj, "path", str, i), i)
            state = _need(obj, "state", str, i)
            content = _unb64(obj.get("content"), i)
            snap = Snapshot(_need(obj, "turnId", str, i), path, state, _need(obj, "size", int, i), content)
            bundle.snapshots.append(snap)
        elif kind == "cut":
            idx = obj.get("messageIdx")
            if idx is not None and not isinstance(idx, int):
                raise _fail(i, "corrupt cut line: 'messageIdx' is not an integer")
            bundle.cuts.append((_need(obj, "fromSeq", int, i), _need(obj, "toSeq", int, i), idx))
        elif kind == "file":
            content = _unb64(_need(obj, "content", str, i), i)
            bundle.files.append((safe_relative(_need(obj, "path", str, i), i), content or b""))
        else:
            raise _fail(i, f"corrupt: unknown line type {kind!r}")
    raise _fail(len(lines), "corrupt: no end line (the file is truncated)")
