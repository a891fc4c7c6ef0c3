"""agentd/store/export_codec.py: the session export format round-trips, and every kind of
damaged, foreign or newer file is refused with one line naming where and why."""

from __future__ import annotations

import orjson
import pytest

from agentd.store.export_codec import (
    REDACTED,
    VERSION,
    ExportFormatError,
    SessionBundle,
    Snapshot,
    decode,
    encode_all,
)

SECRET = "sk-live-0123456789abcdef"


def _bundle() -> SessionBundle:
    session = {
        "id": "sess_1",
        "title": "t",
        "cwd": "/w",
        "mode": "default",
        "plan": False,
        "model": "m",
        "agent": "default",
        "permissionMemory": {},
        "goal": {"objective": "ship it"},
        "usage": {"calls": 2},
        "createdAt": "2026-01-01T00:00:00+00:00",
        "updatedAt": "2026-01-01T00:00:01+00:00",
    }
    bundle = SessionBundle(session)
    bundle.events = [
        (1, "user_message", {"text": f"my key is {SECRET}"}),
        (3, "turn_ended", {"turnId": "t1"}),
    ]
    bundle.messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    bundle.queue = [
        {"id": "p1", "kind": "prompt", "blocks": [{"type": "text", "text": "next"}], "owner": "a"}
    ]
    bundle.snapshots = [
        Snapshot("t1", "a.txt", "present", 3, b"\x00\xffz"),
        Snapshot("t1", "n.txt", "absent", 0, None),
    ]
    bundle.cuts = [(1, 2, None)]
    bundle.files = [("src/x.py", b"print(1)\n")]
    return bundle


def _lines(data: bytes) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in data.splitlines()]


def _reseal(objs: list[dict[str, object]]) -> bytes:
    """Lines with a valid end line again: what a careful forger (or a newer agentd) writes."""
    import hashlib

    body = [orjson.dumps(o) for o in objs if o.get("type") != "end"]
    end = {"type": "end", "lines": len(body), "sha256": hashlib.sha256(b"\n".join(body)).hexdigest()}
    return b"\n".join([*body, orjson.dumps(end)]) + b"\n"


def test_round_trip_keeps_everything_but_secrets() -> None:
    data = encode_all(_bundle(), "2026-01-02T00:00:00+00:00", [SECRET])
    back = decode(data)
    want = _bundle()
    assert back.session == want.session
    assert back.events[1:] == want.events[1:]
    assert back.events[0][2] == {"text": f"my key is {REDACTED}"}
    assert SECRET.encode() not in data
    assert (back.messages, back.queue, back.snapshots, back.cuts, back.files) == (
        want.messages,
        want.queue,
        want.snapshots,
        want.cuts,
        want.files,
    )
    objs = _lines(data)
    assert objs[0]["type"] == "header" and objs[0]["version"] == VERSION and objs[-1]["type"] == "end"


def _refused(data: bytes) -> str:
    with pytest.raises(ExportFormatError) as err:
        decode(data)
    message = str(err.value)
    assert "\n" not in message
    return message


def test_damaged_files_are_refused_naming_the_line() -> None:
    good = encode_all(_bundle(), "now")
    lines = good.splitlines()
    cases = {
        b"": "empty file",
        b"hello\n": "line 1: corrupt: not a JSON object",
        b'{"type": "header", "format": "other"}\n': "not an agentd session export",
        b"\n".join(lines[:-1]) + b"\n": "no end line (the file is truncated)",
        b"\n".join(lines[:3]) + b"\n": "no end line",
        good[:-5]: "line 11: corrupt: the file is truncated (its last line is cut)",
        good.replace(b"hello", b"HELLO"): "does not match its checksum",
        good + good.splitlines()[1] + b"\n": "lines after the end line",
        b"\n".join([*lines[:2], b"[1, 2]", *lines[2:]]) + b"\n": "line 3: corrupt: not a JSON object",
    }
    for data, expected in cases.items():
        assert expected in _refused(data), (data[:80], expected)


def test_a_resealed_file_is_still_checked_line_by_line() -> None:
    objs = _lines(encode_all(_bundle(), "now"))
    bad_path = [*objs[:-1], {"type": "file", "path": "../etc/passwd", "content": ""}]
    assert "not a relative path inside the workspace" in _refused(_reseal(bad_path))
    absolute = [
        *objs[:-1],
        {"type": "snapshot", "turnId": "t", "path": "/etc/x", "state": "absent", "size": 0},
    ]
    assert "not a relative path" in _refused(_reseal(absolute))
    unknown = [*objs[:-1], {"type": "mystery"}]
    assert "unknown line type 'mystery'" in _refused(_reseal(unknown))
    events = [o for o in objs if o["type"] == "event"]
    out_of_order = [objs[0], *reversed(events)]
    assert "event seq 1 after 3" in _refused(_reseal(out_of_order))
    wrong_type = [objs[0], {"type": "event", "seq": "1", "kind": "k", "payload": {}}]
    assert "'seq' is missing or of the wrong type" in _refused(_reseal(wrong_type))
    bad_b64 = [*objs[:-1], {"type": "file", "path": "x", "content": "!!!"}]
    assert "not valid base64" in _refused(_reseal(bad_b64))


def test_a_newer_version_is_refused_before_anything_else() -> None:
    objs = _lines(encode_all(_bundle(), "now"))
    objs[0]["version"] = VERSION + 1
    message = _refused(_reseal(objs))
    assert (
        message
        == f"line 1: format version {VERSION + 1} is newer than this agentd reads ({VERSION}); upgrade agentd"
    )
