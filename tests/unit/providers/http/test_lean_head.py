"""The lean transport's response head parse (`http_lean._parse_head`): all the header lines
in one regex pass (issue 32), with exactly the results and the errors of the line-by-line
parse it replaced (a split, then a partition and two strips per line) — which still decides
every head with a line the pass does not take."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentd.providers.http import lean


def _line_by_line(head: bytes) -> tuple[int, bytes, bytes, list[tuple[bytes, bytes]]]:
    """The parse before issue 32's, as it was."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise httpx.RemoteProtocolError(f"not an HTTP/1.x response: {lines[0][:80]!r}")
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise httpx.RemoteProtocolError(f"malformed header line {line[:80]!r}")
        headers.append((name, value.strip()))
    return int(parts[1]), parts[2] if len(parts) > 2 else b"", parts[0], headers


def _outcome(parse: object, head: bytes) -> object:
    try:
        return parse(head)  # type: ignore[operator]
    except httpx.RemoteProtocolError as exc:
        return ("raised", str(exc))


# Header lines built from the bytes that matter to either parse: blanks of every kind, CR
# and LF alone, colons, and plain name and value characters; free-form, and shaped as a
# header (name, colon, value) with any blanks around each part.
_PIECE = st.sampled_from(
    [b"a", b"Content-Type", b"x-y", b":", b" ", b"\t", b"\x0b", b"\x0c", b"\r", b"\n", b"v/1"]
)
_BLANKS = st.lists(st.sampled_from([b" ", b"\t", b"\x0b", b"\x0c", b"\r", b"\n"]), max_size=2).map(b"".join)
_WORD = st.lists(_PIECE, max_size=3).map(b"".join)
_LINE = st.one_of(
    st.lists(_PIECE, max_size=8).map(b"".join),
    st.tuples(_BLANKS, _WORD, _BLANKS, _BLANKS, _WORD, _BLANKS).map(
        lambda p: p[0] + p[1] + p[2] + b":" + p[3] + p[4] + p[5]
    ),
)
_STATUS = st.sampled_from([b"HTTP/1.1 200 OK", b"HTTP/1.0 404", b"HTTP/1.1 200 ", b"HTTP/2 200 OK", b"junk"])


@settings(max_examples=500, deadline=None)
@given(_STATUS, st.lists(_LINE, max_size=6))
def test_the_head_parses_as_line_by_line(status: bytes, lines: list[bytes]) -> None:
    head = b"\r\n".join([status, *lines])
    assert _outcome(lean._parse_head, head) == _outcome(_line_by_line, head)


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\ndate: x\r\nserver: uvicorn\r\ncontent-type: text/event-stream; charset=utf-8"
        b"\r\ncache-control: no-cache\r\ntransfer-encoding: chunked",
        b"HTTP/1.1 200 OK\r\nContent-Length:5\r\nX-Empty:\r\nX-Blank: \t ",
        b"HTTP/1.1 200 OK",
    ],
)
def test_usual_heads_take_the_one_pass(head: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(lines: list[bytes]) -> list[tuple[bytes, bytes]]:
        raise AssertionError("the line-by-line parse ran")

    want = _line_by_line(head)
    monkeypatch.setattr(lean, "_header_lines", refused)
    assert lean._parse_head(head) == want


@pytest.mark.parametrize("name", [b"content-type", b"Content-Type", b"CONTENT-TYPE", b"cOnTeNt-TyPe"])
def test_header_kinds_are_case_blind_and_learnt_once(name: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lean, "_NAME_KINDS", {})
    assert lean._name_kind(name) == lean._CONTENT_TYPE
    assert lean._NAME_KINDS == {name: lean._CONTENT_TYPE}
    assert lean._name_kind(b"Server") == 0


def test_the_learnt_names_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lean, "_NAME_KINDS", {})
    for i in range(lean._MAX_NAMES + 5):
        lean._name_kind(b"x-%d" % i)
    assert len(lean._NAME_KINDS) <= lean._MAX_NAMES
